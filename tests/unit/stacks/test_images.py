"""The `images` section: every image the app deploys can come from a private mirror."""

from __future__ import annotations

import json
from typing import Any

import pytest

from config import parse_config
from config.images import ImagesConfig
from tests.conftest import SynthesizedApp, cdk_json_context, synthesize
from tests.unit.stacks.test_cluster_stack import helm_values
from tests.unit.stacks.test_cluster_workloads import by_kind

MIRROR = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirror"
DIGEST = "sha256:" + "ab" * 32
MIRRORED = {
    "multus": {"repository": f"{MIRROR}/multus-cni", "tag": "v4.1.4-eksbuild.3_thick"},
    "whereabouts": {"repository": f"{MIRROR}/whereabouts", "digest": DIGEST},
    "cleartaints": {"repository": f"{MIRROR}/amazonlinux", "tag": "2023.9.20251117.1"},
    "multus_pod_ips": {"repository": f"{MIRROR}/amazonlinux", "tag": "2023.9.20251117.1"},
    "karpenter_controller": {"repository": f"{MIRROR}/karpenter", "tag": "1.14.1"},
    "sample_workloads": {"repository": f"{MIRROR}/network-multitool", "tag": "3.22.2"},
    "node_latency": {"repository": f"{MIRROR}/node-latency", "tag": "v0.1.10", "digest": DIGEST},
}


def pod_images(value: Any) -> list[str]:
    if isinstance(value, list):
        return [image for item in value for image in pod_images(item)]
    if not isinstance(value, dict):
        return []
    found = [
        container["image"]
        for key in ("containers", "initContainers")
        for container in value.get(key, [])
    ]
    return found + pod_images(list(value.values()))


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The 3 AZ x 3 network example with every image from the mirror and both optional charts."""
    synthesized = synthesize(
        tmp_path_factory.mktemp("mirrored"),
        cdk_json_context(
            config_file="examples/three-az-three-networks.json",
            config={"images": MIRRORED, "extras": {"sample_workloads": True, "node_latency": True}},
        ),
    )
    return synthesized.template_json(synthesized.stage.cluster)


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


def workload_images(template: dict[str, Any]) -> set[str]:
    return {
        image
        for kind in ("DaemonSet", "Deployment")
        for image in pod_images(by_kind(template, kind))
    }


def test_defaults_are_the_upstream_images(cluster: dict[str, Any]) -> None:
    assert workload_images(cluster) == {
        "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/multus-cni:v4.1.4-eksbuild.3_thick",
        "ghcr.io/k8snetworkplumbingwg/whereabouts:v0.9.4",
        "public.ecr.aws/amazonlinux/amazonlinux:2023.9.20251117.1",
    }


def test_every_image_comes_from_the_mirror_when_configured(mirrored: dict[str, Any]) -> None:
    assert workload_images(mirrored) == {
        f"{MIRROR}/multus-cni:v4.1.4-eksbuild.3_thick",
        f"{MIRROR}/whereabouts@{DIGEST}",
        f"{MIRROR}/amazonlinux:2023.9.20251117.1",
        f"{MIRROR}/network-multitool:3.22.2",
    }
    # Helm charts render their own pods: the chart values carry the mirror.
    assert helm_values(mirrored, "karpenter")["controller"]["image"] == {
        "repository": f"{MIRROR}/karpenter",
        "tag": "1.14.1",
        "digest": "",  # so the chart does not append its own digest to the mirror's tag
    }
    assert helm_values(mirrored, "node-latency-for-k8s")["image"] == {
        "repository": f"{MIRROR}/node-latency",
        "tag": "v0.1.10",
        "digest": DIGEST,
    }


def test_reserved_enis_follow_the_number_of_multus_networks(mirrored: dict[str, Any]) -> None:
    assert helm_values(mirrored, "karpenter")["settings"]["reservedENIs"] == "3"


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ({"repository": f"{MIRROR}/whereabouts"}, "needs a tag or a digest"),
        ({"repository": f"{MIRROR}/whereabouts", "tag": "latest"}, "instead of 'latest'"),
        ({"repository": f"{MIRROR}/whereabouts", "digest": "sha256:abc"}, "digest"),
        ({"repository": "Whereabouts", "tag": "v0.9.4"}, "repository"),
    ],
)
def test_unpinned_or_malformed_images_are_refused_naming_the_field(
    image: dict[str, str], message: str
) -> None:
    with pytest.raises(Exception, match=message) as raised:
        parse_config({"images": {"whereabouts": image}})
    assert "images.whereabouts" in str(raised.value)


def test_image_reference_forms() -> None:
    images = ImagesConfig.model_validate(MIRRORED)
    assert images.whereabouts.reference == f"{MIRROR}/whereabouts@{DIGEST}"
    assert images.node_latency is not None
    assert images.node_latency.reference == f"{MIRROR}/node-latency:v0.1.10@{DIGEST}"
    assert json.dumps(ImagesConfig().model_dump()).count("latest") == 0
