"""nag_findings spells template values the way cdk-nag names findings: Ref -> <Name>,
GetAtt -> <LogicalId.Attribute>, Fn::Join -> its parts joined, anything else compact JSON."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from cdk_constructs.nag_findings import any_version_finding, finding_text


@pytest.fixture(scope="module")
def stack() -> cdk.Stack:
    return cdk.Stack(
        cdk.App(), "Bare", env=cdk.Environment(account="111111111111", region="us-west-2")
    )


def test_plain_text_is_kept(stack: cdk.Stack) -> None:
    assert finding_text(stack, "arn:aws:s3:::bucket/*") == "arn:aws:s3:::bucket/*"


def test_ref_is_named_in_angle_brackets(stack: cdk.Stack) -> None:
    assert finding_text(stack, cdk.Aws.PARTITION) == "<AWS::Partition>"


def test_get_att_is_logical_id_dot_attribute(stack: cdk.Stack) -> None:
    assert finding_text(stack, cdk.Fn.get_att("MyRole", "Arn").to_string()) == "<MyRole.Arn>"


def test_join_concatenates_its_rendered_parts(stack: cdk.Stack) -> None:
    value = cdk.Fn.join(":", ["arn", cdk.Aws.PARTITION, "sqs", cdk.Aws.REGION])
    assert finding_text(stack, value) == "arn:<AWS::Partition>:sqs:<AWS::Region>"


def test_other_intrinsics_are_compact_json(stack: cdk.Stack) -> None:
    value = cdk.Fn.select(0, cdk.Fn.get_azs())
    assert finding_text(stack, value) == '{"Fn::Select":[0,{"Fn::GetAZs":""}]}'


def test_any_version_finding_names_the_function_arn_with_wildcard(stack: cdk.Stack) -> None:
    function = lambda_.Function(
        stack,
        "Handler",
        runtime=lambda_.Runtime.PYTHON_3_12,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
    )
    cfn_function = function.node.default_child
    assert isinstance(cfn_function, cdk.CfnResource)
    logical_id = stack.get_logical_id(cfn_function)
    assert any_version_finding(stack, function) == (
        f"AwsSolutions::AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]"
    )
