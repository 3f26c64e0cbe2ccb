"""The VPC fabric model's routes to ENIs: a packet for a destination that a route of the
subnet's route table sends to an ENI is delivered to that ENI, if its source/dest check is off.

Sources: EC2 API reference, CreateRoute / ReplaceRoute (`NetworkInterfaceId`: the route's
target is an ENI); EC2 User Guide, "Source/destination checks" (an ENI with the check on takes
only traffic for addresses it holds); VPC User Guide, "Subnet route tables" (a subnet uses the
table associated with it, else the VPC's main table). DescribeRouteTables' answers are moto's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from testing_support.vpc_fabric import Frame, FrameKind, VpcFabric, fabric_from_ec2

# moto in process, as tests/unit/testing_support/test_vpc_fabric.py.
pytestmark = pytest.mark.integration

UE_POOL = "10.45.0.0/16"
UE = "10.45.0.7"
DATA_NETWORK_HOST = "198.18.0.10"


@pytest.fixture
def vpc() -> Iterator[SimpleNamespace]:
    """A Multus subnet with its own route table, ENI a (check on, 10.0.4.10) and ENI b (check
    off, 10.0.4.11); `route(eni)` points the UE pool at an ENI, as the pod IP agent does."""
    with mock_aws():
        ec2: Any = boto3.client("ec2", region_name="us-west-2")
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        multus = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"]
        table = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=table, SubnetId=multus)
        a, b = (
            ec2.create_network_interface(SubnetId=multus, PrivateIpAddress=address)[
                "NetworkInterface"
            ]
            for address in ("10.0.4.10", "10.0.4.11")
        )
        ec2.modify_network_interface_attribute(
            NetworkInterfaceId=b["NetworkInterfaceId"], SourceDestCheck={"Value": False}
        )

        def fabric() -> VpcFabric:
            return fabric_from_ec2(
                ec2.describe_network_interfaces(),
                ec2.describe_subnets(SubnetIds=[multus]),
                route_tables=ec2.describe_route_tables(
                    Filters=[{"Name": "vpc-id", "Values": [vpc_id]}]
                ),
            )

        def route(eni: dict[str, Any], cidr: str = UE_POOL, route_table: str = table) -> None:
            ec2.create_route(
                RouteTableId=route_table,
                DestinationCidrBlock=cidr,
                NetworkInterfaceId=eni["NetworkInterfaceId"],
            )

        yield SimpleNamespace(
            ec2=ec2, vpc_id=vpc_id, table=table, fabric=fabric, route=route, a=a, b=b
        )


def from_router(fabric: VpcFabric, eni: dict[str, Any], destination: str = UE) -> Frame:
    (subnet,) = fabric.subnets
    return Frame(
        FrameKind.IPV4, subnet.router_mac, eni["MacAddress"], DATA_NETWORK_HOST, destination
    )


def test_a_route_to_an_eni_delivers_its_range_to_that_eni_only(vpc: SimpleNamespace) -> None:
    assert not vpc.fabric().delivers(from_router(vpc.fabric(), vpc.b))  # no route yet
    vpc.route(vpc.b)

    fabric = vpc.fabric()
    assert fabric.delivers(from_router(fabric, vpc.b))
    assert fabric.delivers(from_router(fabric, vpc.b, "10.45.255.254"))
    assert not fabric.delivers(from_router(fabric, vpc.b, "10.46.0.7"))  # beyond the range
    assert not fabric.delivers(from_router(fabric, vpc.a))  # not the route's target
    # From an ENI of the subnet straight to the target, as well.
    a_to_b = Frame(FrameKind.IPV4, vpc.a["MacAddress"], vpc.b["MacAddress"], "10.0.4.10", UE)
    assert fabric.delivers(a_to_b)


def test_the_route_follows_replace_route(vpc: SimpleNamespace) -> None:
    """What the agent on the pod's new node does; a's check is off too here."""
    vpc.ec2.modify_network_interface_attribute(
        NetworkInterfaceId=vpc.a["NetworkInterfaceId"], SourceDestCheck={"Value": False}
    )
    vpc.route(vpc.a)
    assert vpc.fabric().delivers(from_router(vpc.fabric(), vpc.a))

    vpc.ec2.replace_route(
        RouteTableId=vpc.table,
        DestinationCidrBlock=UE_POOL,
        NetworkInterfaceId=vpc.b["NetworkInterfaceId"],
    )

    fabric = vpc.fabric()
    assert fabric.delivers(from_router(fabric, vpc.b))
    assert not fabric.delivers(from_router(fabric, vpc.a))


def test_a_target_with_the_source_dest_check_on_gets_nothing(vpc: SimpleNamespace) -> None:
    vpc.route(vpc.a)
    fabric = vpc.fabric()
    assert not fabric.delivers(from_router(fabric, vpc.a))
    (subnet,) = fabric.subnets
    assert subnet.delivered_routes == ()


def test_only_the_subnets_own_table_counts(vpc: SimpleNamespace) -> None:
    """The main table's route does not apply to a subnet with a table of its own."""
    (main,) = vpc.ec2.describe_route_tables(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc.vpc_id]},
            {"Name": "association.main", "Values": ["true"]},
        ]
    )["RouteTables"]
    vpc.route(vpc.b, route_table=main["RouteTableId"])
    assert not vpc.fabric().delivers(from_router(vpc.fabric(), vpc.b))


def test_the_ruleset_delivers_exactly_the_routed_range_to_the_target(
    vpc: SimpleNamespace,
) -> None:
    vpc.route(vpc.b)
    fabric = vpc.fabric()
    ruleset = fabric.nftables_ruleset()
    (subnet,) = fabric.subnets
    found = re.search(rf"\tset {subnet.chain}_routed {{\n(.*?)\n\t}}", ruleset, re.DOTALL)
    assert found
    assert f"elements = {{ {vpc.b['MacAddress']} . {UE_POOL} }}" in found.group(1)
    # Both the ENIs' chain and the router's accept what the set holds.
    assert ruleset.count(f"ether daddr . ip daddr @{subnet.chain}_routed accept") == 2


def test_overlapping_routes_to_enis_are_refused(vpc: SimpleNamespace) -> None:
    vpc.route(vpc.b)
    vpc.route(vpc.b, "10.45.1.0/24")
    with pytest.raises(ValueError, match=r"the ENI route to 10\.45\.1\.0/24 overlaps another"):
        vpc.fabric()
