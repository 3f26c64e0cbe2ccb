"""The VPC fabric's nftables table loaded into a real bridge: pings it lets through and pings
it drops, between two node namespaces whose "ENIs" are veths with the ENIs' MACs.

The rules and their sources are in testing_support/vpc_fabric.py (EC2 User Guide, "Multiple IP
addresses" and "Prefix delegation for Amazon EC2 network interfaces"; VPC User Guide, "NAT
instances", on the source/destination check). The unit tests check the decision function and
the sets; this module checks that the kernel enforces the generated text the same way. It
needs root, nft (Debian package nftables) and ping (iputils-ping), and skips without them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from testing_support.vpc_fabric import fabric_from_ec2
from tests.helpers import unavailable_here

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
SUBNETS = {"Subnets": [{"SubnetId": "subnet-0f0f0f0f0f0f0f0f0", "CidrBlock": "10.0.4.0/24"}]}


def _eni(eni_id: str, mac: str, addresses: list[str], check: bool) -> dict[str, Any]:
    return {
        "NetworkInterfaceId": eni_id,
        "SubnetId": "subnet-0f0f0f0f0f0f0f0f0",
        "MacAddress": mac,
        "PrivateIpAddresses": [
            {"PrivateIpAddress": address, "Primary": index == 0}
            for index, address in enumerate(addresses)
        ],
        "SourceDestCheck": check,
    }


#: ENI a: check on, 10.0.4.10 + 10.0.4.40 and the prefix 10.0.4.128/28; ENI b: check off.
ENIS = {
    "NetworkInterfaces": [
        _eni("eni-a", MAC_A, ["10.0.4.10", "10.0.4.40"], check=True),
        _eni("eni-b", MAC_B, ["10.0.4.11"], check=False),
    ]
}
#: What each node configures on its ENI: the held addresses and some the VPC never assigned.
CONFIGURED = {
    "a": ["10.0.4.10", "10.0.4.40", "10.0.4.41", "10.0.4.130", "10.0.4.144", "10.0.4.99"],
    "b": ["10.0.4.11", "10.0.4.98"],
}


@dataclass(frozen=True)
class Fabric:
    """The namespaces of one fabric: the subnet's bridge and the two nodes."""

    bridge_namespace: str
    nodes: dict[str, str]  # node -> its namespace


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=30)


def ping(fabric: Fabric, node: str, destination: str, source: str = "") -> bool:
    bind = ["-I", source] if source else []
    namespace = fabric.nodes[node]
    sent = run(
        "ip", "netns", "exec", namespace, "ping", "-c1", "-W1", *bind, destination, check=False
    )
    return sent.returncode == 0


def echo_requests_from(fabric: Fabric, node: str, source: str) -> int:
    """Echo requests from `source` that reached the node, or the router for node "router" (an
    input counter), replies aside."""
    namespace = fabric.bridge_namespace if node == "router" else fabric.nodes[node]
    listed = run("ip", "netns", "exec", namespace, "nft", "list", "chain", "inet", "probe", "input")
    counted = re.search(rf"ip saddr {re.escape(source)} .*counter packets (\d+)", listed.stdout)
    assert counted, listed.stdout
    return int(counted.group(1))


@pytest.fixture
def fabric() -> Iterator[Fabric]:
    if os.geteuid() != 0:
        unavailable_here("needs root: network namespaces, a bridge and veth links")
    for tool, package in (("nft", "nftables"), ("ping", "iputils-ping")):
        if shutil.which(tool) is None:
            unavailable_here(f"{tool} is not installed (Debian package {package})")
    tag = uuid.uuid4().hex[:6]
    made = Fabric(f"vf-br-{tag}", {"a": f"vf-a-{tag}", "b": f"vf-b-{tag}"})
    created: list[str] = []
    try:
        for namespace in (made.bridge_namespace, *made.nodes.values()):
            added = run("ip", "netns", "add", namespace, check=False)
            if added.returncode != 0:
                unavailable_here(f"cannot create network namespaces here: {added.stderr.strip()}")
            created.append(namespace)
        _wire(made)
        yield made
    finally:
        for namespace in created:
            run("ip", "netns", "del", namespace, check=False)


def _wire(fabric: Fabric) -> None:
    bridge = fabric.bridge_namespace
    run("ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
    run("ip", "-n", bridge, "link", "set", "br0", "up")
    for node, mac in (("a", MAC_A), ("b", MAC_B)):
        namespace, port = fabric.nodes[node], f"port-{node}"
        run(
            "ip",
            "link",
            "add",
            port,
            "netns",
            bridge,
            "type",
            "veth",
            "peer",
            "eth1",
            "netns",
            namespace,
        )
        run("ip", "-n", bridge, "link", "set", port, "master", "br0", "up")
        for address in CONFIGURED[node]:
            run("ip", "-n", namespace, "address", "add", f"{address}/24", "dev", "eth1")
        run("ip", "-n", namespace, "link", "set", "eth1", "address", mac, "up")
        load(namespace, ECHO_REQUEST_PROBE)
    vpc_fabric = fabric_from_ec2(ENIS, SUBNETS, {"eni-a": ["10.0.4.128/28"]})
    (subnet,) = vpc_fabric.subnets
    # The bridge's own namespace plays the VPC router, at the subnet's gateway address.
    run("ip", "-n", bridge, "link", "set", "br0", "address", subnet.router_mac)
    run("ip", "-n", bridge, "address", "add", f"{subnet.gateway}/24", "dev", "br0")
    load(bridge, ECHO_REQUEST_PROBE)
    load(bridge, vpc_fabric.nftables_ruleset())


#: Counts the echo requests a node (or the router) receives from the two addresses no ENI
#: holds, replies aside.
ECHO_REQUEST_PROBE = (
    "table inet probe {\n"
    "\tchain input {\n"
    "\t\ttype filter hook input priority filter;\n"
    "\t\ticmp type echo-request ip saddr 10.0.4.98 counter\n"
    "\t\ticmp type echo-request ip saddr 10.0.4.99 counter\n"
    "\t}\n"
    "}\n"
)


def load(namespace: str, ruleset: str) -> None:
    loaded = subprocess.run(
        ["ip", "netns", "exec", namespace, "nft", "-f", "-"],
        input=ruleset,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert loaded.returncode == 0, loaded.stderr


def test_pings_reach_only_what_the_eni_holds(fabric: Fabric) -> None:
    assert ping(fabric, "b", "10.0.4.40")  # a's secondary
    assert ping(fabric, "b", "10.0.4.130")  # inside a's prefix
    assert not ping(fabric, "b", "10.0.4.41")  # configured on a, assigned to nobody
    unanswered = run("ip", "-n", fabric.nodes["b"], "neigh", "show", "10.0.4.41")
    assert "lladdr" not in unanswered.stdout  # and its ARP went unanswered
    assert not ping(fabric, "b", "10.0.4.144")
    # b configures 10.0.4.98, which nobody holds; a stale neighbour entry (as after a release)
    # sends the frame to b's MAC, so only the IPv4 rule stands in its way (b's reply would pass:
    # its check is off).
    run(
        "ip",
        "-n",
        fabric.nodes["a"],
        "neigh",
        "replace",
        "10.0.4.98",
        "lladdr",
        MAC_B,
        "dev",
        "eth1",
    )
    assert not ping(fabric, "a", "10.0.4.98")
    run("ip", "netns", "exec", fabric.bridge_namespace, "nft", "flush", "ruleset")
    assert ping(fabric, "a", "10.0.4.98")
    run("ip", "-n", fabric.nodes["b"], "neigh", "flush", "dev", "eth1")
    assert ping(fabric, "b", "10.0.4.41")  # without the table the bridge carries it


def test_the_source_check_drops_what_a_checked_eni_sends_from_others(fabric: Fabric) -> None:
    assert ping(fabric, "a", "10.0.4.11", source="10.0.4.40")  # check on, its own address
    ping(fabric, "a", "10.0.4.11", source="10.0.4.99")  # check on, not its address
    assert echo_requests_from(fabric, "b", "10.0.4.99") == 0
    ping(fabric, "b", "10.0.4.10", source="10.0.4.98")  # check off: sent (the reply is not)
    assert echo_requests_from(fabric, "a", "10.0.4.98") == 1


def test_the_router_sees_only_what_passes_the_source_check(fabric: Fabric) -> None:
    assert ping(fabric, "a", "10.0.4.1", source="10.0.4.40")  # check on, its own address
    assert not ping(fabric, "a", "10.0.4.1", source="10.0.4.99")  # check on, not its own
    assert echo_requests_from(fabric, "router", "10.0.4.99") == 0
    # Check off: the request reaches the router, whose reply the VPC does not deliver to b,
    # which does not hold 10.0.4.98.
    assert not ping(fabric, "b", "10.0.4.1", source="10.0.4.98")
    assert echo_requests_from(fabric, "router", "10.0.4.98") == 1
    assert ping(fabric, "b", "10.0.4.1", source="10.0.4.11")
