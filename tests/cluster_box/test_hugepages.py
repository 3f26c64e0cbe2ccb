"""A network function's pod on its pool's nodes, with the real API server and scheduler: the
pool's NodeOverlay (what tells Karpenter the nodes have hugepages) accepted as synthesized, and
a Guaranteed pod that asks for hugepages-2Mi and whole CPUs (exclusive under the static CPU
manager) bound to a node of examples/5g-core.json's UPF pool registered as its kubelet reports
it: the profile's hugepages, its CPUs less the reserved ones. A node without those pages, or a
pod that asks for one page more, leaves the pod Pending as Unschedulable.

Every number comes from the example's config (the repo's loader, through the synthesized app):
the pool's smallest size (config/instance_types.py), its profile's pages and reserved CPUs.
What the kubelet reports: hugepages-2Mi capacity is the pages times their size, and allocatable
memory leaves them out (kubernetes pkg/kubelet/cm/node_container_manager_linux.go,
GetNodeAllocatableAbsolute / getNodeAllocatableAbsoluteImpl; docs/network-functions.md);
reservedSystemCPUs take their CPUs out of allocatable cpu (the kubelet makes them
system-reserved). The scheduler's NodeResourcesFit counts hugepages-2Mi as any other resource."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from config import AppConfig, instance_types
from config.model import NodePoolConfig
from config.node_profile import cpu_list
from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.objects import apply
from tests.cluster_box.nodes import CAPACITY, karpenter_node, register_node, wait_until
from tests.conftest import SynthesizedApp
from tests.helpers import quantity_bytes
from tests.unit.stacks.test_cluster_workloads import by_kind

pytestmark = pytest.mark.cluster_box

PAGE_BYTES = 2 * 2**20  # the x86_64 default hugepage, "Hugepagesize: 2048 kB"
MIB = 2**20
# Threads per core of the UPF pool's families (c5n, c6in: 2), so full-pcpus-only takes CPUs in
# pairs (docs/network-functions.md).
THREADS_PER_CORE = 2
# The pod's ordinary memory: not under test, well within any size's allocatable memory.
POD_MEMORY = "1Gi"
CASE_LABEL = "cluster-box.test/case"


@dataclass(frozen=True)
class UpfNode:
    """A node of the hugepage pool, as its kubelet would report it, and what a UPF pod asks."""

    pool: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    capacity: dict[str, str]
    allocatable: dict[str, str]
    exclusive_cpus: int
    hugepages_bytes: int


def hugepage_pool(config: AppConfig) -> NodePoolConfig:
    (pool,) = [p for p in config.node_pools if p.node_profile and p.node_profile.hugepages_2mi]
    return pool


def upf_node(app: SynthesizedApp) -> UpfNode:
    config = app.stage.config
    pool = hugepage_pool(config)
    profile = pool.node_profile
    assert profile is not None and profile.reserved_cpus is not None
    (node_pool,) = [
        p
        for p in by_kind(app.template_json(app.stage.cluster), "NodePool")
        if p["metadata"]["name"] == pool.name
    ]
    family, vcpus, _ = min(pool.allowed_sizes(), key=lambda size: size[1])
    labels, taints = karpenter_node(node_pool, config.availability_zones[0])
    labels["node.kubernetes.io/instance-type"] = instance_types.size_name(family, vcpus)
    # Registered once ready: cleartaints has lifted the startup taint, the pool's stays.
    startup = node_pool["spec"]["template"]["spec"].get("startupTaints", [])
    hugepages = profile.hugepages_2mi * PAGE_BYTES
    memory = instance_types.memory_mib(family, vcpus) * MIB
    capacity = {
        **CAPACITY,
        "cpu": str(vcpus),
        "memory": str(memory),
        "hugepages-2Mi": str(hugepages),
    }
    reserved = profile.reserved_cpus  # a count (the bootstrap picks the CPUs) or a CPU list
    allocatable_cpus = vcpus - (reserved if isinstance(reserved, int) else len(cpu_list(reserved)))
    exclusive = allocatable_cpus
    if profile.full_pcpus_only:
        exclusive -= exclusive % THREADS_PER_CORE
    assert exclusive >= 1, "the profile leaves the pool's smallest size no CPU to give a pod"
    return UpfNode(
        pool=pool.name,
        labels=labels,
        taints=[t for t in taints if t not in startup],
        capacity=capacity,
        allocatable={
            **capacity,
            "cpu": str(allocatable_cpus),
            "memory": str(memory - hugepages),
        },
        exclusive_cpus=exclusive,
        hugepages_bytes=hugepages,
    )


def upf_pod(node: UpfNode, case: str, hugepages_bytes: int) -> dict[str, Any]:
    """A Guaranteed pod (requests = limits) with whole CPUs, memory and hugepages, selecting the
    pool (and the case's node) and tolerating the pool's taints."""
    resources = {
        "cpu": str(node.exclusive_cpus),
        "memory": POD_MEMORY,
        "hugepages-2Mi": str(hugepages_bytes),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"upf-{case}", "namespace": "default"},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": node.pool, CASE_LABEL: case},
            "tolerations": [{**taint, "operator": "Equal"} for taint in node.taints],
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "upf",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def node(five_g_core_app: SynthesizedApp) -> UpfNode:
    return upf_node(five_g_core_app)


@dataclass(frozen=True)
class Outcome:
    """The pod as the scheduler left it, and the name of the case's node."""

    pod: dict[str, Any]
    node_name: str


@contextlib.contextmanager
def scheduled(
    plane: ControlPlane, node: UpfNode, case: str, *, hugepages: bool, pod_hugepages: int
) -> Iterator[Outcome]:
    """The case's node registered (with the profile's hugepages or without), the pod created;
    the pod once it is bound or the scheduler has called it Unschedulable. Both gone after."""
    name = f"upf-{case}"
    capacity, allocatable = dict(node.capacity), dict(node.allocatable)
    if not hugepages:  # a node of the pool whose kubelet found no pages reserved
        del capacity["hugepages-2Mi"], allocatable["hugepages-2Mi"]
        allocatable["memory"] = capacity["memory"]
    pod = upf_pod(node, case, pod_hugepages)
    try:
        register_node(
            plane,
            name,
            {**node.labels, CASE_LABEL: case},
            node.taints,
            capacity=capacity,
            allocatable=allocatable,
        )
        plane.kubectl("create", "-f", "-", stdin=json.dumps(pod))

        def current() -> dict[str, Any]:
            found: dict[str, Any] = json.loads(
                plane.kubectl("get", "pod", "-n", "default", pod["metadata"]["name"], "-o", "json")
            )
            return found

        def decided() -> bool:
            now = current()
            return bool(now["spec"].get("nodeName")) or any(
                c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in now.get("status", {}).get("conditions", [])
            )

        wait_until(decided)
        yield Outcome(current(), name)
    finally:
        plane.kubectl(
            "delete",
            "pod",
            "-n",
            "default",
            pod["metadata"]["name"],
            "--force",
            "--grace-period=0",
            "--ignore-not-found",
            check=False,
        )
        plane.kubectl("delete", "node", name, "--ignore-not-found", check=False)


def unschedulable_message(pod: dict[str, Any]) -> str:
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "False" and condition["reason"] == "Unschedulable", condition
    return str(condition["message"])


def test_the_pools_node_overlay_is_accepted_as_synthesized_and_kept_whole(
    cluster_box: ControlPlane, five_g_core_app: SynthesizedApp, node: UpfNode
) -> None:
    """Applied for real (the NodeOverlay CRD of the pinned chart, its schema and CEL rules):
    read back unpruned, and it advertises what the node's kubelet reports, so Karpenter's
    simulated node and the real one agree on the pages."""
    (overlay,) = by_kind(
        five_g_core_app.template_json(five_g_core_app.stage.cluster), "NodeOverlay"
    )
    try:
        apply(cluster_box, [overlay])
        stored = json.loads(
            cluster_box.kubectl("get", "nodeoverlay", overlay["metadata"]["name"], "-o", "json")
        )
        assert stored["spec"]["requirements"] == overlay["spec"]["requirements"]
        assert stored["spec"]["weight"] == overlay["spec"]["weight"]
        assert {k: quantity_bytes(v) for k, v in stored["spec"]["capacity"].items()} == {
            "hugepages-2Mi": int(node.capacity["hugepages-2Mi"])
        }
    finally:
        cluster_box.kubectl(
            "delete", "nodeoverlay", overlay["metadata"]["name"], "--ignore-not-found", check=False
        )


def test_the_api_server_refuses_an_overlay_that_claims_memory(
    cluster_box: ControlPlane, five_g_core_app: SynthesizedApp
) -> None:
    """The CRD's CEL rule on capacity is live in the box (so the acceptance above means
    something): cpu, memory, ephemeral-storage and pods are refused."""
    (overlay,) = by_kind(
        five_g_core_app.template_json(five_g_core_app.stage.cluster), "NodeOverlay"
    )
    wrong = copy.deepcopy(overlay)
    wrong["spec"]["capacity"]["memory"] = "1Gi"
    with pytest.raises(RuntimeError, match="invalid resource restricted"):
        apply(cluster_box, [wrong], dry_run=True)


def test_a_upf_pod_with_hugepages_and_exclusive_cpus_lands_on_a_profiled_node(
    cluster_box: ControlPlane, node: UpfNode
) -> None:
    with scheduled(
        cluster_box, node, "profiled", hugepages=True, pod_hugepages=node.hugepages_bytes
    ) as outcome:
        assert outcome.pod["spec"].get("nodeName") == outcome.node_name, outcome.pod["status"]
        assert outcome.pod["status"]["qosClass"] == "Guaranteed"


def test_a_node_without_the_profiles_hugepages_leaves_the_pod_pending(
    cluster_box: ControlPlane, node: UpfNode
) -> None:
    with scheduled(
        cluster_box, node, "unprofiled", hugepages=False, pod_hugepages=node.hugepages_bytes
    ) as outcome:
        assert "nodeName" not in outcome.pod["spec"]
        assert "Insufficient hugepages-2Mi" in unschedulable_message(outcome.pod)


def test_a_pod_asking_one_page_more_than_the_profile_stays_pending(
    cluster_box: ControlPlane, node: UpfNode
) -> None:
    with scheduled(
        cluster_box,
        node,
        "one-page-more",
        hugepages=True,
        pod_hugepages=node.hugepages_bytes + PAGE_BYTES,
    ) as outcome:
        assert "nodeName" not in outcome.pod["spec"]
        assert "Insufficient hugepages-2Mi" in unschedulable_message(outcome.pod)
