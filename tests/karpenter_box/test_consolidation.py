"""Consolidation as the real Karpenter does it, on the default app's pool: under the pool's
policy, WhenEmpty (config/model/disruption.py's default, so that a network function's pod is
never moved to save a node), Karpenter removes a node once it is empty and leaves
underutilized nodes alone; WhenEmptyOrUnderutilized, as the config's other value renders it,
moves a pod off a node that another node has room for and removes that node.

The one change to the synthesized pool: consolidateAfter 5s instead of the config's 120s, so
that an empty node goes within seconds (the value itself is the config's, checked at synth)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import wait_for
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS,
    claims,
    cordon,
    deployment,
    node_names,
    node_pools,
    settle,
)

pytestmark = pytest.mark.karpenter_box

NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
#: Karpenter's disruption controller looks every 10 s and validates a consolidation for 15 s
#: before it acts (sigs.k8s.io/karpenter pkg/controllers/disruption: pollingPeriod,
#: consolidationTTL); three rounds that leave a node in place mean the policy keeps it.
KEPT_SECONDS = 35.0
#: Pods that fit together on one 8-vCPU node several times over.
INSTANCE_CPUS = "8"


@pytest.fixture
def pool(default_box: KarpenterBox) -> Iterator[str]:
    """The default pool, consolidating 5 s after a node empties; as synthesized afterwards.
    The nodes earlier tests left are cordoned meanwhile: the test's pods go to new nodes."""
    box = default_box
    ((name, node_pool),) = node_pools(box).items()
    (configured,) = box.world.app.config.node_pools
    disruption = box.api.get(f"{NODEPOOLS}/{name}")["spec"]["disruption"]
    assert disruption["consolidationPolicy"] == configured.disruption.consolidation_policy
    assert disruption["consolidationPolicy"] == "WhenEmpty"
    assert disruption["consolidateAfter"] == configured.disruption.consolidate_after
    earlier = node_names(box)
    cordon(box, earlier)
    box.api.merge_patch(f"{NODEPOOLS}/{name}", {"spec": {"disruption": {"consolidateAfter": "5s"}}})
    yield name
    box.api.merge_patch(
        f"{NODEPOOLS}/{name}", {"spec": {"disruption": node_pool["spec"]["disruption"]}}
    )
    cordon(box, earlier & node_names(box), unschedulable=False)


def pod_nodes(box: KarpenterBox, app: str) -> set[str]:
    """The nodes the Deployment's running pods are bound to."""
    pods = box.api.items(f"/api/v1/namespaces/default/pods?labelSelector=app={app}")
    return {
        p["spec"]["nodeName"]
        for p in pods
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def run_on_a_node_of_its_own(box: KarpenterBox, pool: str, app: str, others: set[str]) -> str:
    """A Deployment of one 1-CPU pod on a new 8-vCPU node of the pool: the nodes of `others`
    are cordoned while Karpenter launches one for it."""
    cordon(box, others)
    workload: dict[str, Any] = deployment(app, node_pools(box)[pool])
    workload["spec"]["template"]["spec"]["nodeSelector"]["karpenter.k8s.aws/instance-cpu"] = (
        INSTANCE_CPUS
    )
    box.api.create(DEPLOYMENTS, workload)
    (node,) = wait_for(
        lambda: pod_nodes(box, app),
        LAUNCH_SECONDS,
        f"{app}'s pod bound to a new node",
        lambda: [c["metadata"]["name"] for c in claims(box, pool)],
    )
    cordon(box, others, unschedulable=False)
    return str(node)


def test_consolidation_follows_the_pools_policy(default_box: KarpenterBox, pool: str) -> None:
    box = default_box
    apps = ("nf-a", "nf-b", "nf-c")
    nodes: dict[str, str] = {}
    for app in apps:
        nodes[app] = run_on_a_node_of_its_own(box, pool, app, set(nodes.values()))
    # The earlier tests' nodes stay cordoned: the pods have only these three nodes to go to.
    try:
        # WhenEmpty: three nodes an eighth used, any two of whose pods would fit on the third,
        # and Karpenter keeps all three.
        settle(KEPT_SECONDS)
        assert {app: pod_nodes(box, app) for app in apps} == {
            app: {node} for app, node in nodes.items()
        }
        assert set(nodes.values()) <= node_names(box)
        # An empty node goes.
        box.api.delete(f"{DEPLOYMENTS}/nf-c")
        wait_for(
            lambda: nodes["nf-c"] not in node_names(box),
            LAUNCH_SECONDS,
            "the emptied node removed by consolidation",
            lambda: [c["metadata"]["name"] for c in claims(box, pool)],
        )
        # WhenEmptyOrUnderutilized: one of the two pods moves and its node goes.
        box.api.merge_patch(
            f"{NODEPOOLS}/{pool}",
            {"spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}}},
        )
        together = wait_for(
            lambda: (
                len(shared := pod_nodes(box, "nf-a") | pod_nodes(box, "nf-b")) == 1
                and len({nodes["nf-a"], nodes["nf-b"]} & node_names(box)) <= 1
                and shared
            ),
            LAUNCH_SECONDS,
            "the two underutilized nodes' pods on one node, the other node removed",
            lambda: {app: pod_nodes(box, app) for app in apps},
        )
        assert together
    finally:
        for app in apps:
            box.api.delete(f"{DEPLOYMENTS}/{app}")
