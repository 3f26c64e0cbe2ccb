"""The EC2 request model against the IAM service reference: every authorization it builds names
resources of a type the action takes ("*" only for actions without resource-level
permissions) and sets only condition keys IAM sets for that action."""

from __future__ import annotations

import pytest

from testing_support.ec2_iam_requests import (
    Caller,
    Ec2Call,
    Ec2State,
    EniPlacement,
    authorization_requests,
)
from testing_support.iam_reference import actions_matching

REGION = "us-west-2"
ENI, INSTANCE, SUBNET, VPC = "eni-0a1", "i-0b2", "subnet-0c3", "vpc-0d4"
STATE = Ec2State(
    eni_tags={ENI: {"multus-eni/cluster": "telco"}},
    eni_placement={ENI: EniPlacement(SUBNET, VPC, "us-west-2a")},
    eni_instance={ENI: INSTANCE},
    attachment_eni={"eni-attach-0e5": ENI},
    instance_tags={INSTANCE: {"eks:eks-cluster-name": "telco"}},
)
CALLS = {
    "CreateNetworkInterface": {
        "SubnetId": SUBNET,
        "SecurityGroupId.1": "sg-0f6",
        "TagSpecification.1.ResourceType": "network-interface",
        "TagSpecification.1.Tag.1.Key": "multus-eni/cluster",
        "TagSpecification.1.Tag.1.Value": "telco",
    },
    "AttachNetworkInterface": {"NetworkInterfaceId": ENI, "InstanceId": INSTANCE},
    "DetachNetworkInterface": {"AttachmentId": "eni-attach-0e5"},
    "ModifyNetworkInterfaceAttribute": {"NetworkInterfaceId": ENI},
    "DeleteNetworkInterface": {"NetworkInterfaceId": ENI},
    "AssignPrivateIpAddresses": {
        "NetworkInterfaceId": ENI,
        "PrivateIpAddress.1": "10.0.4.33",
        "AllowReassignment": "true",
    },
    "UnassignPrivateIpAddresses": {"NetworkInterfaceId": ENI, "PrivateIpAddress.1": "10.0.4.33"},
    "DescribeNetworkInterfaces": {"NetworkInterfaceId.1": ENI},
    "DescribeInstanceTypes": {"InstanceType.1": "m5.large"},
    "CreateSubnetCidrReservation": {"SubnetId": SUBNET},
    "GetSubnetCidrReservations": {},
    "DeleteSubnetCidrReservation": {},
}


@pytest.mark.parametrize("action", sorted(CALLS))
def test_requests_use_the_resource_types_and_keys_the_reference_lists(action: str) -> None:
    requests = authorization_requests(
        Ec2Call(action, CALLS[action], STATE), Caller(REGION, INSTANCE)
    )
    assert requests
    for request in requests:
        (reference,) = actions_matching(request.action)
        arns = [resource.arn for resource in request.resources]
        if reference.has_resource_level_permissions:
            assert all(reference.resource_types_of(arn) for arn in arns), arns
        else:
            assert arns == ["*"]
        keys = {*request.context, *(k for r in request.resources for k in r.context)}
        assert [k for k in keys if not reference.supports_condition_key(k)] == []


def test_pod_ip_calls_carry_the_enis_subnet_vpc_zone_and_tags() -> None:
    for action in ("AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"):
        (request,) = authorization_requests(
            Ec2Call(action, CALLS[action], STATE), Caller(REGION, INSTANCE)
        )
        (eni,) = request.resources
        assert eni.arn == f"arn:aws:ec2:{REGION}:123456789012:network-interface/{ENI}"
        assert eni.context["ec2:Subnet"] == f"arn:aws:ec2:{REGION}:123456789012:subnet/{SUBNET}"
        assert eni.context["ec2:Vpc"] == f"arn:aws:ec2:{REGION}:123456789012:vpc/{VPC}"
        assert eni.context["ec2:AvailabilityZone"] == "us-west-2a"
        assert eni.context["ec2:ResourceTag/multus-eni/cluster"] == "telco"
        assert request.context["aws:RequestedRegion"] == REGION


def test_an_eni_ec2_does_not_know_has_no_subnet_to_match() -> None:
    (request,) = authorization_requests(
        Ec2Call("AssignPrivateIpAddresses", {"NetworkInterfaceId": "eni-0gone"}, STATE),
        Caller(REGION, INSTANCE),
    )
    assert "ec2:Subnet" not in request.resources[0].context


def test_an_unmodelled_action_is_refused() -> None:
    with pytest.raises(ValueError, match="no IAM model for ec2:RunInstances"):
        authorization_requests(Ec2Call("RunInstances", {}), Caller(REGION))
