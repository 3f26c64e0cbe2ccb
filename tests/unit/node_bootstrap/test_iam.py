"""The node role's Multus ENI statements, as CDK renders them."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from node_bootstrap.iam import TARGET_INSTANCE_ID, multus_eni_policy_statements
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    FAILURE_TAG_KEY,
    INSTANCE_TAG_KEY,
    OWNER_TAG_KEY,
)

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


def test_owner_tag_is_not_the_tag_karpenter_puts_on_every_instance_and_primary_eni() -> None:
    assert OWNER_TAG_KEY != CLUSTER_TAG_KEY


def test_enis_are_created_only_in_multus_subnets_with_multus_security_groups(
    statements: list[dict[str, Any]],
) -> None:
    creates = granting(statements, "ec2:CreateNetworkInterface")
    subnet_and_group = [s for s in creates if "subnet/" in str(s["Resource"])]
    (statement,) = subnet_and_group
    assert sorted(resources_of(statement)) == sorted(SUBNET_ARNS + GROUP_ARNS)


def test_created_enis_must_carry_the_owner_tag(statements: list[dict[str, Any]]) -> None:
    (statement,) = [
        s
        for s in granting(statements, "ec2:CreateNetworkInterface")
        if arn_suffix(resources_of(s)[0]) == ":network-interface/*"
    ]
    assert statement["Condition"]["StringEquals"][f"aws:RequestTag/{OWNER_TAG_KEY}"] == (
        "telco-cluster"
    )
    assert caller_must_be(statement) == f"${{aws:RequestTag/{INSTANCE_TAG_KEY}}}"


def caller_must_be(statement: dict[str, Any]) -> str:
    """The instance ID the statement requires of the caller (StringEquals on
    ec2:SourceInstanceARN, so a `*` in the tag is no wildcard): a policy variable."""
    arn = arn_suffix(statement["Condition"]["StringEquals"]["ec2:SourceInstanceARN"])
    return arn.removeprefix(":instance/")


def test_eni_tags_can_only_be_written_while_creating_an_owned_eni(
    statements: list[dict[str, Any]],
) -> None:
    (statement,) = [
        s
        for s in granting(statements, "ec2:CreateTags")
        if [arn_suffix(r) for r in resources_of(s)] == [":network-interface/*"]
    ]
    conditions = statement["Condition"]["StringEquals"]
    assert conditions["ec2:CreateAction"] == "CreateNetworkInterface"
    assert conditions[f"aws:RequestTag/{OWNER_TAG_KEY}"] == "telco-cluster"
    assert caller_must_be(statement) == f"${{aws:RequestTag/{INSTANCE_TAG_KEY}}}"


def test_eni_side_of_every_later_action_requires_the_owner_tag(
    statements: list[dict[str, Any]],
) -> None:
    for action in ENI_ACTIONS:
        eni_side = [
            s
            for s in granting(statements, action)
            if {arn_suffix(r) for r in resources_of(s)} == {":network-interface/*"}
        ]
        (statement,) = eni_side
        assert statement["Condition"]["StringEquals"][f"aws:ResourceTag/{OWNER_TAG_KEY}"] == (
            "telco-cluster"
        ), action
        # only the node whose ID the ENI's tag carries (a node never touches another's ENIs)
        assert caller_must_be(statement) == f"${{aws:ResourceTag/{INSTANCE_TAG_KEY}}}", action


def test_instance_side_is_only_the_calling_instance(statements: list[dict[str, Any]]) -> None:
    instance_side = [
        s for s in statements if any(arn_suffix(r) == ":instance/*" for r in resources_of(s))
    ]
    assert sorted(sorted(actions_of(s)) for s in instance_side) == sorted(
        [sorted(ENI_ACTIONS - {"ec2:DeleteNetworkInterface"}), ["ec2:CreateTags"]]
    )
    for statement in instance_side:
        (condition,) = statement["Condition"]["ArnEquals"].items()
        key, arn = condition
        assert key == "ec2:SourceInstanceARN"
        assert arn_suffix(arn) == f":instance/{TARGET_INSTANCE_ID}"


def test_the_only_tag_an_instance_may_get_is_the_failure_tag(
    statements: list[dict[str, Any]],
) -> None:
    (statement,) = [
        s
        for s in granting(statements, "ec2:CreateTags")
        if [arn_suffix(r) for r in resources_of(s)] == [":instance/*"]
    ]
    conditions = {k: v for k, v in statement["Condition"].items() if k != "ArnEquals"}
    assert conditions == {
        "ForAllValues:StringEquals": {"aws:TagKeys": [FAILURE_TAG_KEY]},
        "Null": {f"aws:RequestTag/{FAILURE_TAG_KEY}": "false"},
    }


def test_only_describe_is_granted_on_every_resource_and_only_in_region(
    statements: list[dict[str, Any]],
) -> None:
    unscoped = [s for s in statements if "*" in resources_of(s)]
    assert [actions_of(s) for s in unscoped] == [{"ec2:DescribeNetworkInterfaces"}]
    assert unscoped[0]["Condition"] == {
        "StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}
    }
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
