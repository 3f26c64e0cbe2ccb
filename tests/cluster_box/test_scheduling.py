"""Scheduling truth with the real DaemonSet controller and scheduler, on examples/5g-core.json
applied for real: Nodes registered as Karpenter registers each pool's nodes (the pool's labels,
its taints and the startup taint), and one of the system node group. Every DaemonSet that must
run on a node gets a pod bound there, the startup-taint remover on the tainted upf pool included
(kubernetes pkg/controller/daemon places a pod only where it tolerates every NoSchedule and
NoExecute taint); the pool DaemonSets stay off other pools and the system nodes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing_support.cluster_box.control_plane import ControlPlane
from tests.cluster_box.nodes import bound, register_node, wait_until
from tests.cluster_box.objects import apply_app
from tests.conftest import SynthesizedApp
from tests.helpers import pool_nodes
from tests.unit.stacks.test_cluster_workloads import by_kind

pytestmark = pytest.mark.cluster_box

# The system node group's nodes (stacks/cluster_props.py, CONTROLLER_NODES): labelled and
# tainted karpenter.sh/controller=true.
SYSTEM_NODE_LABELS = {"kubernetes.io/os": "linux", "karpenter.sh/controller": "true"}
SYSTEM_NODE_TAINTS = [{"key": "karpenter.sh/controller", "value": "true", "effect": "NoSchedule"}]
NODE_DAEMONS = {"kube-multus-ds", "whereabouts"}


@pytest.fixture(scope="module")
def five_g_core_nodes(
    cluster_box: ControlPlane, five_g_core_app: SynthesizedApp
) -> Iterator[dict[str, set[str]]]:
    """The example applied, a node per pool and a system node registered; node -> the
    DaemonSets with a pod bound there once every expected one is."""
    template = five_g_core_app.template_json(five_g_core_app.stage.cluster)
    apply_app(cluster_box, template)
    pools = {p["metadata"]["name"]: p for p in by_kind(template, "NodePool")}
    assert set(pools) == {"upf", "control"}
    for name, node_pool in pools.items():
        labels, taints = pool_nodes(node_pool)
        register_node(cluster_box, f"{name}-node", labels, taints)
    register_node(cluster_box, "system-node", SYSTEM_NODE_LABELS, SYSTEM_NODE_TAINTS)
    expected = {
        "upf-node": {"cleartaints-upf", "multus-pod-ips-upf", *NODE_DAEMONS},
        "control-node": {"cleartaints-control", *NODE_DAEMONS},
        "system-node": NODE_DAEMONS,
    }
    # each test asserts its part of what is bound once all is, or once waiting is over
    wait_until(
        lambda: all(
            daemons <= bound(cluster_box).get(node, set()) for node, daemons in expected.items()
        )
    )
    now_bound = bound(cluster_box)
    yield {node: now_bound.get(node, set()) for node in expected}
    for node in expected:
        cluster_box.kubectl("delete", "node", node, "--wait=false")


def test_the_startup_taint_remover_is_bound_on_the_tainted_upf_pool(
    five_g_core_nodes: dict[str, set[str]],
) -> None:
    assert "cleartaints-upf" in five_g_core_nodes["upf-node"]


def test_the_startup_taint_remover_is_bound_on_the_control_pool(
    five_g_core_nodes: dict[str, set[str]],
) -> None:
    assert "cleartaints-control" in five_g_core_nodes["control-node"]


def test_the_pod_ip_agent_runs_on_the_pool_whose_networks_need_it(
    five_g_core_nodes: dict[str, set[str]],
) -> None:
    assert "multus-pod-ips-upf" in five_g_core_nodes["upf-node"]


def test_a_pools_daemon_sets_stay_off_other_pools_and_the_system_nodes(
    five_g_core_nodes: dict[str, set[str]],
) -> None:
    pool_daemons = {
        "cleartaints-upf",
        "multus-pod-ips-upf",
        "cleartaints-control",
        "multus-pod-ips-control",
    }
    assert not five_g_core_nodes["upf-node"] & (
        pool_daemons - {"cleartaints-upf", "multus-pod-ips-upf"}
    )
    assert not five_g_core_nodes["control-node"] & {"cleartaints-upf", "multus-pod-ips-upf"}
    assert not five_g_core_nodes["system-node"] & pool_daemons


def test_multus_and_whereabouts_run_on_every_node(
    five_g_core_nodes: dict[str, set[str]],
) -> None:
    assert all(daemons >= NODE_DAEMONS for daemons in five_g_core_nodes.values())
