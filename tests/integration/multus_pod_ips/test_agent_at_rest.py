"""The pod IP agent at rest on the emulator: its periodic reconcile reads IMDS, not EC2, and
tolerates IMDS lagging EC2 for the settle time after its own changes.

Sources: EC2 User Guide, "Instance metadata categories" (network/interfaces/macs/mac/local-ipv4s);
EC2 API reference, AssignPrivateIpAddresses (remapping is asynchronous: local-ipv4s confirms it,
so IMDS lags EC2); EC2 developer guide, "Request throttling for the Amazon EC2 API" (each
request takes a token from the account's per-API bucket).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, EmulatedVpc
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc, wait_until

pytestmark = pytest.mark.integration

CLUSTER = "rest-cluster"


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    return pod_ip_vpc(emulator)


@pytest.fixture
def started(emulator: Ec2Emulator) -> Iterator[list[PodIpNode]]:
    nodes: list[PodIpNode] = []
    yield nodes
    for node in nodes:
        node.stop_agent()
    emulator.imds.lag_seconds = 0.0
    emulator.proxy.reset()


def node_with_agent(
    started: list[PodIpNode], emulator: Ec2Emulator, vpc: EmulatedVpc, settle_seconds: float
) -> PodIpNode:
    node = PodIpNode.bootstrap(
        emulator,
        vpc,
        AVAILABILITY_ZONES[0],
        CLUSTER,
        reconcile_seconds=0.3,
        settle_seconds=settle_seconds,
    )
    started.append(node)
    node.start_agent()
    return node


def local_ipv4s_reads(node: PodIpNode) -> int:
    path = f"network/interfaces/macs/{node.mac('multus1')}/local-ipv4s"
    return node.emulator.imds.reads[node.instance_id, path]


def wait_for_reconciles(node: PodIpNode, count: int) -> None:
    reads = local_ipv4s_reads(node)
    assert wait_until(lambda: local_ipv4s_reads(node) >= reads + count, timeout=20), (
        node.agent_log()
    )


def test_an_agent_with_pods_at_rest_makes_no_ec2_call(
    emulator: Ec2Emulator, vpc: EmulatedVpc, started: list[PodIpNode]
) -> None:
    node = node_with_agent(started, emulator, vpc, settle_seconds=0.5)
    assert node.add_pod("a", "10.0.4.50").status == 0
    assert node.add_pod("b", "10.0.6.50", master="multus2").status == 0
    time.sleep(0.6)  # past the settle time of the ADDs
    emulator.proxy.reset()

    wait_for_reconciles(node, 5)

    assert node.ec2_calls() == []
    assert node.addresses("multus1") == {"10.0.4.50"}


def test_imds_lagging_less_than_the_settle_time_costs_no_ec2_call(
    emulator: Ec2Emulator, vpc: EmulatedVpc, started: list[PodIpNode]
) -> None:
    node = node_with_agent(started, emulator, vpc, settle_seconds=3.0)
    emulator.imds.lag_seconds = 1.0
    assert node.add_pod("a", "10.0.4.51").status == 0  # answers once IMDS lists it
    emulator.proxy.reset()
    assert node.delete_pod("a", "10.0.4.51").status == 0

    wait_for_reconciles(node, 4)  # IMDS still lists the address for the first of them

    assert [call.action for call in node.ec2_calls()] == ["UnassignPrivateIpAddresses"]
    assert node.addresses("multus1") == set()


def test_imds_lagging_past_the_settle_time_is_checked_with_ec2_and_nothing_is_undone(
    emulator: Ec2Emulator, vpc: EmulatedVpc, started: list[PodIpNode]
) -> None:
    node = node_with_agent(started, emulator, vpc, settle_seconds=0.3)
    emulator.imds.lag_seconds = 2.0
    assert node.add_pod("a", "10.0.4.52").status == 0
    emulator.proxy.reset()
    assert node.delete_pod("a", "10.0.4.52").status == 0

    wait_for_reconciles(node, 4)

    actions = [call.action for call in node.ec2_calls()]
    assert actions[0] == "UnassignPrivateIpAddresses"
    assert "DescribeNetworkInterfaces" in actions[1:]
    assert "AssignPrivateIpAddresses" not in actions
    assert node.addresses("multus1") == set()
