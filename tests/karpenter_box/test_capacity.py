"""Capacity: for each pool, the allocatable CPU, memory, hugepages and pods Karpenter computes
for the instance it launched are what the node's kubelet reports (the box registers each node
with what its kubelet would report from the instance type and the launch template's user data:
testing_support/karpenter_box/node_allocatable.py), so Karpenter never launches a node that the
pod it launched it for cannot fit.

Tolerances, each in the safe direction (Karpenter counts less than the kubelet allocates):
- CPU: Karpenter subtracts its own kube-reserved CPU as well as the EC2NodeClass's
  systemReserved, where the kubelet, given reservedSystemCPUs, drops kube-reserved CPU
  (config/node_profile.py NodeProfile.karpenter_kubelet): nodeadm's kube-reserved CPU of the size.
- memory: Karpenter subtracts 7.5% of the nominal size for the kernel (VM_MEMORY_OVERHEAD_PERCENT)
  and its kube-reserved memory from its own max pods, fewer than nodeadm's by reservedENIs.
"""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import wait_for
from testing_support.karpenter_box.node_allocatable import nodeadm_kube_reserved_cpu_millicores
from tests.helpers import quantity_bytes
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS,
    claims,
    create_pod,
    delete_pod,
    node_of,
    node_pools,
    pool_pod,
)

pytestmark = pytest.mark.karpenter_box

BOXES = ("default_box", "five_g_core_box")


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(quantity) * 1000


def mebibytes(quantity: str) -> int:
    return quantity_bytes(quantity) // 2**20


def registered(box: KarpenterBox, pool: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    found = []
    for claim in claims(box, pool):
        node = node_of(box, claim) if claim.get("status", {}).get("allocatable") else None
        # A Node the kubelet player created but whose status it has not yet written is not
        # registered yet.
        if node is not None and node.get("status", {}).get("allocatable"):
            found.append((claim, node))
    return found


def registered_pairs(box: KarpenterBox, pool: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = wait_for(
        lambda: registered(box, pool),
        LAUNCH_SECONDS,
        f"a registered node of pool {pool}",
        lambda: claims(box, pool),
    )
    return pairs


@pytest.mark.parametrize("box_fixture", BOXES)
def test_capacity_karpenter_counts_is_what_the_kubelet_allocates(
    box_fixture: str, request: pytest.FixtureRequest
) -> None:
    box: KarpenterBox = request.getfixturevalue(box_fixture)
    for pool_name, node_pool in node_pools(box).items():
        pod = pool_pod(f"capacity-{pool_name}", node_pool)
        create_pod(box, pod)
        try:
            pairs = registered_pairs(box, pool_name)
        finally:
            delete_pod(box, pod["metadata"]["name"])
        for claim, node in pairs:
            karpenter, kubelet = claim["status"]["allocatable"], node["status"]["allocatable"]
            where = f"{pool_name} {claim['metadata']['labels']['node.kubernetes.io/instance-type']}"
            vcpus = int(node["status"]["capacity"]["cpu"])
            gap = millicores(kubelet["cpu"]) - millicores(karpenter["cpu"])
            assert 0 <= gap <= nodeadm_kube_reserved_cpu_millicores(vcpus), (
                where,
                karpenter,
                kubelet,
            )
            assert mebibytes(karpenter["memory"]) <= mebibytes(kubelet["memory"]), where
            assert karpenter.get("hugepages-2Mi") == kubelet.get("hugepages-2Mi"), where
            assert int(karpenter["pods"]) <= int(kubelet["pods"]), where
