"""Floating addresses end to end: two nodes' agents (processes) on the emulator, each Multus ENI
stood in for by a veth end (testing_support/gratuitous_arp.py), and a real gratuitous ARP sent
from its peer. The active pod's node gets the address; when the other node's pod announces it,
EC2 moves it there (AllowReassignment=true, EC2 API reference, AssignPrivateIpAddresses) and
the first node's reconcile does not take it back.

Needs root (veth links, packet sockets): without it the tests skip, except under CI=true, where
they fail.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from testing_support.gratuitous_arp import VethPod, floating_node, root_can_make_links
from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, EmulatedVpc
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc, wait_until
from tests.helpers import unavailable_here

pytestmark = pytest.mark.integration

CLUSTER = "telco-cluster"
AZ = AVAILABILITY_ZONES[0]  # both nodes in one subnet: EC2 moves an address within its subnet
FLOATING = "10.0.4.60"  # inside EMULATOR_STATIC_RANGES' 10.0.4.48/28


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    if os.geteuid() != 0:
        unavailable_here("needs root: veth links and packet sockets")
    reason = root_can_make_links()
    if reason:
        unavailable_here(reason)
    return pod_ip_vpc(emulator)


def watching_node(emulator: Ec2Emulator, vpc: EmulatedVpc, link: VethPod) -> PodIpNode:
    """A node whose multus1 ENI the veth end `link.eni_end` stands in for, FLOATING among its
    floating addresses, its agent watching for announcements."""
    node = floating_node(emulator, vpc, AZ, CLUSTER, link, FLOATING)
    node.start_agent()
    assert wait_until(lambda: "watching for floating" in node.agent_log()), node.agent_log()
    return node


@pytest.fixture
def pair(emulator: Ec2Emulator, vpc: EmulatedVpc) -> Iterator[list[tuple[PodIpNode, VethPod]]]:
    links = [VethPod.create("fl"), VethPod.create("fl")]
    nodes: list[PodIpNode] = []
    emulator.proxy.reset()
    try:
        for index, link in enumerate(links):
            nodes.append(watching_node(emulator, vpc, link))
            added = nodes[-1].add_pod(f"pod{index}", f"10.0.4.{33 + index}", master=link.eni_end)
            assert added.status == 0, nodes[-1].agent_log()
        yield list(zip(nodes, links, strict=True))
    finally:
        for node in nodes:
            node.stop_agent()
        for link in links:
            link.delete()


def floating_assigns(emulator: Ec2Emulator, eni: str) -> list[str]:
    """AllowReassignment of each accepted AssignPrivateIpAddresses of FLOATING to `eni`."""
    return [
        call.params.get("AllowReassignment", "")
        for call in emulator.proxy.calls
        if call.action == "AssignPrivateIpAddresses"
        and call.status == 200
        and call.params.get("NetworkInterfaceId") == eni
        and FLOATING in call.params.values()
    ]


def test_the_address_follows_the_pod_that_announces_it_and_stays_there(
    emulator: Ec2Emulator, pair: list[tuple[PodIpNode, VethPod]]
) -> None:
    (node_a, link_a), (node_b, link_b) = pair
    eni_a, eni_b = link_a.eni_end, link_b.eni_end

    link_a.announce(FLOATING)
    assert wait_until(lambda: FLOATING in node_a.addresses(eni_a)), node_a.agent_log()
    assert floating_assigns(emulator, node_a.enis[eni_a]) == ["true"]

    link_b.announce(FLOATING)
    assert wait_until(lambda: FLOATING in node_b.addresses(eni_b)), node_b.agent_log()
    assert FLOATING not in node_a.addresses(eni_a)
    assert floating_assigns(emulator, node_b.enis[eni_b]) == ["true"]

    # Node A's reconcile (every 0.5-1.5 s here) sees the address gone and leaves it with B.
    time.sleep(4)
    assert FLOATING in node_b.addresses(eni_b)
    assert FLOATING not in node_a.addresses(eni_a)
    assert floating_assigns(emulator, node_a.enis[eni_a]) == ["true"], node_a.agent_log()
    # It did run: it found the address gone, asked EC2, and assigned nothing.
    assert f"contradicts the record ({FLOATING})" in node_a.agent_log()


def test_an_announcement_of_another_address_moves_nothing(
    emulator: Ec2Emulator, pair: list[tuple[PodIpNode, VethPod]]
) -> None:
    (node_a, link_a), _ = pair
    link_a.announce("10.0.4.61")  # in the static range, but not floating
    time.sleep(1)
    assert node_a.addresses(link_a.eni_end) == {"10.0.4.33"}
    assert not [c for c in emulator.proxy.calls if "10.0.4.61" in c.params.values()]
