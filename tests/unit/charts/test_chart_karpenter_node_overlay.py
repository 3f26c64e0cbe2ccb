"""A pool's NodeOverlay: what tells Karpenter that the pool's nodes have the hugepages its node
profile reserves. EC2's instance type data has no hugepages, so without an overlay Karpenter's
scheduling simulation finds no instance type for a pod that requests hugepages-2Mi and launches
nothing (kubernetes-sigs/karpenter, the version aws/karpenter-provider-aws v1.14.1's go.mod
requires: pkg/controllers/nodeoverlay/controller.go matches an overlay's requirements against
each NodePool's instance types, with karpenter.sh/nodepool set to the pool's name and the pool's
template labels; pkg/cloudprovider/types.go ApplyCapacityOverlay adds its capacity to theirs).

Checked against the NodeOverlay CRD of the pinned chart (testing_support/upstream_crds) with its
CEL rules; the cluster box's API server accepts the example's (tests/cluster_box)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.karpenter_node_pool import KarpenterNodePoolChart, NodeOverlayChart
from config import AppConfig, load_config
from stacks.cluster_props import node_pool_props
from tests.conftest import REPO
from tests.helpers import STRINGIFIED_TOKEN, quantity_bytes

FIVE_G_CORE = "examples/5g-core.json"
PAGE_BYTES = 2 * 2**20  # one x86_64 default hugepage: "Hugepagesize: 2048 kB" in /proc/meminfo


@pytest.fixture(scope="module")
def five_g_core() -> AppConfig:
    return load_config({"config_file": FIVE_G_CORE}, REPO).base


def chart_objects(config: AppConfig) -> list[dict[str, Any]]:
    pools = [
        node_pool_props(config, pool, node_role_name=STRINGIFIED_TOKEN, user_data="user-data")
        for pool in config.node_pools
    ]
    app = cdk8s.Testing.app()
    charts = [KarpenterNodePoolChart(app, "node-pool", pools)] + [
        NodeOverlayChart(app, f"node-overlay-{pool.node_pool_name}", pool)
        for pool in pools
        if pool.extended_resources
    ]
    return [o for chart in charts for o in cdk8s.Testing.synth(chart)]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def hugepage_pools(config: AppConfig) -> dict[str, int]:
    return {
        pool.name: pool.node_profile.hugepages_2mi
        for pool in config.node_pools
        if pool.node_profile and pool.node_profile.hugepages_2mi
    }


def selects(overlay: dict[str, Any], node_pool: dict[str, Any]) -> bool:
    """Whether Karpenter applies the overlay to the pool's instance types, as far as the pool
    decides it: its requirements (In, Exists) hold for the labels every instance type of the
    pool carries in the simulation, karpenter.sh/nodepool and the template's labels."""
    labels = {
        "karpenter.sh/nodepool": node_pool["metadata"]["name"],
        **node_pool["spec"]["template"]["metadata"]["labels"],
    }
    for requirement in overlay["spec"]["requirements"]:
        value = labels.get(requirement["key"])
        if requirement["operator"] == "In" and value not in requirement["values"]:
            return False
        if requirement["operator"] not in ("In", "Exists") or value is None:
            return False
    return True


def test_each_pool_with_hugepages_gets_an_overlay_of_its_pages(five_g_core: AppConfig) -> None:
    objects = chart_objects(five_g_core)
    pages = hugepage_pools(five_g_core)
    assert pages, f"{FIVE_G_CORE} has a pool with hugepages"
    overlays = {o["metadata"]["name"]: o for o in of_kind(objects, "NodeOverlay")}
    assert set(overlays) == set(pages)
    for name, count in pages.items():
        capacity = overlays[name]["spec"]["capacity"]
        assert set(capacity) == {"hugepages-2Mi"}
        # What the kubelet reports once the bootstrap reserved the pages: pages x page size.
        assert quantity_bytes(capacity["hugepages-2Mi"]) == count * PAGE_BYTES


def test_an_overlay_reaches_its_own_pools_instance_types_only(five_g_core: AppConfig) -> None:
    objects = chart_objects(five_g_core)
    node_pools = of_kind(objects, "NodePool")
    assert len(node_pools) > 1, "the example has pools without hugepages, which no overlay reaches"
    for overlay in of_kind(objects, "NodeOverlay"):
        reached = {p["metadata"]["name"] for p in node_pools if selects(overlay, p)}
        assert reached == {overlay["metadata"]["name"]}


def test_selector_check_sees_an_overlay_that_reaches_every_pool(five_g_core: AppConfig) -> None:
    (overlay,) = of_kind(chart_objects(five_g_core), "NodeOverlay")
    loose = copy.deepcopy(overlay)
    loose["spec"]["requirements"] = [{"key": "karpenter-node", "operator": "Exists"}]
    assert all(selects(loose, p) for p in of_kind(chart_objects(five_g_core), "NodePool"))


def test_a_config_without_hugepages_renders_no_overlay() -> None:
    objects = chart_objects(AppConfig())
    assert of_kind(objects, "NodePool")
    assert of_kind(objects, "NodeOverlay") == []


def test_the_overlay_chart_refuses_a_pool_without_extended_resources() -> None:
    (pool,) = AppConfig().node_pools
    props = node_pool_props(AppConfig(), pool, node_role_name="role", user_data="user-data")
    with pytest.raises(ValueError, match="no extended resources"):
        NodeOverlayChart(cdk8s.Testing.app(), "overlay", props)


def test_overlay_is_valid_against_the_crd_and_its_cel_rules(
    five_g_core: AppConfig, upstream_crds: dict[str, dict[str, Any]], helpers: SimpleNamespace
) -> None:
    """karpenter.sh_nodeoverlays.yaml of v1.14.1: capacity refuses only cpu, memory,
    ephemeral-storage and pods (CEL), so hugepages-2Mi is an extended resource it takes; a
    karpenter.sh requirement key must be karpenter.sh/capacity-type or karpenter.sh/nodepool."""
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodeOverlay"], "v1alpha1")
    (overlay,) = of_kind(chart_objects(five_g_core), "NodeOverlay")
    assert overlay["apiVersion"] == "karpenter.sh/v1alpha1"
    helpers.validate_custom_object(overlay, schema)
    # The highest weight the CRD allows: the pool's own profile says what its nodes have.
    assert (
        overlay["spec"]["weight"] == schema["properties"]["spec"]["properties"]["weight"]["maximum"]
    )


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda spec: spec["capacity"].update(memory="1Gi"), "invalid resource restricted"),
        (
            lambda spec: spec["requirements"].append(
                {"key": "karpenter.sh/pool", "operator": "In", "values": ["upf"]}
            ),
            'label domain "karpenter.sh" is restricted',
        ),
        (lambda spec: spec.update(weight=0), "less than the minimum"),
    ],
    ids=["memory-in-capacity", "restricted-key", "weight-below-1"],
)
def test_crd_check_refuses_what_the_api_server_refuses(
    five_g_core: AppConfig,
    upstream_crds: dict[str, dict[str, Any]],
    helpers: SimpleNamespace,
    change: Any,
    refusal: str,
) -> None:
    schema = helpers.crd_schema(upstream_crds["karpenter.sh/NodeOverlay"], "v1alpha1")
    (overlay,) = of_kind(chart_objects(five_g_core), "NodeOverlay")
    broken = copy.deepcopy(overlay)
    change(broken["spec"])
    with pytest.raises(Exception, match=refusal):
        helpers.validate_custom_object(broken, schema)
