"""KarpenterInterruptionQueue on a bare Stack: the queue and the rules Karpenter's own
CloudFormation (shared/reference/karpenter-v1.14.1) defines, nothing else."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.karpenter_interruption_queue import KarpenterInterruptionQueue

# Karpenter v1.14.1's cloudformation.yaml: (source, detail-type) of each interruption rule.
KARPENTER_EVENTS = [
    ("aws.health", "AWS Health Event"),
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("aws.ec2", "EC2 Instance State-change Notification"),
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
]


@pytest.fixture(scope="module")
def template() -> Template:
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="us-west-2"))
    KarpenterInterruptionQueue(stack, "Interruption")
    return Template.from_stack(stack)


def test_queue_is_encrypted_and_keeps_notices_five_minutes(template: Template) -> None:
    template.resource_count_is("AWS::SQS::Queue", 1)
    template.has_resource_properties(
        "AWS::SQS::Queue", {"MessageRetentionPeriod": 300, "SqsManagedSseEnabled": True}
    )


def test_queue_refuses_requests_without_tls(template: Template) -> None:
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "sqs:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_only_the_rules_may_send_to_the_queue(template: Template) -> None:
    policy = template.find_resources("AWS::SQS::QueuePolicy")
    (document,) = [r["Properties"]["PolicyDocument"] for r in policy.values()]
    allows = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    assert len(allows) == len(KARPENTER_EVENTS)
    for statement in allows:
        assert statement["Action"] == [
            "sqs:SendMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
        ]
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert "aws:SourceArn" in statement["Condition"]["ArnEquals"]


@pytest.mark.parametrize(("source", "detail_type"), KARPENTER_EVENTS)
def test_each_karpenter_event_reaches_the_queue(
    template: Template, source: str, detail_type: str
) -> None:
    (queue_id,) = template.find_resources("AWS::SQS::Queue")
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {"source": [source], "detail-type": [detail_type]},
            "State": "ENABLED",
            "Targets": [Match.object_like({"Arn": {"Fn::GetAtt": [queue_id, "Arn"]}})],
        },
    )


def test_no_rule_beyond_karpenters(template: Template) -> None:
    template.resource_count_is("AWS::Events::Rule", len(KARPENTER_EVENTS))
