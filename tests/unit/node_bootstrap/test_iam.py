from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from node_bootstrap import CLUSTER_TAG_KEY
from node_bootstrap.iam import multus_eni_policy_statements

SUBNET_ARNS = [
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus1a",
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus2a",
]
GROUP_ARNS = ["arn:aws:ec2:us-west-2:111122223333:security-group/sg-multus"]
ENI_ACTIONS = {
    "ec2:AttachNetworkInterface",
    "ec2:DetachNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:DeleteNetworkInterface",
}


@pytest.fixture(scope="module")
def statements() -> list[dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "NodeRole", env=cdk.Environment(region="us-west-2"))
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    for statement in multus_eni_policy_statements(
        cluster_name="telco-cluster", subnet_arns=SUBNET_ARNS, security_group_arns=GROUP_ARNS
    ):
        role.add_to_policy(statement)
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    (policy,) = policies.values()
    return list(policy["Properties"]["PolicyDocument"]["Statement"])


def actions_of(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def resources_of(statement: dict[str, Any]) -> list[Any]:
    resources = statement["Resource"]
    return resources if isinstance(resources, list) else [resources]


def granting(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [statement for statement in statements if action in actions_of(statement)]


def arn_suffix(resource: Any) -> str:
    """The literal tail of an ARN that CDK rendered as Fn::Join with pseudo parameters."""
    return resource if isinstance(resource, str) else str(resource["Fn::Join"][1][-1])


def test_enis_are_created_only_in_multus_subnets_with_multus_security_groups(
    statements: list[dict[str, Any]],
) -> None:
    creates = granting(statements, "ec2:CreateNetworkInterface")
    subnet_and_group = [s for s in creates if "subnet/" in str(s["Resource"])]
    (statement,) = subnet_and_group
    assert sorted(resources_of(statement)) == sorted(SUBNET_ARNS + GROUP_ARNS)


def test_created_enis_must_carry_the_cluster_tag(statements: list[dict[str, Any]]) -> None:
    (statement,) = [
        s
        for s in granting(statements, "ec2:CreateNetworkInterface")
        if arn_suffix(resources_of(s)[0]) == ":network-interface/*"
    ]
    assert statement["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{CLUSTER_TAG_KEY}": "telco-cluster"}
    }


def test_tags_can_only_be_written_while_creating_a_cluster_eni(
    statements: list[dict[str, Any]],
) -> None:
    (statement,) = granting(statements, "ec2:CreateTags")
    assert [arn_suffix(r) for r in resources_of(statement)] == [":network-interface/*"]
    assert statement["Condition"]["StringEquals"] == {
        "ec2:CreateAction": "CreateNetworkInterface",
        f"aws:RequestTag/{CLUSTER_TAG_KEY}": "telco-cluster",
    }


def test_eni_lifecycle_actions_require_cluster_tag_on_eni_and_instance(
    statements: list[dict[str, Any]],
) -> None:
    cluster_tagged = {"StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG_KEY}": "telco-cluster"}}
    for action in ENI_ACTIONS:
        for statement in granting(statements, action):
            assert statement["Condition"] == cluster_tagged, action
            suffixes = {arn_suffix(r) for r in resources_of(statement)}
            assert suffixes <= {":network-interface/*", ":instance/*"}, action
    attach_targets = {
        arn_suffix(r)
        for s in granting(statements, "ec2:AttachNetworkInterface")
        for r in resources_of(s)
    }
    assert attach_targets == {":network-interface/*", ":instance/*"}


def test_only_describe_is_granted_on_every_resource(statements: list[dict[str, Any]]) -> None:
    unscoped = [s for s in statements if "*" in resources_of(s)]
    assert [actions_of(s) for s in unscoped] == [{"ec2:DescribeNetworkInterfaces"}]
    assert all("*" not in action for s in statements for action in actions_of(s))


def test_missing_subnets_or_security_groups_are_rejected() -> None:
    with pytest.raises(ValueError, match="subnet_arns"):
        multus_eni_policy_statements(
            cluster_name="c", subnet_arns=[], security_group_arns=GROUP_ARNS
        )
    with pytest.raises(ValueError, match="security_group_arns"):
        multus_eni_policy_statements(
            cluster_name="c", subnet_arns=SUBNET_ARNS, security_group_arns=[]
        )
