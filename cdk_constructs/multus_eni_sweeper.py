"""Deletes the Multus ENIs that outlive their node.

The node bootstrap creates each Multus ENI, attaches it, then sets DeleteOnTermination on the
attachment (node_bootstrap/multus_eni_bootstrap.sh). A node that dies in between (a Spot
interruption, a failed boot that powers off, an instance Karpenter gives up) leaves an
available ENI with the cluster's tags that nothing else deletes: the VPC CNI's leak sweeper
looks only at ENIs it created itself, and the teardown (cdk_constructs/karpenter_teardown.py)
runs only when the stack is destroyed. Such ENIs hold subnet addresses and count against the
Region's ENI quota.

Every SWEEP_MINUTES a function lists the cluster's available Multus ENIs and deletes those whose
instance is gone (multus_eni_sweeper_handler/index.py). Its role may delete only ENIs that carry
the cluster's owner tag, which the bootstrap sets at creation.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs import custom_resource_kit as kit
from cdk_constructs.nag_findings import LAMBDA_BASIC_EXECUTION_FINDING, finding_text
from node_bootstrap.renderer import INSTANCE_TAG_KEY, OWNER_TAG_KEY

HANDLER_DIR = Path(__file__).parent / "multus_eni_sweeper_handler"
# A leftover ENI costs an address of its subnet until the sweep: minutes do not matter, and a
# sweep at rest is two Describe calls.
SWEEP_MINUTES = 15
# Service Authorization Reference, Amazon EC2: neither Describe action has resource types.
DESCRIBE_ACTIONS = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeInstances"]


class MultusEniSweeper(Construct):
    """A scheduled function that deletes the cluster's Multus ENIs whose instance is gone."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.function = kit.handler_function(
            self,
            "Handler",
            code=HANDLER_DIR,
            handler="index.handler",
            timeout=Duration.minutes(2),
            description="Deletes the cluster's Multus ENIs whose instance is gone",
            logs_to=kit.log_group(self, "HandlerLogs"),
        )
        self.function.add_environment("CLUSTER_NAME", cluster_name)
        self.function.add_environment("OWNER_TAG_KEY", OWNER_TAG_KEY)
        self.function.add_environment("INSTANCE_TAG_KEY", INSTANCE_TAG_KEY)
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=DESCRIBE_ACTIONS,
                resources=["*"],
                conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
            )
        )
        any_eni = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ec2:DeleteNetworkInterface"],
                resources=[any_eni],
                conditions={"StringEquals": {f"aws:ResourceTag/{OWNER_TAG_KEY}": cluster_name}},
            )
        )
        events.Rule(
            self,
            "Schedule",
            description="Sweeps the cluster's leftover Multus ENIs",
            schedule=events.Schedule.rate(Duration.minutes(SWEEP_MINUTES)),
            # A failed sweep is the next one's to repeat.
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        Validations.of(self).acknowledge(
            Acknowledgment(
                id=LAMBDA_BASIC_EXECUTION_FINDING,
                reason="Lets the sweeper write its own CloudWatch logs; CDK's Lambda construct "
                "attaches it.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeNetworkInterfaces and ec2:DescribeInstances have no "
                "resource-level permissions; limited to this region.",
            ),
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{finding_text(self, any_eni)}]",
                reason="The leftover ENIs' IDs are not known at deploy time; "
                "DeleteNetworkInterface is limited to ENIs with the cluster's owner tag "
                "(aws:ResourceTag).",
            ),
        )
