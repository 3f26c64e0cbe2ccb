"""AmiReleaseCheck on a bare Stack: the custom resource reads the one public SSM parameter
Karpenter resolves for the pinned alias, and nothing else."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.ami_release_check import RESOURCE_TYPE, AmiReleaseCheck, AmiReleaseCheckProps

# AWS publishes one parameter per AL2023 EKS AMI release, Kubernetes version and variant.
PARAMETER = (
    "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/"
    "amazon-eks-node-al2023-x86_64-standard-1.34-v20261112/image_id"
)


def bare_stack() -> cdk.Stack:
    return cdk.Stack(
        cdk.App(), "Bare", env=cdk.Environment(account="123456789012", region="us-west-2")
    )


@pytest.fixture(scope="module")
def template() -> Template:
    stack = bare_stack()
    props = AmiReleaseCheckProps("1.34", "al2023@v20261112", "node_pool.ami_alias")
    AmiReleaseCheck(stack, "AmiCheck", props)
    return Template.from_stack(stack)


def test_resource_names_the_parameter_and_the_config_key(template: Template) -> None:
    template.resource_count_is(RESOURCE_TYPE, 1)
    template.has_resource_properties(
        RESOURCE_TYPE,
        {
            "ParameterName": PARAMETER,
            "AmiAlias": "al2023@v20261112",
            "KubernetesVersion": "1.34",
            "ConfigField": "node_pool.ami_alias",
        },
    )


def test_handler_may_read_only_that_public_parameter(template: Template) -> None:
    # Public parameters belong to no account: the ARN has an empty account field.
    parameter_arn = ["arn:", {"Ref": "AWS::Partition"}, f":ssm:us-west-2::parameter{PARAMETER}"]
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": [
                    {
                        "Action": "ssm:GetParameter",
                        "Effect": "Allow",
                        "Resource": {"Fn::Join": ["", parameter_arn]},
                    }
                ]
            },
            "Roles": Match.any_value(),
        },
    )
    ssm_actions = [
        statement["Action"]
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ssm:" in str(statement["Action"])
    ]
    assert ssm_actions == ["ssm:GetParameter"]


@pytest.mark.parametrize("alias", ["al2023@latest", "al2023", "bottlerocket@v1.30.0"])
def test_an_unpinned_or_foreign_alias_is_refused_before_any_resource_is_built(alias: str) -> None:
    stack = bare_stack()
    with pytest.raises(ValueError, match="is not a pinned al2023@<release> alias"):
        AmiReleaseCheck(stack, "AmiCheck", AmiReleaseCheckProps("1.34", alias, "x"))
    (check,) = stack.node.children
    assert not check.node.children
