"""config/pod_enis.py: what Karpenter's one reservedENIs leaves each pool's sizes for pods, as
aws/karpenter-provider-aws v1.14.1 ENILimitedPods computes it (pkg/providers/instancetype/
types.go), and the pools refused because some of their sizes would get 0 pods."""

from __future__ import annotations

import pytest

from config.pod_enis import (
    PoolInterfaces,
    own_eni_problem,
    pod_interfaces,
    reserved_enis,
    zero_pod_problems,
)

M5 = {2: 3, 4: 4, 8: 4, 16: 8}  # config/instance_types.py, NODE_POOL_FAMILIES["m5"]


def m5_pool(name: str, multus_enis: int, cpus: list[int]) -> PoolInterfaces:
    return PoolInterfaces(f"node_pools[0] ({name})", multus_enis, [("m5", n, M5[n]) for n in cpus])


@pytest.mark.parametrize(
    ("interfaces", "reserved", "usable"),
    [(3, 0, 3), (3, 2, 1), (3, 3, 0), (3, 5, 0), (8, 3, 5)],
)
def test_pod_interfaces_are_enilimitedpods_usable_interfaces(
    interfaces: int, reserved: int, usable: int
) -> None:
    # lo.Max([]int64{int64(int(networkInterfaces) - reservedENIs - numEFAOnly), 0})
    assert pod_interfaces(interfaces, reserved) == usable


def test_reserved_enis_are_the_most_any_pool_attaches() -> None:
    pools = [m5_pool("upf", 3, [4]), m5_pool("control", 1, [4]), m5_pool("plain", 0, [2])]
    assert reserved_enis(pools) == 3


def test_a_pool_whose_sizes_keep_a_pod_interface_passes() -> None:
    # m5.xlarge: 4 interfaces - 3 reserved = 1 for pods ((1 x 14) + 2 = 16 pods).
    assert zero_pod_problems([m5_pool("upf", 3, [4, 8]), m5_pool("control", 1, [4])]) == []


def test_sizes_left_without_a_pod_interface_are_named_with_the_pool_that_reserves() -> None:
    pools = [m5_pool("upf", 3, [4, 8]), m5_pool("control", 1, [2, 16])]
    (problem,) = zero_pod_problems(pools)
    assert problem.startswith("node_pools[0] (control).instance_cpus: m5.large have 3 ")
    assert "settings.reservedENIs 3 takes (the Multus ENIs of node_pools[0] (upf)" in problem
    assert "the pool launches only its other sizes" in problem
    assert "(in m5: instance_cpus [4, 8, 16, 32, 48, 64])" in problem


def test_a_pool_without_networks_pays_the_reservation_too() -> None:
    (problem,) = zero_pod_problems([m5_pool("upf", 3, [4]), m5_pool("plain", 0, [2])])
    assert "node_pools[0] (plain).instance_cpus: m5.large" in problem
    assert "the pool never gets a node" in problem


def test_a_pools_own_enis_must_leave_its_smallest_size_an_interface() -> None:
    assert own_eni_problem(m5_pool("upf", 2, [2])) is None
    problem = own_eni_problem(m5_pool("upf", 3, [2, 4]))
    assert problem is not None and "need 4 network interfaces per node" in problem
