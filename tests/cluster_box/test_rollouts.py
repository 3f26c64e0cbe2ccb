"""A change to what the pod IP agent reads from its ConfigMap rolls its DaemonSet, shown by the
real DaemonSet controller: it replaces the running pod with one of the new template (the digest
annotation of charts.building_blocks.roll_on_change), which the scheduler binds to the node. The
test plays the kubelet (tests/cluster_box/nodes.py). Without the annotation the template would
not change and the old pod would stay (kubernetes pkg/controller/daemon/update.go)."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from charts.building_blocks import CONFIG_DIGEST_ANNOTATION
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps, PodIpsNodes
from testing_support.cluster_box.control_plane import ControlPlane
from tests.cluster_box.nodes import owner, pods, register_node, run_bound_pods, wait_until
from tests.cluster_box.objects import apply

pytestmark = pytest.mark.cluster_box

POOL = "rollout"
NODE = "rollout-node"
DIGEST = f"{CONFIG_DIGEST_ANNOTATION}/multus-pod-ips"


def chart_objects(ranges: list[str]) -> list[dict[str, Any]]:
    nodes = PodIpsNodes(
        interfaces={"multus1": ranges},
        pool=POOL,
        node_selector={"karpenter.sh/nodepool": POOL},
    )
    props = MultusPodIpsProps(image="public.ecr.aws/amazonlinux/amazonlinux:2023", pools=[nodes])
    objects: list[dict[str, Any]] = cdk8s.Testing.synth(
        MultusPodIpsChart(cdk8s.Testing.app(), "pod-ips", props)
    )
    return objects


def agent_pods(plane: ControlPlane) -> list[dict[str, Any]]:
    return [p for p in pods(plane) if owner(p) == f"multus-pod-ips-{POOL}"]


def template_digest(objects: list[dict[str, Any]]) -> str:
    (daemon_set,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return str(daemon_set["spec"]["template"]["metadata"]["annotations"][DIGEST])


def running_with(plane: ControlPlane, digest: str) -> bool:
    """The kubelet's step, then: is the only agent pod one of `digest`, bound to the node?"""
    run_bound_pods(plane)
    current = agent_pods(plane)
    return len(current) == 1 and (
        current[0]["spec"].get("nodeName") == NODE
        and current[0]["metadata"]["annotations"].get(DIGEST) == digest
        and not current[0]["metadata"].get("deletionTimestamp")
    )


def test_a_new_agent_configuration_replaces_the_running_agent(cluster_box: ControlPlane) -> None:
    before, after = chart_objects(["10.0.4.32/27"]), chart_objects(["10.0.4.32/27", "10.0.4.64/27"])
    assert template_digest(before) != template_digest(after)
    apply(cluster_box, before)
    register_node(
        cluster_box, NODE, {"kubernetes.io/os": "linux", "karpenter.sh/nodepool": POOL}, []
    )
    try:
        assert wait_until(lambda: running_with(cluster_box, template_digest(before)))
        (old,) = agent_pods(cluster_box)
        apply(cluster_box, after)
        assert wait_until(lambda: running_with(cluster_box, template_digest(after)))
        (new,) = agent_pods(cluster_box)
        assert new["metadata"]["uid"] != old["metadata"]["uid"]
    finally:
        cluster_box.kubectl("delete", "node", NODE, "--wait=false")
