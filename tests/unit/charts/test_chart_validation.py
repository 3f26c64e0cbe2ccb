"""Every synthesized object is checked against a schema: Kubernetes 1.35's for built-in kinds,
the upstream CRD's for custom resources. An object of any other kind fails the suite."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import kubernetes_validate
import pytest

KUBERNETES_VERSION = "1.35"  # the default cluster.kubernetes_version

# Custom kinds we emit -> (CRD key in upstream_crds, served version).
CUSTOM_KINDS = {
    "karpenter.sh/v1/NodePool": ("karpenter.sh/NodePool", "v1"),
    "karpenter.k8s.aws/v1/EC2NodeClass": ("karpenter.k8s.aws/EC2NodeClass", "v1"),
    "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition": (
        "k8s.cni.cncf.io/NetworkAttachmentDefinition",
        "v1",
    ),
}

CHARTS = (
    "multus",
    "whereabouts",
    "network-attachments",
    "cleartaints",
    "multus-pod-ips",
    "karpenter-node-pool",
    "sample-workloads",
)


def type_of(manifest: dict[str, Any]) -> str:
    return f"{manifest['apiVersion']}/{manifest['kind']}"


def test_every_chart_is_covered(seed_manifests: dict[str, list[dict[str, Any]]]) -> None:
    assert set(CHARTS) == set(seed_manifests)


@pytest.mark.parametrize("chart", CHARTS)
def test_built_in_objects_are_valid_kubernetes_1_34(
    chart: str, seed_manifests: dict[str, list[dict[str, Any]]]
) -> None:
    # A kind that is neither custom (above) nor built in raises SchemaNotFoundError here.
    for manifest in seed_manifests[chart]:
        if type_of(manifest) not in CUSTOM_KINDS:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def test_kubernetes_validation_rejects_unknown_fields(
    seed_manifests: dict[str, list[dict[str, Any]]], helpers: SimpleNamespace
) -> None:
    daemon_set = helpers.find(seed_manifests["cleartaints"], "DaemonSet")
    misspelt = {**daemon_set, "spec": {**daemon_set["spec"], "minReadySecond": 0}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("chart", ["network-attachments", "karpenter-node-pool"])
def test_custom_objects_are_valid_against_upstream_crds(
    chart: str,
    seed_manifests: dict[str, list[dict[str, Any]]],
    upstream_crds: dict[str, dict[str, Any]],
    helpers: SimpleNamespace,
) -> None:
    custom = [m for m in seed_manifests[chart] if type_of(m) in CUSTOM_KINDS]
    assert custom
    for manifest in custom:
        crd_key, version = CUSTOM_KINDS[type_of(manifest)]
        schema = helpers.crd_schema(upstream_crds[crd_key], version)
        helpers.validate_custom_object(manifest, schema)


def test_custom_object_validation_catches_unknown_fields(
    seed_manifests: dict[str, list[dict[str, Any]]],
    upstream_crds: dict[str, dict[str, Any]],
    helpers: SimpleNamespace,
) -> None:
    node_pool = helpers.find(seed_manifests["karpenter-node-pool"], "NodePool")
    misspelt = {**node_pool, "spec": {**node_pool["spec"], "wieght": 10}}
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodePool"], "v1")
    with pytest.raises(AssertionError, match=r"\.spec\.wieght"):
        helpers.validate_custom_object(misspelt, schema)


def test_custom_object_validation_runs_the_crds_cel_rules(
    seed_manifests: dict[str, list[dict[str, Any]]],
    upstream_crds: dict[str, dict[str, Any]],
    helpers: SimpleNamespace,
) -> None:
    """karpenter-v1.14.1 CRDs (shared/reference): karpenter.sh_nodepools.yaml refuses template
    labels in the karpenter.sh domain, karpenter.k8s.aws_ec2nodeclasses.yaml an alias term next
    to another term; both are x-kubernetes-validations rules, which JSON Schema ignores."""
    node_pool = copy.deepcopy(helpers.find(seed_manifests["karpenter-node-pool"], "NodePool"))
    node_pool["spec"]["template"]["metadata"]["labels"]["karpenter.sh/nodepool"] = "other"
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodePool"], "v1")
    with pytest.raises(AssertionError, match=r'label "karpenter\.sh/nodepool" is restricted'):
        helpers.validate_custom_object(node_pool, schema)
    node_class = copy.deepcopy(helpers.find(seed_manifests["karpenter-node-pool"], "EC2NodeClass"))
    node_class["spec"]["amiSelectorTerms"].append({"id": "ami-0123456789abcdef0"})
    schema = helpers.crd_schema(upstream_crds["karpenter.k8s.aws/EC2NodeClass"], "v1")
    with pytest.raises(AssertionError, match="CEL validation rules"):
        helpers.validate_custom_object(node_class, schema)


def images_in(value: object) -> list[str]:
    """Images of every container list anywhere in an object, whatever its kind."""
    if isinstance(value, list):
        return [image for item in value for image in images_in(item)]
    if not isinstance(value, dict):
        return []
    found = [
        container["image"]
        for key in ("containers", "initContainers", "ephemeralContainers")
        for container in value.get(key, [])
    ]
    return found + images_in(list(value.values()))


def test_image_scan_sees_init_containers(seed_manifests: dict[str, list[dict[str, Any]]]) -> None:
    assert len(images_in(seed_manifests["multus"])) == 2


@pytest.mark.parametrize("chart", CHARTS)
def test_every_image_is_pinned(chart: str, seed_manifests: dict[str, list[dict[str, Any]]]) -> None:
    for image in images_in(seed_manifests[chart]):
        _, _, tag = image.rpartition("/")[2].partition(":")
        assert "@sha256:" in image or tag not in ("", "latest"), f"unpinned image {image}"
