"""SubnetCidrReservationProvider on a bare Stack: the reservation resource, its handler's
permissions, and the order that keeps the first deploy from racing IAM."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from cdk_constructs.subnet_cidr_reservation import (
    RESOURCE_TYPE,
    ReservationSpec,
    SubnetCidrReservationProvider,
)

SUBNET_ID = "subnet-0123456789abcdef0"


@pytest.fixture(scope="module")
def template() -> Template:
    stack = cdk.Stack(
        cdk.App(), "Bare", env=cdk.Environment(account="123456789012", region="us-west-2")
    )
    subnet = ec2.Subnet.from_subnet_attributes(
        stack, "Subnet", subnet_id=SUBNET_ID, availability_zone="us-west-2a"
    )
    provider = SubnetCidrReservationProvider(stack, "Reservations", subnets=[subnet])
    provider.reserve(
        "Multus1A", ReservationSpec(subnet, "10.0.4.32/27", "Whereabouts range", "explicit")
    )
    return Template.from_stack(stack)


def test_reservation_carries_the_spec(template: Template) -> None:
    template.resource_count_is(RESOURCE_TYPE, 1)
    template.has_resource_properties(
        RESOURCE_TYPE,
        {
            "SubnetId": SUBNET_ID,
            "Cidr": "10.0.4.32/27",
            "ReservationType": "explicit",
            "Description": "Whereabouts range",
            "ServiceToken": Match.any_value(),
        },
    )


def test_reservation_waits_for_the_handler_policy(template: Template) -> None:
    (policy_id,) = template.find_resources(
        "AWS::IAM::Policy",
        {"Properties": {"PolicyName": Match.string_like_regexp("ReservationsHandlerPolicy")}},
    )
    (reservation,) = template.find_resources(RESOURCE_TYPE).values()
    assert policy_id in reservation["DependsOn"]


def statements(template: Template) -> dict[str, dict[str, Any]]:
    """The statements with a Sid of every IAM policy (the handler's; CDK's framework has none)."""
    return {
        statement["Sid"]: statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "Sid" in statement
    }


def test_create_is_limited_to_the_given_subnets(template: Template) -> None:
    create = statements(template)["ReserveInMultusSubnets"]
    assert create["Action"] == "ec2:CreateSubnetCidrReservation"
    subnet_arn = [
        "arn:",
        {"Ref": "AWS::Partition"},
        f":ec2:us-west-2:123456789012:subnet/{SUBNET_ID}",
    ]
    assert create["Resource"] == {"Fn::Join": ["", subnet_arn]}


def test_read_and_release_are_limited_to_the_stacks_region(template: Template) -> None:
    # Get/Delete have no resource-level permissions: "*" with a region condition is the bound.
    release = statements(template)["ReadAndReleaseReservationsInRegion"]
    assert sorted(release["Action"]) == [
        "ec2:DeleteSubnetCidrReservation",
        "ec2:GetSubnetCidrReservations",
    ]
    assert release["Resource"] == "*"
    assert release["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


def test_handler_runs_a_pinned_python_runtime_from_the_repo(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "index.on_event", "Runtime": "python3.14"}
    )
