"""What counts as using a VPC's IPv6 block, and a user that does not wait for it."""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.ipv6_block_users import users_not_waiting, uses_ipv6


@pytest.mark.parametrize(
    ("properties", "uses"),
    [
        ({"DestinationIpv6CidrBlock": "::/0"}, True),
        ({"Ipv6CidrBlock": {"Fn::Select": [0, {"Fn::GetAtt": ["Vpc", "Ipv6CidrBlocks"]}]}}, True),
        ({"SecurityGroupIngress": [{"CidrIpv6": "2600:1f14::/56"}]}, True),
        ({"Ipv6PodRange": {"SubnetCidr": "x"}}, True),
        ({"AssignIpv6AddressOnCreation": False, "CidrBlock": "10.0.0.0/24"}, False),
        ({"ManagedPolicyArns": ["arn:aws:iam::aws:policy/service-role/X"]}, False),
        ({"Arn": {"Fn::GetAtt": ["Role", "Arn"]}}, False),
    ],
)
def test_what_uses_ipv6(properties: dict[str, Any], uses: bool) -> None:
    assert uses_ipv6(properties) is uses


def test_a_route_that_does_not_wait_for_the_block_is_reported() -> None:
    resources: dict[str, Any] = {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {}},
        "Block": {
            "Type": "AWS::EC2::VPCCidrBlock",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "AmazonProvidedIpv6CidrBlock": True},
        },
        "Route": {"Type": "AWS::EC2::Route", "Properties": {"DestinationIpv6CidrBlock": "::/0"}},
        "Subnet": {
            "Type": "AWS::EC2::Subnet",
            "DependsOn": ["Block"],
            "Properties": {"Ipv6CidrBlock": "2600:1f14:1:2::/64"},
        },
    }
    assert users_not_waiting({"Resources": resources}) == {"Block": ["Route"]}
    resources["Route"]["DependsOn"] = "Block"
    assert users_not_waiting({"Resources": resources}) == {}
