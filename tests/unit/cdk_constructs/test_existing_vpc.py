"""ExistingVpc on a bare stack: the team's VPC and subnets are imported by attributes (no
lookup, no resource, no tag), each Multus subnet is created with its own route table and, for
nat_egress networks only, a default route to its AZ's given NAT gateway."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from cdk_constructs.existing_vpc import ExistingVpc, ExistingVpcProps, GivenSubnet
from cdk_constructs.multus_vpc import MultusNetworkLayout
from tests.helpers import bare_stack, resources

AZS = ["us-west-2a", "us-west-2b"]
VPC_ID = "vpc-0123456789abcdef0"
NODES = [
    GivenSubnet("subnet-0123456789abcdef1", "10.0.2.0/24"),
    GivenSubnet("subnet-0123456789abcdef2", "10.0.3.0/24"),
]
NATS = ["nat-0123456789abcdef1", "nat-0123456789abcdef2"]
DATA = MultusNetworkLayout(
    name="data", subnet_cidrs=["100.64.4.0/24", "100.64.5.0/24"], nat_egress=False
)
EGRESS = MultusNetworkLayout(
    name="egress", subnet_cidrs=["10.0.6.0/24", "10.0.7.0/24"], nat_egress=True
)


def synthesized(
    networks: list[MultusNetworkLayout], nat_gateway_ids: list[str]
) -> tuple[ExistingVpc, dict[str, Any]]:
    stack = bare_stack()
    vpc = ExistingVpc(
        stack,
        "Network",
        ExistingVpcProps(
            name_prefix="bare",
            availability_zones=AZS,
            vpc_id=VPC_ID,
            cidrs=["10.0.0.0/16", "100.64.0.0/16"],
            node_subnets=NODES,
            public_subnets=[],
            nat_gateway_ids=nat_gateway_ids,
            multus_networks=networks,
        ),
    )
    template = dict(Template.from_stack(stack).to_json())
    return vpc, template


def test_the_teams_vpc_and_node_subnets_are_imported_as_given() -> None:
    """aws-cdk-lib aws_ec2 Vpc.fromVpcAttributes: an IVpc from given attributes, without the
    context lookup Vpc.fromLookup needs (so synth needs no account)."""
    vpc, template = synthesized([EGRESS], NATS)
    assert vpc.vpc.vpc_id == VPC_ID
    assert [(s.subnet_id, s.availability_zone) for s in vpc.node_subnets] == [
        (NODES[0].subnet_id, "us-west-2a"),
        (NODES[1].subnet_id, "us-west-2b"),
    ]
    assert [s.ipv4_cidr_block for s in vpc.node_subnets] == [s.cidr for s in NODES]
    assert vpc.public_subnets == []
    assert resources(template, "AWS::EC2::VPC", "AWS::EC2::NatGateway", "AWS::EC2::FlowLog") == {}


def test_multus_subnets_are_subnets_with_their_own_route_tables_in_the_given_vpc() -> None:
    vpc, template = synthesized([DATA, EGRESS], NATS)
    subnets = vpc.multus_subnets("data") + vpc.multus_subnets("egress")
    # ec2.Subnet: routes can be added to each (add_route) and each has its own route table.
    assert all(isinstance(subnet, ec2.Subnet) for subnet in subnets)
    assert len({subnet.route_table.route_table_id for subnet in subnets}) == 4
    created = sorted(
        (
            s["Properties"]["AvailabilityZone"],
            s["Properties"]["CidrBlock"],
            s["Properties"]["VpcId"],
        )
        for s in resources(template, "AWS::EC2::Subnet").values()
    )
    assert created == [
        ("us-west-2a", "10.0.6.0/24", VPC_ID),
        ("us-west-2a", "100.64.4.0/24", VPC_ID),
        ("us-west-2b", "10.0.7.0/24", VPC_ID),
        ("us-west-2b", "100.64.5.0/24", VPC_ID),
    ]


def test_only_nat_egress_networks_get_a_default_route_to_their_azs_nat_gateway() -> None:
    vpc, template = synthesized([DATA, EGRESS], NATS)
    table_zone = {
        cdk.Stack.of(subnet).resolve(subnet.route_table.route_table_id)["Ref"]: (
            subnet.availability_zone
        )
        for subnet in vpc.multus_subnets("egress")
    }
    routes = [r["Properties"] for r in resources(template, "AWS::EC2::Route").values()]
    assert sorted(
        (table_zone[r["RouteTableId"]["Ref"]], r["DestinationCidrBlock"], r["NatGatewayId"])
        for r in routes
    ) == [("us-west-2a", "0.0.0.0/0", NATS[0]), ("us-west-2b", "0.0.0.0/0", NATS[1])]


def test_without_nat_gateways_no_route_is_made() -> None:
    _, template = synthesized([DATA], [])
    assert resources(template, "AWS::EC2::Route") == {}
