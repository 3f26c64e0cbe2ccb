"""Aspect: what a stack creates goes with it, so `cdk destroy` leaves nothing that costs money,
but the evidence the config keeps (AuditLogGroup).

- Log groups and KMS keys default to RETAIN in CDK; here they are deleted with their stack (KMS
  keys after the shortest waiting period AWS allows, 7 days, during which they can be restored),
  and every log group but an AuditLogGroup keeps its events for the configured function log
  retention (config logs.function_retention).
- A Lambda function without an explicit log group writes to /aws/lambda/<name>, which Lambda
  creates outside CloudFormation, keeps forever and leaves behind. Each such function (aws-cdk-lib's
  own handlers and providers included) gets a log group of its stack with that retention.
- An AuditLogGroup (the control-plane logs, the VPC flow logs) keeps its own retention and
  removal policy: retained by default (config logs.keep_audit_logs_on_destroy), except when the
  deploy that created it rolls back (RetainExceptOnCreate).
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from config.logs import RETENTION_DAYS

KMS_PENDING_WINDOW_DAYS = 7


class AuditLogGroup(logs.LogGroup):
    """A log group of evidence: destroy keeps it when `keep_on_destroy`, and RemovedWithStack
    leaves its retention and removal policy as given.

    Kept means DeletionPolicy RetainExceptOnCreate (RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE),
    not Retain: a stack whose first deploy fails rolls back the group it just created, so the
    retry can create it again; with Retain the group of the fixed name /aws/eks/<cluster>/cluster
    would stay and the retry fail with "already exists" (CloudFormation user guide,
    DeletionPolicy attribute: RetainExceptOnCreate "retains the resource ... except if the
    resource was created in the same stack operation that is rolling back"). A group created by
    an earlier deploy is kept on delete as before."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention: logs.RetentionDays,
        keep_on_destroy: bool,
        log_group_name: str | None = None,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            log_group_name=log_group_name,
            retention=retention,
            removal_policy=RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
            if keep_on_destroy
            else RemovalPolicy.DESTROY,
        )


@jsii.implements(IAspect)
class RemovedWithStack:
    """Visit a Stage or Stack: its log groups (but audit ones), KMS keys and Lambda logs are
    deleted with it; function logs keep `function_log_retention`."""

    def __init__(self, function_log_retention: str) -> None:
        """function_log_retention: a name of logs.RetentionDays (config logs.function_retention)."""
        self._retention = logs.RetentionDays[function_log_retention]
        self._days = RETENTION_DAYS[function_log_retention]

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, logs.CfnLogGroup):
            if isinstance(node.node.scope, AuditLogGroup):
                return
            node.apply_removal_policy(RemovalPolicy.DESTROY)
            node.retention_in_days = self._days
        elif isinstance(node, kms.CfnKey):
            node.apply_removal_policy(RemovalPolicy.DESTROY)
            node.pending_window_in_days = KMS_PENDING_WINDOW_DAYS
        elif isinstance(node, lambda_.CfnFunction):
            if not _names_log_group(Stack.of(node).resolve(node.logging_config)):
                _give_log_group(node, self._retention)
        elif isinstance(node, CfnResource) and node.cfn_resource_type == "AWS::Lambda::Function":
            # aws-cdk-lib's CustomResourceProvider handlers are plain CfnResources that never
            # set a log group themselves.
            _give_log_group(node, self._retention)


def _names_log_group(logging_config: object) -> bool:
    return isinstance(logging_config, dict) and bool(
        logging_config.get("LogGroup") or logging_config.get("logGroup")
    )


def _give_log_group(function: CfnResource, retention: logs.RetentionDays) -> None:
    scope = function.node.scope
    assert isinstance(scope, Construct)
    log_group = logs.LogGroup(
        scope,
        f"{function.node.id}Logs",
        retention=retention,
        removal_policy=RemovalPolicy.DESTROY,
    )
    function.add_property_override("LoggingConfig.LogGroup", log_group.log_group_name)
