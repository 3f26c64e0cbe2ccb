"""The VPC fabric model: which frames the VPC delivers between a Multus subnet's ENIs, as a
decision function and as the nftables bridge table that enforces it.

Sources (as in testing_support/vpc_fabric.py): EC2 User Guide, "Multiple IP addresses" and
"Prefix delegation for Amazon EC2 network interfaces" (delivery to assigned addresses and
delegated prefixes); VPC User Guide, "NAT instances" ("the instance must be the source or
destination of any traffic it sends or receives") and EC2 API reference,
ModifyNetworkInterfaceAttribute `SourceDestCheck`; VPC User Guide, "Subnet CIDR blocks" (the
base address plus one is the VPC router) and "Route tables" (the local route: traffic between
subnets goes through that router); Amazon VPC FAQs ("Amazon VPC does not support
broadcast or multicast")."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from testing_support.vpc_fabric import Frame, FrameKind, VpcFabric, fabric_from_ec2
from tests.helpers import unavailable_here

# Real nftables rules in network namespaces: a kernel tier, out of make test-fast.
pytestmark = pytest.mark.integration

BROADCAST = "ff:ff:ff:ff:ff:ff"


@pytest.fixture
def vpc() -> Iterator[SimpleNamespace]:
    """A Multus subnet with ENI a (check on: 10.0.4.10, 10.0.4.40 and the prefix
    10.0.4.128/28) and ENI b (check off: 10.0.4.11), and a node subnet with one ENI."""
    with mock_aws():
        ec2: Any = boto3.client("ec2", region_name="us-west-2")
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        multus = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"]
        node = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.2.0/24")["Subnet"]["SubnetId"]

        def eni(subnet: str, primary: str) -> dict[str, str]:
            made = ec2.create_network_interface(SubnetId=subnet, PrivateIpAddress=primary)
            return dict(made["NetworkInterface"])

        a, b = eni(multus, "10.0.4.10"), eni(multus, "10.0.4.11")
        other = eni(node, "10.0.2.10")
        ec2.assign_private_ip_addresses(
            NetworkInterfaceId=a["NetworkInterfaceId"], PrivateIpAddresses=["10.0.4.40"]
        )
        ec2.modify_network_interface_attribute(
            NetworkInterfaceId=b["NetworkInterfaceId"], SourceDestCheck={"Value": False}
        )

        def fabric() -> VpcFabric:
            return fabric_from_ec2(
                ec2.describe_network_interfaces(),
                ec2.describe_subnets(SubnetIds=[multus]),
                {a["NetworkInterfaceId"]: ["10.0.4.128/28"]},
            )

        yield SimpleNamespace(
            ec2=ec2,
            fabric=fabric,
            a=a["NetworkInterfaceId"],
            mac_a=a["MacAddress"],
            mac_b=b["MacAddress"],
            mac_other=other["MacAddress"],
        )


def ipv4(source_mac: str, destination_mac: str, source: str, destination: str) -> Frame:
    return Frame(FrameKind.IPV4, source_mac, destination_mac, source, destination)


def arp_request(source_mac: str, sender: str, target: str) -> Frame:
    return Frame(FrameKind.ARP_REQUEST, source_mac, BROADCAST, sender, target)


def arp_reply(source_mac: str, destination_mac: str, sender: str, target: str) -> Frame:
    return Frame(FrameKind.ARP_REPLY, source_mac, destination_mac, sender, target)


@pytest.mark.parametrize(
    ("destination", "delivered"),
    [
        ("10.0.4.10", True),  # primary
        ("10.0.4.40", True),  # secondary
        ("10.0.4.41", False),  # next to it, assigned to nobody
        ("10.0.4.128", True),  # first address of the delegated prefix
        ("10.0.4.143", True),  # its last
        ("10.0.4.144", False),  # just past it
        ("10.0.4.11", False),  # b's address, sent to a's MAC
    ],
)
def test_frames_reach_an_eni_only_for_what_it_holds(
    vpc: SimpleNamespace, destination: str, delivered: bool
) -> None:
    frame = ipv4(vpc.mac_b, vpc.mac_a, "10.0.4.11", destination)
    assert vpc.fabric().delivers(frame) is delivered


def test_an_unassigned_address_is_no_longer_delivered(vpc: SimpleNamespace) -> None:
    frame = ipv4(vpc.mac_b, vpc.mac_a, "10.0.4.11", "10.0.4.40")
    assert vpc.fabric().delivers(frame)
    vpc.ec2.unassign_private_ip_addresses(
        NetworkInterfaceId=vpc.a, PrivateIpAddresses=["10.0.4.40"]
    )
    assert not vpc.fabric().delivers(frame)


@pytest.mark.parametrize(
    ("sender", "source", "delivered"),
    [
        ("a", "10.0.4.40", True),  # check on, its own secondary
        ("a", "10.0.4.130", True),  # check on, inside its prefix
        ("a", "10.0.4.144", False),  # check on, an address it does not hold
        ("a", "192.168.0.1", False),  # check on, outside the VPC (a UE pool address)
        ("b", "10.0.4.144", True),  # check off: any source
        ("b", "192.168.0.1", True),
    ],
)
def test_the_source_check_limits_what_an_eni_sends_from(
    vpc: SimpleNamespace, sender: str, source: str, delivered: bool
) -> None:
    macs = {"a": (vpc.mac_a, vpc.mac_b, "10.0.4.11"), "b": (vpc.mac_b, vpc.mac_a, "10.0.4.10")}
    source_mac, destination_mac, destination = macs[sender]
    frame = ipv4(source_mac, destination_mac, source, destination)
    assert vpc.fabric().delivers(frame) is delivered


@pytest.mark.parametrize(
    ("target", "answered"),
    [
        ("10.0.4.40", True),
        ("10.0.4.41", False),
        ("10.0.4.143", True),  # inside a's prefix
        ("10.0.4.144", False),
        ("10.0.4.1", True),  # the gateway: the VPC router answers
        ("10.0.4.2", False),  # reserved by AWS (DNS), held by no ENI
    ],
)
def test_arp_requests_cross_only_for_held_addresses(
    vpc: SimpleNamespace, target: str, answered: bool
) -> None:
    assert vpc.fabric().delivers(arp_request(vpc.mac_b, "10.0.4.11", target)) is answered


def test_arp_replies_come_only_from_the_holder(vpc: SimpleNamespace) -> None:
    fabric = vpc.fabric()
    assert fabric.delivers(arp_reply(vpc.mac_a, vpc.mac_b, "10.0.4.40", "10.0.4.11"))
    # b's check is off, yet it cannot claim a's address.
    assert not fabric.delivers(arp_reply(vpc.mac_b, vpc.mac_a, "10.0.4.40", "10.0.4.10"))
    assert not fabric.delivers(arp_reply(vpc.mac_b, vpc.mac_a, "10.0.4.99", "10.0.4.10"))


@pytest.mark.parametrize(
    "frame",
    [
        ipv4("{b}", BROADCAST, "10.0.4.11", "10.0.4.255"),  # subnet broadcast
        ipv4("{b}", BROADCAST, "10.0.4.11", "255.255.255.255"),
        ipv4("{b}", "01:00:5e:00:00:fb", "10.0.4.11", "224.0.0.251"),  # multicast (mDNS)
        Frame(FrameKind.IPV6, "{b}", "{a}"),
        Frame(FrameKind.OTHER, "{b}", "{a}"),
        ipv4("{other}", "{a}", "10.0.2.10", "10.0.4.10"),  # a MAC that is no Multus ENI's
    ],
)
def test_no_broadcast_multicast_or_other_traffic(vpc: SimpleNamespace, frame: Frame) -> None:
    macs = {"{a}": vpc.mac_a, "{b}": vpc.mac_b, "{other}": vpc.mac_other}
    placed = Frame(
        frame.kind,
        macs[frame.source_mac],
        macs.get(frame.destination_mac, frame.destination_mac),
        frame.source_ip,
        frame.destination_ip,
    )
    assert not vpc.fabric().delivers(placed)


def router(vpc: SimpleNamespace) -> str:
    (subnet,) = vpc.fabric().subnets
    return str(subnet.router_mac)


@pytest.mark.parametrize(
    ("sender", "source", "delivered"),
    [
        ("a", "10.0.4.40", True),  # check on, its own address: routed on
        ("a", "10.0.4.144", False),  # check on, not its address: the router never sees it
        ("b", "10.0.4.144", True),  # check off
    ],
)
def test_what_an_eni_sends_to_the_router_passes_its_source_check(
    vpc: SimpleNamespace, sender: str, source: str, delivered: bool
) -> None:
    mac = {"a": vpc.mac_a, "b": vpc.mac_b}[sender]
    frame = ipv4(mac, router(vpc), source, "10.0.2.10")
    assert vpc.fabric().delivers(frame) is delivered


@pytest.mark.parametrize(
    ("destination", "delivered"),
    [("10.0.4.40", True), ("10.0.4.130", True), ("10.0.4.41", False), ("10.0.4.11", False)],
)
def test_the_router_delivers_to_an_eni_only_what_it_holds(
    vpc: SimpleNamespace, destination: str, delivered: bool
) -> None:
    frame = ipv4(router(vpc), vpc.mac_a, "10.0.2.10", destination)
    assert vpc.fabric().delivers(frame) is delivered


def test_the_router_asks_for_any_address_and_answers_only_for_itself(
    vpc: SimpleNamespace,
) -> None:
    fabric, mac = vpc.fabric(), router(vpc)
    assert fabric.delivers(arp_request(mac, "10.0.4.1", "10.0.4.41"))
    assert fabric.delivers(arp_reply(mac, vpc.mac_a, "10.0.4.1", "10.0.4.10"))
    assert not fabric.delivers(arp_reply(mac, vpc.mac_a, "10.0.4.40", "10.0.4.10"))
    assert not fabric.delivers(Frame(FrameKind.IPV6, mac, vpc.mac_a))


def test_each_subnet_has_its_own_unicast_router_mac() -> None:
    two = {"Subnets": [*SUBNET["Subnets"], {"SubnetId": "subnet-2", "CidrBlock": "10.0.5.0/24"}]}
    macs = [subnet.router_mac for subnet in fabric_from_ec2(_answer(), two).subnets]
    assert len(set(macs)) == 2
    for mac in macs:
        first = int(mac.split(":")[0], 16)
        assert first & 0b10 and not first & 0b01  # locally administered, unicast
    again = fabric_from_ec2(_answer(), two).subnets
    assert [subnet.router_mac for subnet in again] == macs


def _set_elements(ruleset: str, name: str) -> set[str]:
    found = re.search(rf"\t(?:set|map) {name} {{\n(.*?)\n\t}}", ruleset, re.DOTALL)
    assert found, f"no set {name}"
    elements = re.search(r"elements = \{ (.*) \}", found.group(1))
    return set(elements.group(1).split(", ")) if elements else set()


def test_the_ruleset_holds_exactly_each_enis_addresses(vpc: SimpleNamespace) -> None:
    fabric = vpc.fabric()
    ruleset = fabric.nftables_ruleset()
    (subnet,) = fabric.subnets
    chain = subnet.chain
    a, b = vpc.mac_a, vpc.mac_b
    assert _set_elements(ruleset, f"{chain}_held") == {
        f"{a} . 10.0.4.10",
        f"{a} . 10.0.4.40",
        f"{a} . 10.0.4.128/28",
        f"{b} . 10.0.4.11",
    }
    assert _set_elements(ruleset, f"{chain}_answered") == {
        "10.0.4.1",
        "10.0.4.10",
        "10.0.4.11",
        "10.0.4.40",
        "10.0.4.128/28",
    }
    assert _set_elements(ruleset, f"{chain}_source_checked") == {a}
    assert _set_elements(ruleset, "subnet_of_eni") == {f"{a} : jump {chain}", f"{b} : jump {chain}"}
    assert _set_elements(ruleset, "subnet_of_router") == {
        f"{subnet.router_mac} : jump {chain}_router"
    }
    for hook, verdicts in (("forward", "eni"), ("input", "eni"), ("output", "router")):
        assert (
            f"type filter hook {hook} priority filter; policy drop;\n"
            f"\t\tether saddr vmap @subnet_of_{verdicts}"
        ) in ruleset
    assert vpc.mac_other not in ruleset  # the node subnet is not part of the fabric


def test_the_ruleset_does_not_depend_on_the_answers_order(vpc: SimpleNamespace) -> None:
    answer = vpc.ec2.describe_network_interfaces()
    subnets = vpc.ec2.describe_subnets()
    multus = {"Subnets": [s for s in subnets["Subnets"] if s["CidrBlock"] == "10.0.4.0/24"]}
    shuffled = dict(answer, NetworkInterfaces=random.sample(answer["NetworkInterfaces"], 3))
    for item in shuffled["NetworkInterfaces"]:
        random.shuffle(item["PrivateIpAddresses"])
    expected = fabric_from_ec2(answer, multus).nftables_ruleset()
    assert fabric_from_ec2(shuffled, multus).nftables_ruleset() == expected


def _answer(*addresses: list[str], prefixes: tuple[list[str], ...] = ()) -> dict[str, Any]:
    return {
        "NetworkInterfaces": [
            {
                "NetworkInterfaceId": f"eni-{index}",
                "SubnetId": "subnet-1",
                "MacAddress": f"02:00:00:00:00:0{index}",
                "PrivateIpAddresses": [
                    {"PrivateIpAddress": address, "Primary": position == 0}
                    for position, address in enumerate(held)
                ],
                "Ipv4Prefixes": [
                    {"Ipv4Prefix": p} for p in (prefixes[index] if index < len(prefixes) else [])
                ],
                "SourceDestCheck": True,
            }
            for index, held in enumerate(addresses)
        ]
    }


SUBNET = {"Subnets": [{"SubnetId": "subnet-1", "CidrBlock": "10.0.4.0/24"}]}


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_answer(["10.0.4.10"], ["10.0.4.10"]), "eni-1: 10.0.4.10/32 overlaps an address of eni-0"),
        (
            _answer(["10.0.4.10"], ["10.0.4.130"], prefixes=(["10.0.4.128/28"],)),
            "eni-1: 10.0.4.130/32 overlaps an address of eni-0",
        ),
        (_answer(["10.0.5.10"]), "eni-0: 10.0.5.10/32 is outside its subnet 10.0.4.0/24"),
    ],
)
def test_state_ec2_never_shows_is_refused(answer: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        fabric_from_ec2(answer, SUBNET)


def test_distinct_addresses_next_to_a_prefix_are_accepted() -> None:
    answer = _answer(["10.0.4.10"], ["10.0.4.144"], prefixes=(["10.0.4.128/28"],))
    (subnet,) = fabric_from_ec2(answer, SUBNET).subnets
    assert [eni.eni_id for eni in subnet.enis] == ["eni-0", "eni-1"]


def test_nft_accepts_the_ruleset(vpc: SimpleNamespace, tmp_path: Path) -> None:
    """nft -c checks the table against the running kernel's nf_tables (concatenated interval
    sets, verdict maps, ARP and bridge expressions) without loading it."""
    nft = shutil.which("nft")
    if nft is None:
        unavailable_here("nft is not installed (Debian package nftables)")
    path = tmp_path / "fabric.nft"
    path.write_text(vpc.fabric().nftables_ruleset())
    checked = subprocess.run([nft, "-c", "-f", str(path)], capture_output=True, text=True)
    if "Operation not permitted" in checked.stderr:
        unavailable_here(f"nft -c needs CAP_NET_ADMIN: {checked.stderr.strip()}")
    assert checked.returncode == 0, checked.stderr
