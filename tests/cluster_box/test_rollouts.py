"""A change to a component's code or configuration rolls its workload, shown by the real
DaemonSet and Deployment controllers: one case per workload of ours. Each case synthesizes the
component's chart before and after one change (a prop, or the code that fills its ConfigMap),
applies both in turn and waits until the controller has replaced the running pod with one of
the new template, bound by the scheduler to the node. The test plays the kubelet
(tests/cluster_box/nodes.py).

A ConfigMap that a pod mounts is no part of its template; without the digest annotation of
charts.building_blocks.roll_on_change the template would not change and the old pod would stay
(kubernetes pkg/controller/daemon/update.go, pkg/controller/deployment/sync.go)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cdk8s
import pytest

import charts.multus
from charts.cleartaints import ClearTaintsChart, ClearTaintsNodes, ClearTaintsProps
from charts.multus import MultusChart, MultusProps
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps, PodIpsNodes
from charts.whereabouts import WhereaboutsChart, WhereaboutsProps
from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.objects import apply_objects, delete_objects
from tests.cluster_box.nodes import (
    owner,
    pods,
    register_node,
    run_bound_pods,
    wait_until,
)

pytestmark = pytest.mark.cluster_box

POOL = "rollout"
NODE = "rollout-node"
IMAGE = "public.ecr.aws/amazonlinux/amazonlinux:2023"
# A Karpenter node of the pool (Multus, Whereabouts, cleartaints and the agent all select it)
# that is also a system node (the Whereabouts reconciler's).
NODE_LABELS = {
    "kubernetes.io/os": "linux",
    "karpenter-node": "true",
    "karpenter.sh/nodepool": POOL,
    "karpenter.sh/controller": "true",
}
# The label each controller stamps on a pod with its template's hash.
TEMPLATE_HASH = {"DaemonSet": "controller-revision-hash", "Deployment": "pod-template-hash"}


def synth(chart: Callable[[cdk8s.App], cdk8s.Chart]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = cdk8s.Testing.synth(chart(cdk8s.Testing.app()))
    return objects


def pod_ips(ranges: list[str]) -> list[dict[str, Any]]:
    nodes = PodIpsNodes(
        interfaces={"multus1": ranges}, pool=POOL, node_selector={"karpenter.sh/nodepool": POOL}
    )
    props = MultusPodIpsProps(image=IMAGE, pools=[nodes])
    return synth(lambda app: MultusPodIpsChart(app, "pod-ips", props))


def multus() -> list[dict[str, Any]]:
    return synth(lambda app: MultusChart(app, "multus", MultusProps(region="us-west-2")))


def whereabouts(**changes: Any) -> list[dict[str, Any]]:
    props = WhereaboutsProps(
        image=IMAGE, reconciler_node_labels={"karpenter.sh/controller": "true"}, **changes
    )
    return synth(lambda app: WhereaboutsChart(app, "whereabouts", props))


def cleartaints(binaries: list[str]) -> list[dict[str, Any]]:
    nodes = ClearTaintsNodes(pool=POOL, cni_binaries=binaries)
    props = ClearTaintsProps(image=IMAGE, pools=[nodes])
    return synth(lambda app: ClearTaintsChart(app, "cleartaints", props))


@dataclass(frozen=True)
class Case:
    """The workload (kind, name) and its chart's objects before and after the change."""

    kind: str
    name: str
    before: Callable[[], list[dict[str, Any]]]
    after: Callable[[pytest.MonkeyPatch], list[dict[str, Any]]]


def multus_with_new_daemon_config(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A code change: what the daemon's ConfigMap holds."""
    changed = {**charts.multus._DAEMON_CONFIG, "logLevel": "debug"}
    monkeypatch.setattr(charts.multus, "_DAEMON_CONFIG", changed)
    return multus()


CASES = [
    Case(
        "DaemonSet",
        f"multus-pod-ips-{POOL}",
        lambda: pod_ips(["10.0.4.32/27"]),
        lambda _: pod_ips(["10.0.4.32/27", "10.0.4.64/27"]),
    ),
    Case("DaemonSet", "kube-multus-ds", multus, multus_with_new_daemon_config),
    Case("DaemonSet", "whereabouts", whereabouts, lambda _: whereabouts(log_level="debug")),
    Case(
        "Deployment",
        "whereabouts-reconciler",
        whereabouts,
        lambda _: whereabouts(reconcile_schedule="*/5 * * * *"),
    ),
    Case(
        "DaemonSet",
        f"cleartaints-{POOL}",
        lambda: cleartaints(["ipvlan"]),
        lambda _: cleartaints(["ipvlan", "sbr"]),
    ),
]


def workload_pods(plane: ControlPlane, case: Case) -> list[dict[str, Any]]:
    return [p for p in pods(plane) if owner(p) == case.name]


def running_one_new_pod(plane: ControlPlane, case: Case, old_uids: set[str]) -> bool:
    """The kubelet's step, then: is there exactly one live pod of the workload, bound to the
    node, and not one of `old_uids`?"""
    run_bound_pods(plane)
    live = [p for p in workload_pods(plane, case) if not p["metadata"].get("deletionTimestamp")]
    return (
        len(live) == 1
        and live[0]["spec"].get("nodeName") == NODE
        and live[0]["metadata"]["uid"] not in old_uids
        and live[0].get("status", {}).get("phase") == "Running"
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_change_rolls_the_workload(
    cluster_box: ControlPlane, case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, after = case.before(), case.after(monkeypatch)
    (old_template,) = [
        o["spec"]["template"]
        for o in before
        if (o["kind"], o["metadata"]["name"]) == (case.kind, case.name)
    ]
    (new_template,) = [
        o["spec"]["template"]
        for o in after
        if (o["kind"], o["metadata"]["name"]) == (case.kind, case.name)
    ]
    assert old_template != new_template
    register_node(cluster_box, NODE, NODE_LABELS, [])
    try:
        apply_objects(cluster_box, before)
        assert wait_until(lambda: running_one_new_pod(cluster_box, case, set()))
        (old,) = workload_pods(cluster_box, case)
        apply_objects(cluster_box, after)
        assert wait_until(lambda: running_one_new_pod(cluster_box, case, {old["metadata"]["uid"]}))
        (new,) = [
            p
            for p in workload_pods(cluster_box, case)
            if not p["metadata"].get("deletionTimestamp")
        ]
        label = TEMPLATE_HASH[case.kind]
        assert new["metadata"]["labels"][label] != old["metadata"]["labels"][label]
    finally:
        cluster_box.kubectl("delete", "node", NODE, "--wait=false")
        delete_objects(cluster_box, after)
