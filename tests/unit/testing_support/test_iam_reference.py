"""The IAM conformance checker catches each kind of mistake, and passes what AWS grants."""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.iam_reference import (
    TemplateResolver,
    UnresolvedIntrinsic,
    actions_matching,
    assembly_problems,
    check_statement,
    exported_values,
)

SUBNET = "arn:aws:ec2:us-west-2:123456789012:subnet/subnet-0abc"
ENIS = "arn:aws:ec2:us-west-2:123456789012:network-interface/*"


def problems(statement: dict[str, Any]) -> list[tuple[str, str]]:
    return list(check_statement({"Effect": "Allow", **statement}))


# --- each kind of mistake ----------------------------------------------------------------------


def test_action_without_resource_level_permissions_scoped_to_arns_is_caught() -> None:
    # The handler's original deploy blocker: Get and Delete only ever match "*".
    found = problems(
        {
            "Action": ["ec2:GetSubnetCidrReservations", "ec2:DeleteSubnetCidrReservation"],
            "Resource": [SUBNET],
        }
    )
    assert [action for action, _ in found] == [
        "ec2:GetSubnetCidrReservations",
        "ec2:DeleteSubnetCidrReservation",
    ]
    assert all("no resource-level permissions" in message for _, message in found)


def test_resources_of_no_type_the_action_takes_are_caught() -> None:
    (found,) = problems({"Action": "ec2:CreateSubnetCidrReservation", "Resource": ENIS})
    assert found[0] == "ec2:CreateSubnetCidrReservation"
    assert "accepts ['subnet']" in found[1]


def test_object_action_on_a_bucket_arn_is_caught() -> None:
    (found,) = problems({"Action": "s3:GetObject", "Resource": "arn:aws:s3:::artifacts"})
    assert "'object'" in found[1]
    assert "none of ['arn:aws:s3:::artifacts']" in found[1]


def test_unsupported_condition_key_is_caught() -> None:
    (found,) = problems(
        {
            "Action": "ec2:DeleteNetworkInterface",
            "Resource": ENIS,
            "Condition": {"StringEquals": {"ec2:CreateAction": "CreateNetworkInterface"}},
        }
    )
    assert found == (
        "ec2:DeleteNetworkInterface",
        "condition key ec2:CreateAction is not one IAM sets for this action",
    )


def test_request_tag_on_an_action_that_takes_no_tags_is_caught() -> None:
    # aws:RequestTag is global in name only: IAM sets it where the reference lists it.
    (found,) = problems(
        {
            "Action": "ec2:DescribeNetworkInterfaces",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestTag/team": "a"}},
        }
    )
    assert "aws:RequestTag/team" in found[1]


def test_wildcard_action_that_matches_nothing_usable_is_caught() -> None:
    queue = "arn:aws:sqs:us-west-2:123456789012:interruptions"
    (found,) = problems({"Action": "s3:Put*", "Resource": queue})
    assert found[0] == "s3:Put*"
    assert "none of the" in found[1]
    assert "actions it matches can be granted here" in found[1]


def test_unknown_action_is_caught() -> None:
    assert problems({"Action": "ec2:AttachNetworkInterfaces", "Resource": ENIS}) == [
        ("ec2:AttachNetworkInterfaces", "not an action in the IAM service reference")
    ]


def test_not_action_is_reported_as_unchecked() -> None:
    assert problems({"NotAction": "ec2:*", "Resource": "*"})[0][1].startswith("NotAction")


def test_unresolvable_intrinsic_is_a_problem_not_a_guess() -> None:
    template = {
        "Resources": {
            "Thing": {"Type": "AWS::Some::Unmodelled", "Properties": {}},
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "PolicyDocument": {
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": "sqs:SendMessage",
                                "Resource": {"Fn::GetAtt": ["Thing", "Arn"]},
                            }
                        ]
                    }
                },
            },
        }
    }
    (found,) = assembly_problems({"stack": template}, "us-west-2")
    assert "no ARN format for AWS::Some::Unmodelled" in found.message


# --- what AWS grants passes --------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        {"Action": "ec2:GetSubnetCidrReservations", "Resource": "*"},
        {"Action": "ec2:CreateSubnetCidrReservation", "Resource": SUBNET},
        {"Action": "ec2:CreateSubnetCidrReservation", "Resource": "arn:aws:ec2:*:*:*"},
        {
            "Action": "ec2:CreateNetworkInterface",
            "Resource": ENIS,
            "Condition": {"StringEquals": {"aws:RequestTag/multus-eni/cluster": "c"}},
        },
        {
            "Action": "ec2:AttachNetworkInterface",
            "Resource": "arn:aws:ec2:us-west-2:123456789012:instance/*",
            "Condition": {
                "ArnEquals": {
                    "ec2:SourceInstanceARN": "arn:aws:ec2:us-west-2:1:instance/${ec2:InstanceID}"
                }
            },
        },
        {"Action": "logs:PutLogEvents", "Resource": "arn:aws:logs:us-west-2:1:log-group:g:*"},
        {"Action": "s3:GetObject*", "Resource": "arn:aws:s3:::artifacts/*"},
        # CDK's grantRead: s3:List* is meant for ListBucket, the one List action on a bucket.
        {"Action": "s3:List*", "Resource": ["arn:aws:s3:::artifacts", "arn:aws:s3:::artifacts/*"]},
        {"Action": "ssm:GetParameter", "Resource": "arn:aws:ssm:us-west-2::parameter/aws/x"},
        {
            "Action": "iam:AddRoleToInstanceProfile",
            "Resource": "arn:aws:iam::1:instance-profile/*",
            "Condition": {"StringEquals": {"aws:ResourceTag/owner": "me"}},
        },
        {
            "Action": "ec2:DescribeNetworkInterfaces",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": "us-west-2"}},
        },
    ],
)
def test_statements_aws_grants_pass(statement: dict[str, Any]) -> None:
    assert problems(statement) == []


def test_wildcard_actions_expand_to_every_matching_action() -> None:
    names = {action.name for action in actions_matching("s3:GetObject*")}
    assert {"GetObject", "GetObjectVersion", "GetObjectTagging"} <= names
    assert "PutObject" not in names


def test_intrinsics_resolve_to_arns_of_the_referenced_types() -> None:
    template = {
        "Parameters": {"Env": {"Type": "String", "Default": "prod"}},
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Role": {"Type": "AWS::IAM::Role"},
        },
    }
    resolver = TemplateResolver(template, "ap-northeast-1", {"Network:SubnetId": "subnet-9"})
    assert resolver.resolve({"Fn::GetAtt": ["Queue", "Arn"]}) == (
        "arn:aws:sqs:ap-northeast-1:123456789012:queue"
    )
    assert resolver.resolve(
        {
            "Fn::Join": [
                "",
                [
                    "arn:",
                    {"Ref": "AWS::Partition"},
                    ":ec2:",
                    {"Ref": "AWS::Region"},
                    ":",
                    {"Ref": "AWS::AccountId"},
                    ":subnet/",
                    {"Fn::ImportValue": "Network:SubnetId"},
                ],
            ]
        }
    ) == ("arn:aws:ec2:ap-northeast-1:123456789012:subnet/subnet-9")
    assert resolver.resolve({"Fn::Sub": "${Role.Arn}-${Env}-${!Literal}"}) == (
        "arn:aws:iam::123456789012:role/role-prod-${Literal}"
    )


def test_stack_outputs_resolve_across_templates_and_unknown_functions_are_refused() -> None:
    network: dict[str, Any] = {
        "Resources": {"Subnet": {"Type": "AWS::EC2::Subnet"}},
        "Outputs": {"SubnetOut": {"Value": {"Ref": "Subnet"}}},
    }
    templates: dict[str, dict[str, Any]] = {
        "app-network": network,
        "app-cluster": {"Resources": {}},
    }
    exports = exported_values(templates, "us-west-2", {"Subnet": "subnet-0abc"})
    resolver = TemplateResolver(templates["app-cluster"], "us-west-2", exports)
    reference = {"Fn::GetStackOutput": {"StackName": "app-network", "OutputName": "SubnetOut"}}
    assert resolver.resolve(reference) == "subnet-0abc"
    with pytest.raises(UnresolvedIntrinsic, match="Fn::FindInMap"):
        resolver.resolve({"Fn::FindInMap": ["Map", "a", "b"]})
