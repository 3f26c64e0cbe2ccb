"""A role's inline policies stay within IAM's 10,240 characters (IAM User Guide, "IAM and AWS STS
quotas": role policy size, whitespace not counted), checked at synth (issue #53: the node role's
Multus ENI policy grows with the Multus subnets and was not checked)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

import app as app_module
from cdk_constructs import iam_policy_size
from cdk_constructs.iam_policy_size import (
    ROLE_INLINE_POLICIES_LIMIT,
    check_role_inline_policies,
    deployed_characters,
    inline_policy_characters,
)
from config import ConfigError
from tests.conftest import SynthesizedApp, cdk_json_context


def test_tokens_count_at_their_longest_and_whitespace_not_at_all() -> None:
    document = {
        "Statement": [
            {
                "Effect": "Allow",
                "Resource": {
                    "Fn::Join": [
                        "",
                        ["arn:", {"Ref": "AWS::Partition"}, ":ec2:r:", {"Ref": "AWS::AccountId"}],
                    ]
                },
                "Action": "ec2:Describe Things",
            }
        ]
    }
    expected = json.dumps(
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Resource": "arn:aws-us-gov:ec2:r:123456789012",
                    "Action": "ec2:DescribeThings",
                }
            ]
        },
        separators=(",", ":"),
    )
    assert deployed_characters(document) == len(expected)
    # Another stack's subnet ID: the longest EC2 ID, subnet- and 17 hex digits.
    assert deployed_characters({"Fn::GetStackOutput": {"OutputName": "x"}}) == len(
        '"subnet-0123456789abcdef0"'
    )


def oversized_stack(statements: int) -> tuple[cdk.Stack, iam.Role]:
    stack = cdk.Stack(cdk.App(), "Sized")
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    iam.Policy(
        stack,
        "Big",
        roles=[role],
        statements=[
            iam.PolicyStatement(actions=["ec2:AssignPrivateIpAddresses"], resources=[f"arn:{n}"])
            for n in range(statements)
        ],
    )
    return stack, role


def test_inline_policies_past_the_limit_stop_synth_naming_them_and_the_fix() -> None:
    stack, role = oversized_stack(300)
    with pytest.raises(ConfigError) as refused:
        check_role_inline_policies(stack, role, "attach fewer networks")
    message = str(refused.value)
    assert "the inline policies of Sized/NodeRole take up to" in message
    assert "Sized/Big/Resource" in message
    assert f"more than the {ROLE_INLINE_POLICIES_LIMIT:,} IAM allows" in message
    assert message.endswith("attach fewer networks")


def test_inline_policies_within_the_limit_pass() -> None:
    stack, role = oversized_stack(10)
    check_role_inline_policies(stack, role, "")
    assert 0 < sum(inline_policy_characters(stack, role).values()) <= ROLE_INLINE_POLICIES_LIMIT


def test_the_node_roles_policies_of_the_default_app_fit(default_app: SynthesizedApp) -> None:
    cluster = default_app.stage.cluster
    sizes = inline_policy_characters(cluster, cluster.karpenter_node_role)
    assert [path.rsplit("/", 2)[-2] for path in sizes] == ["MultusEniPolicy"]
    assert 0 < sum(sizes.values()) <= ROLE_INLINE_POLICIES_LIMIT


def test_synth_stops_with_the_message_when_the_node_role_is_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cluster stack runs the check: with a limit the seed's policy exceeds, app.main stops
    # with the message and status 1, no traceback.
    monkeypatch.setattr(iam_policy_size, "ROLE_INLINE_POLICIES_LIMIT", 1000)
    context: dict[str, Any] = cdk_json_context()
    with pytest.raises(SystemExit) as exited:
        app_module.main(cdk.App(context=context, outdir=str(tmp_path)))
    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert "the inline policies of karpenterwithmultus/Cluster/Karpenter/NodeRole" in err
    assert "MultusEniPolicy" in err and "attach fewer networks or AZs" in err
    assert "Traceback" not in err
