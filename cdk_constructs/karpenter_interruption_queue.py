"""The SQS queue through which EventBridge tells Karpenter that a node is about to go away.

Karpenter drains a node ahead of a Spot reclaim, a rebalance recommendation, a scheduled
maintenance event, a capacity-reservation reclaim or an unexpected stop, instead of losing its
pods when the instance disappears.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# Karpenter ignores events older than this: a notice about a node that is long gone is noise.
MESSAGE_RETENTION = Duration.seconds(300)

# (construct id, event source, detail-type) of every event Karpenter acts on.
INTERRUPTION_EVENTS = [
    ("SpotInterruption", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    ("Rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"),
    ("InstanceStateChange", "aws.ec2", "EC2 Instance State-change Notification"),
    ("ScheduledChange", "aws.health", "AWS Health Event"),
    (
        "CapacityReservationInterruption",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
    ),
]


class KarpenterInterruptionQueue(Construct):
    """SSE-encrypted, TLS-only queue plus one EventBridge rule per interruption event type."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            retention_period=MESSAGE_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        Validations.of(self.queue).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SQS3",
                reason="Interruption notices are only useful within minutes (300 s retention); "
                "a dead-letter queue would keep stale notices that nothing reads.",
            )
        )
        # The target adds a queue-policy statement that lets only this rule send messages.
        self.rules = [
            events.Rule(
                self,
                f"{name}Rule",
                description=f"Karpenter interruption handling: {detail_type}",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type]),
                targets=[targets.SqsQueue(self.queue)],
            )
            for name, source, detail_type in INTERRUPTION_EVENTS
        ]
