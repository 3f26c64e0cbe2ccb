"""FixedSubnetCidrs on a bare Stack: ec2.Vpc gets the planned CIDRs, not carved ones."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from cdk_constructs.fixed_subnet_cidrs import FixedSubnetCidrs

ZONES = ["us-west-2a", "us-west-2b"]
# Deliberately not the order ec2.Vpc would carve /24s in (10.0.0.0, 10.0.1.0, ...).
PLANNED = {
    ("Public", "us-west-2a"): "10.0.9.0/24",
    ("Public", "us-west-2b"): "10.0.3.0/24",
    ("Nodes", "us-west-2a"): "10.0.64.0/20",
    ("Nodes", "us-west-2b"): "10.0.16.0/20",
}


def vpc_template(planned: dict[tuple[str, str], str]) -> Template:
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="us-west-2"))
    ec2.Vpc(
        stack,
        "Vpc",
        ip_addresses=FixedSubnetCidrs("10.0.0.0/16", planned),
        availability_zones=ZONES,
        nat_gateways=0,
        subnet_configuration=[
            ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC),
            ec2.SubnetConfiguration(name="Nodes", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        ],
    )
    return Template.from_stack(stack)


def test_every_subnet_gets_its_planned_cidr_in_its_zone() -> None:
    template = vpc_template(PLANNED)
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"})
    subnets = template.find_resources("AWS::EC2::Subnet").values()
    placed = {(r["Properties"]["CidrBlock"], r["Properties"]["AvailabilityZone"]) for r in subnets}
    assert placed == {(cidr, zone) for (_, zone), cidr in PLANNED.items()}


def test_a_subnet_without_a_plan_is_refused_with_its_group_and_zone() -> None:
    partial = {key: cidr for key, cidr in PLANNED.items() if key != ("Nodes", "us-west-2b")}
    with pytest.raises(Exception, match=r"no CIDR planned for subnet group 'Nodes' in us-west-2b"):
        vpc_template(partial)
