"""The emulator's model of IPv4 prefix delegation (what moto lacks), against in-process moto."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from testing_support.ipv4_prefixes import Ipv4PrefixDelegation, PrefixRequestError

# The EC2 emulator runs moto_server: a process tier, out of make test-fast.
pytestmark = pytest.mark.integration


@pytest.fixture
def ec2() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("ec2", region_name="us-west-2")


@pytest.fixture
def subnet_id(ec2: Any) -> str:
    vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.6.0/24")["Subnet"]["SubnetId"]
    return str(subnet)


def create(ec2: Any, delegation: Ipv4PrefixDelegation, subnet_id: str, count: int) -> str:
    """What the proxy does for CreateNetworkInterface with Ipv4PrefixCount."""
    with delegation.locked:
        planned = delegation.plan(subnet_id, count, [])
        eni = ec2.create_network_interface(SubnetId=subnet_id, PrivateIpAddress=planned.private_ip)
        eni_id = str(eni["NetworkInterface"]["NetworkInterfaceId"])
        delegation.record(eni_id, planned.prefixes)
    return eni_id


def test_prefixes_come_from_the_prefix_reservation_first(ec2: Any, subnet_id: str) -> None:
    ec2.create_subnet_cidr_reservation(
        SubnetId=subnet_id, Cidr="10.0.6.128/27", ReservationType="prefix"
    )
    ec2.create_subnet_cidr_reservation(
        SubnetId=subnet_id, Cidr="10.0.6.32/27", ReservationType="explicit"
    )
    delegation = Ipv4PrefixDelegation(ec2)
    first = create(ec2, delegation, subnet_id, 2)

    assert delegation.of(first) == ("10.0.6.128/28", "10.0.6.144/28")
    primary = ec2.describe_network_interfaces(NetworkInterfaceIds=[first])["NetworkInterfaces"][0]
    address = ipaddress.IPv4Address(primary["PrivateIpAddress"])
    # EC2 keeps the first four addresses; reservations are never primary addresses.
    assert address == ipaddress.IPv4Address("10.0.6.4")

    # Exhausted: the rest of the subnet, never the explicit reservation or a used address.
    second = create(ec2, delegation, subnet_id, 1)
    (fallback,) = delegation.of(second)
    block = ipaddress.IPv4Network(fallback)
    assert not block.overlaps(ipaddress.IPv4Network("10.0.6.32/27"))
    assert not block.overlaps(ipaddress.IPv4Network("10.0.6.128/27"))
    assert address not in block


def test_without_fallback_an_exhausted_reservation_is_insufficient(
    ec2: Any, subnet_id: str
) -> None:
    ec2.create_subnet_cidr_reservation(
        SubnetId=subnet_id, Cidr="10.0.6.128/28", ReservationType="prefix"
    )
    delegation = Ipv4PrefixDelegation(ec2)
    delegation.fallback_to_subnet = False
    create(ec2, delegation, subnet_id, 1)

    with pytest.raises(PrefixRequestError) as refused:
        delegation.plan(subnet_id, 1, [])
    assert refused.value.code == "InsufficientCidrBlocks"


def test_prefixes_of_a_deleted_eni_are_free_again(ec2: Any, subnet_id: str) -> None:
    ec2.create_subnet_cidr_reservation(
        SubnetId=subnet_id, Cidr="10.0.6.128/28", ReservationType="prefix"
    )
    delegation = Ipv4PrefixDelegation(ec2)
    delegation.fallback_to_subnet = False
    gone = create(ec2, delegation, subnet_id, 1)
    ec2.delete_network_interface(NetworkInterfaceId=gone)

    # Even without release(): a prefix only counts while its ENI exists (as on termination).
    again = create(ec2, delegation, subnet_id, 1)
    assert delegation.of(again) == ("10.0.6.128/28",)
    delegation.release(gone)
    assert delegation.of(gone) == ()


@pytest.mark.parametrize(
    ("prefix", "reason"),
    [
        ("10.0.6.130/28", "not an aligned IPv4 prefix"),
        ("10.0.6.128/27", "is not a /28 of"),
        ("10.0.7.0/28", "is not a /28 of"),
        ("10.0.6.0/28", "already in use"),  # EC2's own first four addresses
    ],
)
def test_explicit_prefixes_must_be_free_28s_of_the_subnet(
    ec2: Any, subnet_id: str, prefix: str, reason: str
) -> None:
    with pytest.raises(PrefixRequestError, match=reason):
        Ipv4PrefixDelegation(ec2).plan(subnet_id, 0, [prefix])


def test_split_request_takes_out_the_prefix_parameters() -> None:
    rest, count, explicit = Ipv4PrefixDelegation.split_request(
        {"SubnetId": "subnet-1", "Ipv4PrefixCount": "3", "Ipv4Prefix.1.Ipv4Prefix": "10.0.6.0/28"}
    )
    assert (rest, count, explicit) == ({"SubnetId": "subnet-1"}, 3, ["10.0.6.0/28"])
