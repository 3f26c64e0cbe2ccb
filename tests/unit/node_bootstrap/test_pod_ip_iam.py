from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from node_bootstrap.pod_ip_iam import multus_pod_ip_policy_statements
from node_bootstrap.renderer import OWNER_TAG_KEY

SUBNET_ARNS = [
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus1a",
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus2a",
]


@pytest.fixture(scope="module")
def statements() -> dict[str, dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "NodeRole", env=cdk.Environment(region="us-west-2"))
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    for statement in multus_pod_ip_policy_statements(
        cluster_name="telco-cluster", multus_subnet_arns=SUBNET_ARNS
    ):
        role.add_to_policy(statement)
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_addresses_change_only_on_this_clusters_enis_in_multus_subnets(
    statements: dict[str, dict[str, Any]],
) -> None:
    manage = statements["ManageMultusPodIpsOnClusterEnis"]
    assert sorted(manage["Action"]) == [
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ]
    assert manage["Effect"] == "Allow"
    assert str(manage["Resource"]["Fn::Join"][1][-1]).endswith(":network-interface/*")
    assert manage["Condition"] == {
        "StringEquals": {f"ec2:ResourceTag/{OWNER_TAG_KEY}": "telco-cluster"},
        "ArnEquals": {"ec2:Subnet": SUBNET_ARNS},
    }


def test_reads_only_instance_type_limits_in_the_region(
    statements: dict[str, dict[str, Any]],
) -> None:
    # DescribeNetworkInterfaces comes from the bootstrap's read statement in the same policy.
    read = statements["ReadInstanceTypeLimitsInRegion"]
    assert read["Action"] == "ec2:DescribeInstanceTypes"
    assert read["Resource"] == "*"
    assert read["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}
    assert set(statements) == {"ManageMultusPodIpsOnClusterEnis", "ReadInstanceTypeLimitsInRegion"}


def test_no_multus_subnets_is_an_error() -> None:
    with pytest.raises(ValueError, match="multus_subnet_arns"):
        multus_pod_ip_policy_statements(cluster_name="c", multus_subnet_arns=[])
