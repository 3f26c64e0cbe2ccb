"""The emulator's secondary-address model (EC2 behaviour moto lacks), on in-process moto."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from testing_support.eni_addresses import EniAddressModel

# The EC2 emulator runs moto_server: a process tier, out of make test-fast.
pytestmark = pytest.mark.integration


@pytest.fixture
def vpc() -> Iterator[SimpleNamespace]:
    with mock_aws():
        ec2: Any = boto3.client("ec2", region_name="us-west-2")
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"]

        def node(instance_type: str) -> str:
            instance = ec2.run_instances(
                ImageId="ami-12c6146b",
                InstanceType=instance_type,
                MinCount=1,
                MaxCount=1,
                SubnetId=subnet,
            )["Instances"][0]["InstanceId"]
            # Primaries below the addresses the tests assign (moto would pick any at random).
            primary = f"10.0.4.{10 + len(ec2.describe_network_interfaces()['NetworkInterfaces'])}"
            eni = ec2.create_network_interface(SubnetId=subnet, PrivateIpAddress=primary)[
                "NetworkInterface"
            ]
            ec2.attach_network_interface(
                NetworkInterfaceId=eni["NetworkInterfaceId"], InstanceId=instance, DeviceIndex=1
            )
            return str(eni["NetworkInterfaceId"])

        yield SimpleNamespace(ec2=ec2, model=EniAddressModel(ec2), node=node, subnet=subnet)


def assign(vpc: SimpleNamespace, eni: str, *ips: str, reassign: bool = False) -> Any:
    params = {"NetworkInterfaceId": eni, "AllowReassignment": str(reassign).lower()}
    params.update({f"PrivateIpAddress.{n}": ip for n, ip in enumerate(ips, 1)})
    refusal = vpc.model("AssignPrivateIpAddresses", params)
    if refusal is None:  # what the proxy does next: moto applies it
        vpc.ec2.assign_private_ip_addresses(NetworkInterfaceId=eni, PrivateIpAddresses=list(ips))
    return refusal


def test_reassignment_moves_the_address_and_without_it_the_address_is_in_use(
    vpc: SimpleNamespace,
) -> None:
    first, second = vpc.node("m5.large"), vpc.node("m5.large")
    assert assign(vpc, first, "10.0.4.40") is None

    assert assign(vpc, second, "10.0.4.40")[:2] == (400, "InvalidIPAddress.InUse")
    assert vpc.model.addresses(first) == {"10.0.4.40"}
    assert assign(vpc, second, "10.0.4.40", reassign=True) is None
    assert (vpc.model.addresses(first), vpc.model.addresses(second)) == (set(), {"10.0.4.40"})


def test_the_instance_types_addresses_per_eni_are_the_limit(vpc: SimpleNamespace) -> None:
    eni = vpc.node("m5.large")  # 10 IPv4 addresses per ENI, the primary included
    assert assign(vpc, eni, *(f"10.0.4.{h}" for h in range(40, 49))) is None

    refusal = assign(vpc, eni, "10.0.4.49")

    assert refusal[:2] == (400, "PrivateIpAddressLimitExceeded")
    assert len(vpc.model.addresses(eni)) == 9


def test_addresses_outside_the_subnet_and_unassigning_foreign_ones_are_refused(
    vpc: SimpleNamespace,
) -> None:
    eni = vpc.node("m5.large")
    assert assign(vpc, eni, "10.0.5.40")[:2] == (400, "InvalidParameterValue")
    refusal = vpc.model(
        "UnassignPrivateIpAddresses",
        {"NetworkInterfaceId": eni, "PrivateIpAddress.1": "10.0.4.41"},
    )
    assert refusal is not None and refusal[:2] == (400, "InvalidParameterValue")
    assert vpc.model("DescribeNetworkInterfaces", {}) is None


@pytest.mark.parametrize(
    ("remap_seconds", "moved"), [(0.0, True), (math.inf, False)], ids=["done", "never"]
)
def test_imds_shows_a_moved_address_on_its_new_eni_only_once_the_remap_is_done(
    vpc: SimpleNamespace, remap_seconds: float, moved: bool
) -> None:
    # EC2 API reference, AssignPrivateIpAddresses: "Remapping an IP address is an asynchronous
    # operation"; local-ipv4s in IMDS confirms it. EC2's API shows the new owner at once.
    first, second = vpc.node("m5.large"), vpc.node("m5.large")
    assert assign(vpc, first, "10.0.4.40") is None
    vpc.model.remap_seconds = remap_seconds

    assert assign(vpc, second, "10.0.4.40", reassign=True) is None

    assert (vpc.model.addresses(first), vpc.model.addresses(second)) == (set(), {"10.0.4.40"})
    assert ("10.0.4.40" in vpc.model.imds_addresses(second, ["10.0.4.11", "10.0.4.40"])) is moved
    assert ("10.0.4.40" in vpc.model.imds_addresses(first, ["10.0.4.10"])) is not moved


def test_an_unassigned_address_is_no_longer_moving(vpc: SimpleNamespace) -> None:
    first, second = vpc.node("m5.large"), vpc.node("m5.large")
    assert assign(vpc, first, "10.0.4.40") is None
    vpc.model.remap_seconds = math.inf
    assert assign(vpc, second, "10.0.4.40", reassign=True) is None
    params = {"NetworkInterfaceId": second, "PrivateIpAddress.1": "10.0.4.40"}

    assert vpc.model("UnassignPrivateIpAddresses", params) is None

    assert vpc.model.imds_addresses(first, ["10.0.4.10"]) == ["10.0.4.10"]


# --- IPv6 (EC2 API reference, AssignIpv6Addresses / UnassignIpv6Addresses) -------------------


@pytest.fixture
def dual_stack(vpc: SimpleNamespace) -> SimpleNamespace:
    """vpc's subnet with a /64 of the VPC's Amazon-provided /56."""
    subnet = vpc.ec2.describe_subnets(SubnetIds=[vpc.subnet])["Subnets"][0]
    block = vpc.ec2.associate_vpc_cidr_block(
        VpcId=subnet["VpcId"], AmazonProvidedIpv6CidrBlock=True
    )
    prefix = block["Ipv6CidrBlockAssociation"]["Ipv6CidrBlock"].split("::")[0]
    vpc.ec2.associate_subnet_cidr_block(SubnetId=vpc.subnet, Ipv6CidrBlock=f"{prefix}::/64")
    vpc.ipv6 = lambda host: f"{prefix}::{host:x}"
    return vpc


def assign_ipv6(vpc: SimpleNamespace, eni: str, *ips: str) -> Any:
    params = {"NetworkInterfaceId": eni}
    params.update({f"Ipv6Addresses.{n}": ip for n, ip in enumerate(ips, 1)})
    refusal = vpc.model("AssignIpv6Addresses", params)
    if refusal is None:
        vpc.ec2.assign_ipv6_addresses(NetworkInterfaceId=eni, Ipv6Addresses=list(ips))
    return refusal


def test_an_ipv6_address_another_eni_holds_is_refused_never_moved(
    dual_stack: SimpleNamespace,
) -> None:
    # AssignIpv6Addresses has no AllowReassignment: whatever the request says, no move.
    first, second = dual_stack.node("m5.large"), dual_stack.node("m5.large")
    address = dual_stack.ipv6(0x100)
    assert assign_ipv6(dual_stack, first, address) is None

    refusal = dual_stack.model(
        "AssignIpv6Addresses",
        {"NetworkInterfaceId": second, "Ipv6Addresses.1": address, "AllowReassignment": "true"},
    )

    assert refusal is not None and refusal[:2] == (400, "InvalidIPAddress.InUse")
    assert dual_stack.model.ipv6_addresses(first) == {address}
    assert dual_stack.model.ipv6_addresses(second) == set()


def test_the_instance_types_ipv6_addresses_per_eni_are_the_limit(
    dual_stack: SimpleNamespace,
) -> None:
    eni = dual_stack.node("m5.large")  # 10 IPv6 addresses per ENI, as many as IPv4
    assert assign_ipv6(dual_stack, eni, *(dual_stack.ipv6(h) for h in range(0x100, 0x10A))) is None

    refusal = assign_ipv6(dual_stack, eni, dual_stack.ipv6(0x10A))

    assert refusal is not None and refusal[:2] == (400, "PrivateIpAddressLimitExceeded")
    assert len(dual_stack.model.ipv6_addresses(eni)) == 10


def test_ipv6_outside_the_subnets_block_and_unassigning_foreign_ones_are_refused(
    dual_stack: SimpleNamespace,
) -> None:
    eni = dual_stack.node("m5.large")
    outside = str(ipaddress.ip_address(dual_stack.ipv6(0x100)) + 2**64)  # in the next /64
    assert assign_ipv6(dual_stack, eni, outside)[:2] == (400, "InvalidParameterValue")
    refusal = dual_stack.model(
        "UnassignIpv6Addresses", {"NetworkInterfaceId": eni, "Ipv6Addresses.1": outside}
    )
    assert refusal is not None and refusal[:2] == (400, "InvalidParameterValue")


def test_a_subnet_without_ipv6_takes_no_ipv6_address(vpc: SimpleNamespace) -> None:
    eni = vpc.node("m5.large")
    refusal = assign_ipv6(vpc, eni, "2600:1f14::100")
    assert refusal is not None and refusal[:2] == (400, "InvalidParameterValue")
