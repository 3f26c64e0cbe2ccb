"""The pod IP agent and CNI plugin on a dual-stack network, as processes on the emulator: a pod's
IPv4 and IPv6 addresses go on its node's Multus ENI together and leave it on delete, in a few
batched EC2 calls; the reconcile restores both families.

Sources: EC2 API reference, AssignIpv6Addresses / UnassignIpv6Addresses (Ipv6Addresses.N, no
AllowReassignment); EC2 User Guide, "Instance metadata categories" (network/interfaces/macs/
mac/ipv6s). The emulator's EniAddressModel refuses what EC2 refuses (testing_support/
eni_addresses.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

import pytest

from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, EmulatedVpc
from testing_support.pod_ip_node import (
    EMULATOR_RANGES,
    PodIpNode,
    dual_stack_ranges,
    ipv6_pod_range,
    outcome,
    pod_ip_vpc,
    wait_until,
)

pytestmark = pytest.mark.integration

CLUSTER = "dual-stack-cluster"
AZ = AVAILABILITY_ZONES[0]


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    """multus1 dual-stack, multus2 IPv4 only."""
    return pod_ip_vpc(emulator, dual_stack=("multus1",))


@pytest.fixture
def node(emulator: Ec2Emulator, vpc: EmulatedVpc) -> Iterator[PodIpNode]:
    emulator.proxy.reset()
    started = PodIpNode.bootstrap(
        emulator,
        vpc,
        AZ,
        CLUSTER,
        interfaces={
            "multus1": dual_stack_ranges(vpc, "multus1"),
            "multus2": EMULATOR_RANGES["multus2"],
        },
    )
    started.start_agent()
    yield started
    started.stop_agent()
    emulator.proxy.reset()


def pod_ipv6(vpc: EmulatedVpc, host: int) -> str:
    pod_range = ipaddress.ip_network(ipv6_pod_range(vpc.ipv6_subnet_cidrs["multus1", AZ]))
    return str(pod_range[host])


def test_a_pods_two_addresses_go_on_the_eni_and_leave_it_on_delete(
    vpc: EmulatedVpc, node: PodIpNode
) -> None:
    (seed,) = node.ipv6_addresses("multus1")  # the bootstrap's, outside the pod range

    added = node.add_pod("a", "10.0.4.33", ipv6=pod_ipv6(vpc, 1))

    assert added.status == 0, (added.stdout, node.agent_log())
    assert node.addresses("multus1") == {"10.0.4.33"}
    assert node.ipv6_addresses("multus1") == {seed, pod_ipv6(vpc, 1)}
    assert node.delete_pod("a", "10.0.4.33", ipv6=pod_ipv6(vpc, 1)).status == 0
    assert node.addresses("multus1") == set()
    assert node.ipv6_addresses("multus1") == {seed}


def test_a_burst_of_dual_stack_pods_costs_one_call_per_family_and_batch(
    emulator: Ec2Emulator, vpc: EmulatedVpc, node: PodIpNode
) -> None:
    emulator.proxy.latency_seconds = 0.3
    try:
        pending = []
        for host in range(8):
            node.netns(f"burst{host}")
            pending.append(
                node.cni_command(
                    "ADD", f"burst{host}", ip=f"10.0.4.{40 + host}", ipv6=pod_ipv6(vpc, 10 + host)
                )
            )
        emulator.proxy.reset()
        for started in pending:
            started.release()
        results = [outcome(started) for started in pending]
    finally:
        emulator.proxy.latency_seconds = 0.0

    assert [result.status for result in results] == [0] * 8, node.agent_log()
    ipv6_calls = [c for c in emulator.proxy.calls if c.action == "AssignIpv6Addresses"]
    ipv4_calls = [c for c in emulator.proxy.calls if c.action == "AssignPrivateIpAddresses"]
    assert len(ipv6_calls) < 4 and len(ipv4_calls) < 4, node.agent_log()
    assert {pod_ipv6(vpc, 10 + host) for host in range(8)} <= node.ipv6_addresses("multus1")


def test_the_reconcile_restores_an_ipv6_address_removed_behind_the_agents_back(
    emulator: Ec2Emulator, vpc: EmulatedVpc, node: PodIpNode
) -> None:
    assert node.add_pod("r", "10.0.4.35", ipv6=pod_ipv6(vpc, 5)).status == 0
    emulator.ec2.unassign_ipv6_addresses(
        NetworkInterfaceId=node.enis["multus1"], Ipv6Addresses=[pod_ipv6(vpc, 5)]
    )

    assert wait_until(lambda: pod_ipv6(vpc, 5) in node.ipv6_addresses("multus1")), node.agent_log()


def test_an_ipv6_address_outside_the_networks_ranges_is_refused(
    vpc: EmulatedVpc, node: PodIpNode
) -> None:
    # multus2 is IPv4 only: its agent ranges hold no IPv6 range.
    refused = node.add_pod("x", "10.0.6.33", master="multus2", ipv6=pod_ipv6(vpc, 1))

    assert refused.status == 1
    assert refused.json["code"] == 7
    assert node.addresses("multus2") == set()
