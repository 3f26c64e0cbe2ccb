"""A stuck node is replaced, by Karpenter: a node of the default pool registers but its boot
never finishes (the box writes none of the files the startup-taint remover waits for, as a
bootstrap that hangs without powering off would leave it). Karpenter replaces no node that has
not initialized, so the remover's own script, past the pool's replace_not_ready_after, deletes
the node's NodeClaim (the real ValidatingAdmissionPolicy lets it delete its own node's claim
only); Karpenter drains the node, terminates the instance and launches another for the pod, which
binds once that node boots. The bound is shortened to 20 s in the cluster (the DaemonSet's
REPLACE_AFTER_SECONDS, what `replace_not_ready_after: 20s` renders)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import instance_id, wait_for
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS,
    claims,
    cordon,
    create_pod,
    delete_pod,
    get_pod,
    launched,
    node_names,
    node_pools,
    pool_pod,
)

pytestmark = pytest.mark.karpenter_box

DAEMON_SET = "/apis/apps/v1/namespaces/cleartaints/daemonsets/cleartaints"
BOUND_SECONDS = 20


def remover_env(box: KarpenterBox) -> list[dict[str, str]]:
    daemon_set = box.api.get(DAEMON_SET)
    env: list[dict[str, str]] = daemon_set["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


def set_remover_env(box: KarpenterBox, env: list[dict[str, str]]) -> None:
    container = {"name": "cleartaints", "env": env}
    patch = {"spec": {"template": {"spec": {"containers": [container]}}}}
    box.api.request("PATCH", DAEMON_SET, patch, "application/strategic-merge-patch+json")


@pytest.fixture
def short_bound(default_box: KarpenterBox) -> Iterator[str]:
    """The pool's remover with a 20 s bound; the default's (20m) afterwards."""
    box = default_box
    before = remover_env(box)
    (bound,) = [v["value"] for v in before if v["name"] == "REPLACE_AFTER_SECONDS"]
    assert bound == "1200"  # the default replace_not_ready_after, 20m
    shorter = [
        {**v, "value": str(BOUND_SECONDS)} if v["name"] == "REPLACE_AFTER_SECONDS" else v
        for v in before
    ]
    patch = {
        "spec": {"template": {"spec": {"containers": [{"name": "cleartaints", "env": shorter}]}}}
    }
    box.api.request("PATCH", DAEMON_SET, patch, "application/strategic-merge-patch+json")
    yield next(iter(node_pools(box)))
    box.api.request(
        "PATCH",
        DAEMON_SET,
        {"spec": {"template": {"spec": {"containers": [{"name": "cleartaints", "env": before}]}}}},
        "application/strategic-merge-patch+json",
    )


def test_a_stuck_node_is_replaced_by_karpenter(default_box: KarpenterBox, short_bound: str) -> None:
    box, pool = default_box, short_bound
    known = {c["metadata"]["name"] for c in claims(box, pool)}
    box.kubelet.stuck_pools.add(pool)
    pod = pool_pod("waits-for-a-ready-node", node_pools(box)[pool])
    # Not on a node earlier tests left: the pod needs a node of its own.
    cordon(box, node_names(box))
    create_pod(box, pod)
    try:
        stuck = launched(box, pool, known)
        name = stuck.claim["metadata"]["name"]
        # The remover deletes the stuck node's claim; Karpenter terminates its instance.
        wait_for(
            lambda: name not in {c["metadata"]["name"] for c in claims(box, pool)},
            LAUNCH_SECONDS,
            f"the stuck node's NodeClaim {name} deleted and gone",
            lambda: box.kubelet.remover_logs()[-1500:],
        )
        (reservation,) = box.emulator.ec2.describe_instances(
            InstanceIds=[instance_id(stuck.claim["status"]["providerID"])]
        )["Reservations"]
        assert reservation["Instances"][0]["State"]["Name"] in ("shutting-down", "terminated")
        logs = box.kubelet.remover_logs()
        assert f"deleting NodeClaim {name} so that Karpenter replaces the node" in logs
        # The pod, still pending, gets a new node of the pool, which boots (Karpenter may have
        # launched one more while the pool's boots still hung; the remover replaced that too).
        box.kubelet.stuck_pools.discard(pool)
        bound = wait_for(
            lambda: get_pod(box, pod["metadata"]["name"])["spec"].get("nodeName"),
            LAUNCH_SECONDS,
            "the pod bound to the replacement",
            lambda: get_pod(box, pod["metadata"]["name"]).get("status"),
        )
        assert bound != stuck.claim["status"].get("nodeName")
        node = box.api.get(f"/api/v1/nodes/{bound}")
        assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == pool
    finally:
        box.kubelet.stuck_pools.discard(pool)
        delete_pod(box, pod["metadata"]["name"])
