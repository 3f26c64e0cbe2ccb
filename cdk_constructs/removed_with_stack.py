"""Aspect: what a stack creates goes with it, so `cdk destroy` leaves nothing that costs money.

- Log groups and KMS keys default to RETAIN in CDK; here they are deleted with their stack (KMS
  keys after the shortest waiting period AWS allows, 7 days, during which they can be restored).
- A Lambda function without an explicit log group writes to /aws/lambda/<name>, which Lambda
  creates outside CloudFormation, keeps forever and leaves behind. Each such function (aws-cdk-lib's
  own handlers and providers included) gets a log group of its stack with a retention.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

LAMBDA_LOG_RETENTION = logs.RetentionDays.ONE_MONTH
KMS_PENDING_WINDOW_DAYS = 7


@jsii.implements(IAspect)
class RemovedWithStack:
    """Visit a Stage or Stack: its log groups, KMS keys and Lambda logs are deleted with it."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup):
            node.apply_removal_policy(RemovalPolicy.DESTROY)
        elif isinstance(node, kms.CfnKey):
            node.apply_removal_policy(RemovalPolicy.DESTROY)
            node.pending_window_in_days = KMS_PENDING_WINDOW_DAYS
        elif isinstance(node, lambda_.CfnFunction):
            if not _names_log_group(Stack.of(node).resolve(node.logging_config)):
                _give_log_group(node)
        elif isinstance(node, CfnResource) and node.cfn_resource_type == "AWS::Lambda::Function":
            # aws-cdk-lib's CustomResourceProvider handlers are plain CfnResources that never
            # set a log group themselves.
            _give_log_group(node)


def _names_log_group(logging_config: object) -> bool:
    return isinstance(logging_config, dict) and bool(
        logging_config.get("LogGroup") or logging_config.get("logGroup")
    )


def _give_log_group(function: CfnResource) -> None:
    scope = function.node.scope
    assert isinstance(scope, Construct)
    log_group = logs.LogGroup(
        scope,
        f"{function.node.id}Logs",
        retention=LAMBDA_LOG_RETENTION,
        removal_policy=RemovalPolicy.DESTROY,
    )
    function.add_property_override("LoggingConfig.LogGroup", log_group.log_group_name)
