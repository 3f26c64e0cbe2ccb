"""Shared fixtures of the chart tests: seed-default charts, lookups and upstream CRD schemas."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import jsonschema
import pytest
import yaml

from charts.cleartaints import ClearTaintsChart, ClearTaintsNodes, ClearTaintsProps
from charts.karpenter_node_pool import KarpenterNodePoolChart, KarpenterNodePoolProps
from charts.multus import MultusChart, MultusProps
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps, PodIpsNodes
from charts.nad_cni_configs import (
    NetworkAttachment,
    cni_binaries,
    cni_host_files,
    whereabouts_range_and_gateway,
)
from charts.network_attachments import NetworkAttachmentsChart, NetworkAttachmentsProps
from charts.sample_workloads import SampleWorkloadsChart, SampleWorkloadsProps, ZoneWorkload
from charts.whereabouts import WhereaboutsChart, WhereaboutsProps
from config import AppConfig
from config.images import ImagesConfig
from config.network_plan import network_attachment_name
from config.node_labels import NodeTaint
from stacks.cluster_props import node_pool_props as cluster_node_pool_props
from testing_support.crd_rules import rule_violations
from tests.helpers import STRINGIFIED_TOKEN as TOKEN
from tests.helpers import karpenter_crd_files, shared_reference, tolerates

Manifest = dict[str, Any]

# The seed deployment (DESIGN.md): two AZs, two Multus networks, a /27 reservation per subnet.
SEED_ZONES = ("us-west-2a", "us-west-2b")
SEED_MULTUS_SUBNETS = {
    "multus1": (("10.0.4.0/24", "10.0.4.32/27"), ("10.0.5.0/24", "10.0.5.32/27")),
    "multus2": (("10.0.6.0/24", "10.0.6.32/27"), ("10.0.7.0/24", "10.0.7.32/27")),
}
# The system node group's label and taint (stacks.cluster_props.CONTROLLER_NODES).
SYSTEM_NODES_LABELS = {"karpenter.sh/controller": "true"}
SYSTEM_NODES_TAINT = NodeTaint(key="karpenter.sh/controller", value="true", effect="NoSchedule")


def seed_attachments() -> list[NetworkAttachment]:
    attachments = []
    for network, subnets in SEED_MULTUS_SUBNETS.items():
        for zone, (subnet, reservation) in zip(SEED_ZONES, subnets, strict=True):
            whereabouts_range, gateway = whereabouts_range_and_gateway(subnet, reservation)
            attachments.append(
                NetworkAttachment(
                    name=network_attachment_name(network, zone),
                    master_interface=network,
                    ipvlan_mode="l2",
                    whereabouts_range=whereabouts_range,
                    gateway=gateway,
                )
            )
    return attachments


def node_pool_props(**overrides: Any) -> KarpenterNodePoolProps:
    """The default config's NodePool props (config/model.py holds the defaults), with test
    selectors, tags and user data."""
    values: dict[str, Any] = {
        "subnet_selector_terms": [{"tags": {"karpenter.sh/discovery": "eks-karpenterwithmultus"}}],
        "security_group_selector_tags": {"karpenter.sh/discovery": "eks-karpenterwithmultus"},
        "tags": {"project": "karpenter-multus"},
    }
    config = AppConfig()
    configured = cluster_node_pool_props(
        config, config.node_pools[0], node_role_name=TOKEN, user_data="MIME-Version: 1.0\n"
    )
    return dataclasses.replace(configured, **(values | overrides))


def _seed_charts(app: cdk8s.App) -> dict[str, cdk8s.Chart]:
    attachments = seed_attachments()
    images = ImagesConfig()
    return {
        "multus": MultusChart(app, "multus", MultusProps(region="us-west-2")),
        "whereabouts": WhereaboutsChart(
            app,
            "whereabouts",
            WhereaboutsProps(
                image=images.whereabouts.reference,
                reconciler_node_labels=SYSTEM_NODES_LABELS,
                reconciler_tolerations=[SYSTEM_NODES_TAINT],
            ),
        ),
        "network-attachments": NetworkAttachmentsChart(
            app,
            "network-attachments",
            NetworkAttachmentsProps(namespace="default", attachments=attachments),
        ),
        "cleartaints": ClearTaintsChart(
            app,
            "cleartaints",
            ClearTaintsProps(
                image=images.cleartaints.reference,
                pools=[
                    ClearTaintsNodes(
                        cni_binaries=cni_binaries(attachments),
                        cni_files=cni_host_files(attachments),
                    )
                ],
            ),
        ),
        "multus-pod-ips": MultusPodIpsChart(
            app,
            "multus-pod-ips",
            MultusPodIpsProps(
                image=images.multus_pod_ips.reference,
                pools=[
                    PodIpsNodes(
                        interfaces={
                            network: [reservation for _, reservation in subnets]
                            for network, subnets in SEED_MULTUS_SUBNETS.items()
                        }
                    )
                ],
            ),
        ),
        "karpenter-node-pool": KarpenterNodePoolChart(app, "node-pool", [node_pool_props()]),
        "sample-workloads": SampleWorkloadsChart(
            app,
            "sample-workloads",
            SampleWorkloadsProps(
                namespace="default",
                image=images.sample_workloads.reference,
                workloads=[
                    ZoneWorkload(
                        zone,
                        [a.name for a in attachments if a.name.endswith(zone)],
                        networks=list(SEED_MULTUS_SUBNETS),
                    )
                    for zone in SEED_ZONES
                ],
            ),
        ),
    }


@pytest.fixture(scope="session")
def seed_manifests() -> dict[str, list[Manifest]]:
    """Every chart synthesized once with the seed's values, by chart name."""
    app = cdk8s.Testing.app()
    return {name: cdk8s.Testing.synth(chart) for name, chart in _seed_charts(app).items()}


def find(manifests: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    matches = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def find_all(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def containers(manifest: Manifest) -> list[Manifest]:
    """Containers and init containers of a workload's pod template."""
    pod = manifest["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def rule_triples(rules: list[Manifest]) -> set[tuple[str, str, str]]:
    """RBAC rules flattened to (apiGroup, resource, verb), so equal grants compare equal."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return shared_reference()


def load_yaml_documents(path: Path) -> list[Manifest]:
    with path.open() as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def crd_schema(crd: Manifest, version: str) -> Manifest:
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: Manifest = served["schema"]["openAPIV3Schema"]
    return schema


@pytest.fixture(scope="session")
def upstream_crds(reference_dir: Path) -> dict[str, Manifest]:
    """Upstream CRDs by "<group>/<kind>"."""
    files = [
        *karpenter_crd_files(),
        *sorted((reference_dir / "whereabouts-v0.9.4").glob("whereabouts.cni.cncf.io_*.yaml")),
        reference_dir / "multus-v4.1.4-eksbuild.3" / "multus-daemonset-thick.yml",
    ]
    return {
        f"{doc['spec']['group']}/{doc['spec']['names']['kind']}": doc
        for path in files
        for doc in load_yaml_documents(path)
        if doc["kind"] == "CustomResourceDefinition"
    }


def without_descriptions(schema: Any) -> Any:
    if isinstance(schema, Mapping):
        return {k: without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [without_descriptions(item) for item in schema]
    return schema


def unknown_fields(value: Any, schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """Fields the API server would prune: jsonschema alone accepts them silently."""
    if isinstance(value, Mapping) and schema.get("type") == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                yield from unknown_fields(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, Mapping):
                yield from unknown_fields(item, extra, f"{path}.{key}")
            elif properties is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{path}.{key}"
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{path}[{index}]")


def validate_custom_object(manifest: Manifest, schema: Manifest) -> None:
    """The CRD's structural schema, its pruning and its CEL rules (testing_support/crd_rules)."""
    jsonschema.Draft202012Validator(schema).validate(manifest)
    body = {k: v for k, v in manifest.items() if k != "metadata"}
    unknown = list(unknown_fields(body, schema))
    assert not unknown, (
        f"fields unknown to the CRD schema (the API server would drop them): {unknown}"
    )
    broken = list(rule_violations(manifest, schema))
    assert not broken, f"CEL validation rules of the CRD the API server would refuse: {broken}"


# conftest.py is not importable from the test modules, so they get the helpers as a fixture.
@pytest.fixture(scope="session")
def helpers() -> SimpleNamespace:
    return SimpleNamespace(
        find=find,
        find_all=find_all,
        containers=containers,
        tolerates=tolerates,
        rule_triples=rule_triples,
        seed_attachments=seed_attachments,
        node_pool_props=node_pool_props,
        seed_zones=SEED_ZONES,
        token=TOKEN,
        crd_schema=crd_schema,
        without_descriptions=without_descriptions,
        validate_custom_object=validate_custom_object,
        load_yaml_documents=load_yaml_documents,
    )
