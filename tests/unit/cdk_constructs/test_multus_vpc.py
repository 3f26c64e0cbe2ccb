"""MultusVpc on a bare Stack: one subnet per (group, AZ) with the configured CIDRs, the tags EKS
and Karpenter look for on node subnets, and none of them on Multus subnets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from cdk_constructs.multus_vpc import MultusNetworkLayout, MultusVpc, MultusVpcProps
from stacks.base import ConfiguredAzStack

AZS = ["us-west-2a", "us-west-2b"]
CLUSTER = "eks-bare"
PUBLIC = ["10.0.0.0/24", "10.0.1.0/24"]
NODES = ["10.0.2.0/24", "10.0.3.0/24"]
DATA = MultusNetworkLayout(
    name="data", subnet_cidrs=["10.0.4.0/24", "10.0.5.0/24"], nat_egress=False
)
EGRESS = MultusNetworkLayout(
    name="egress", subnet_cidrs=["10.0.6.0/24", "10.0.7.0/24"], nat_egress=True
)


@pytest.fixture(scope="module")
def template() -> Template:
    stack = ConfiguredAzStack(
        cdk.App(),
        "Bare",
        availability_zones=AZS,
        env=cdk.Environment(account="111111111111", region="us-west-2"),
    )
    MultusVpc(
        stack,
        "Network",
        MultusVpcProps(
            name_prefix="bare",
            cluster_name=CLUSTER,
            availability_zones=AZS,
            cidr="10.0.0.0/16",
            public_subnet_cidrs=PUBLIC,
            node_subnet_cidrs=NODES,
            multus_networks=[DATA, EGRESS],
            single_nat_gateway=False,
            flow_log_retention=logs.RetentionDays.ONE_MONTH,
            keep_flow_logs=True,
        ),
    )
    return Template.from_stack(stack)


def _subnet(template: Template, cidr: str) -> Mapping[str, Any]:
    (subnet,) = template.find_resources(
        "AWS::EC2::Subnet", {"Properties": {"CidrBlock": cidr}}
    ).values()
    return subnet


def _tags(subnet: Mapping[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in subnet["Properties"]["Tags"]}


def test_one_subnet_per_group_and_az_with_the_configured_cidr(template: Template) -> None:
    template.resource_count_is("AWS::EC2::Subnet", 4 * len(AZS))
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"})
    for cidrs in (PUBLIC, NODES, DATA.subnet_cidrs, EGRESS.subnet_cidrs):
        for az, cidr in zip(AZS, cidrs, strict=True):
            assert _subnet(template, cidr)["Properties"]["AvailabilityZone"] == az


def test_node_subnets_are_discoverable_by_karpenter_and_internal_elbs(template: Template) -> None:
    for cidr in NODES:
        tags = _tags(_subnet(template, cidr))
        assert tags["karpenter.sh/discovery"] == CLUSTER
        assert tags["kubernetes.io/role/internal-elb"] == "1"


def test_public_subnets_serve_internet_elbs_without_public_ips(template: Template) -> None:
    for cidr in PUBLIC:
        subnet = _subnet(template, cidr)
        assert _tags(subnet)["kubernetes.io/role/elb"] == "1"
        assert "karpenter.sh/discovery" not in _tags(subnet)
        assert subnet["Properties"]["MapPublicIpOnLaunch"] is False


def test_multus_subnets_are_not_discoverable_by_karpenter_nor_elbs(template: Template) -> None:
    for network in (DATA, EGRESS):
        for az, cidr in zip(AZS, network.subnet_cidrs, strict=True):
            tags = _tags(_subnet(template, cidr))
            assert (
                not {
                    "karpenter.sh/discovery",
                    "kubernetes.io/role/elb",
                    "kubernetes.io/role/internal-elb",
                }
                & tags.keys()
            )
            assert tags["Name"] == f"bare-{network.name}-{az}"


def _default_route_targets(template: Template, cidr: str) -> set[str]:
    subnet_id = next(
        key
        for key, subnet in template.find_resources("AWS::EC2::Subnet").items()
        if subnet["Properties"]["CidrBlock"] == cidr
    )
    associations = template.find_resources(
        "AWS::EC2::SubnetRouteTableAssociation",
        {"Properties": {"SubnetId": {"Ref": subnet_id}}},
    )
    (association,) = associations.values()
    table = association["Properties"]["RouteTableId"]
    routes = template.find_resources(
        "AWS::EC2::Route",
        {"Properties": {"RouteTableId": table, "DestinationCidrBlock": "0.0.0.0/0"}},
    )
    return {key for route in routes.values() for key in route["Properties"] if key.endswith("Id")}


def test_only_nat_egress_networks_route_to_a_nat_gateway(template: Template) -> None:
    for cidr in EGRESS.subnet_cidrs:
        assert "NatGatewayId" in _default_route_targets(template, cidr)
    for cidr in DATA.subnet_cidrs:
        assert _default_route_targets(template, cidr) == set()


def test_nat_gateway_per_az_and_flow_logs_kept_a_month(template: Template) -> None:
    template.resource_count_is("AWS::EC2::NatGateway", len(AZS))
    template.has_resource_properties(
        "AWS::EC2::FlowLog", {"ResourceType": "VPC", "TrafficType": "ALL"}
    )
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 30})


def test_default_security_group_is_restricted(template: Template) -> None:
    template.has_resource(
        "Custom::VpcRestrictDefaultSG", Match.object_like({"Properties": Match.any_value()})
    )
