"""Prints the in-cluster deployment graph of the cluster stack (not a test).

CloudFormation creates a resource once everything it depends on (DependsOn, Ref, GetAtt) exists,
so the longest dependency chain bounds the deployment time. This lists the kubectl manifests and
Helm releases of the default app's cluster stack and the longest chain between them.
Usage: python benchmarks/cluster_critical_path.py [-c key=value ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import aws_cdk as cdk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import build_app
from stages.environment_stage import EnvironmentStage

KUBERNETES_TYPES = {
    "Custom::AWSCDK-EKS-KubernetesResource": "manifest",
    "Custom::AWSCDK-EKS-HelmChart": "helm",
}


def references(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = set()
        for key, inner in value.items():
            if key == "Ref":
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else inner.split(".")[0])
            else:
                found |= references(inner)
        return found
    if isinstance(value, list):
        return set().union(*(references(item) for item in value)) if value else set()
    return set()


def dependency_graph(template: dict[str, Any]) -> dict[str, set[str]]:
    resources = template["Resources"]
    graph = {}
    for logical_id, resource in resources.items():
        depends_on = resource.get("DependsOn", [])
        edges = set([depends_on] if isinstance(depends_on, str) else depends_on)
        edges |= references(resource.get("Properties", {}))
        graph[logical_id] = {edge for edge in edges if edge in resources}
    return graph


def longest_kubernetes_chain(template: dict[str, Any]) -> list[str]:
    """The longest chain of kubectl/Helm resources, following dependencies through any resource."""
    graph = dependency_graph(template)
    kinds = {k: r["Type"] for k, r in template["Resources"].items()}

    @cache
    def chain(logical_id: str) -> tuple[str, ...]:
        below = longest([chain(edge) for edge in graph[logical_id]])
        return (*below, logical_id) if kinds[logical_id] in KUBERNETES_TYPES else below

    return list(longest([chain(k) for k in graph]))


def longest(chains: list[tuple[str, ...]]) -> tuple[str, ...]:
    return max(chains, key=len) if chains else ()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-c", dest="context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parents[1]
    context = json.loads((repo / "cdk.json").read_text())["context"]
    context.update(dict(item.split("=", 1) for item in args.context))
    with tempfile.TemporaryDirectory() as outdir:
        app = build_app(cdk.App(outdir=outdir, context=context))
        app.synth()
        stage = next(c for c in app.node.children if isinstance(c, EnvironmentStage))
        template = json.loads((Path(stage.outdir) / stage.cluster.template_file).read_text())
    resources = template["Resources"]
    kubernetes = {k: r for k, r in resources.items() if r["Type"] in KUBERNETES_TYPES}
    print(f"cluster stack: {len(resources)} resources, {len(kubernetes)} kubectl/Helm resources")
    print("kind     | logical ID")
    for logical_id, resource in sorted(kubernetes.items()):
        print(f"{KUBERNETES_TYPES[resource['Type']]:8} | {logical_id}")
    chain = longest_kubernetes_chain(template)
    print(f"longest kubectl/Helm chain ({len(chain)}): " + " -> ".join(chain))


if __name__ == "__main__":
    main()
