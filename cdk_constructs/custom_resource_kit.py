"""What our three custom resources (CIDR reservations, AMI release check, teardown) share: a
Python handler with a log group of its stack, the Provider framework in front of it, the
ServiceTimeout CloudFormation waits for its answer, and the cdk-nag findings every Provider
brings.

Every construct is created in the caller's scope under the caller's ID, so the logical IDs are
the caller's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Acknowledgment, CustomResource, Duration, RemovalPolicy, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IConstruct

from cdk_constructs.nag_findings import LAMBDA_BASIC_EXECUTION_FINDING, any_version_finding
from config.custom_resource_timing import framework_answer_seconds

HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14
LAMBDA_VPC_ACCESS_FINDING = (
    "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
    "service-role/AWSLambdaVPCAccessExecutionRole]"
)


@dataclass(frozen=True)
class VpcPlacement:
    """Where a handler that must reach something inside the VPC runs."""

    vpc: ec2.IVpc
    subnets: Sequence[ec2.ISubnet]
    security_group: ec2.ISecurityGroup


@dataclass(frozen=True)
class Waiter:
    """An asynchronous Provider: the isComplete handler, how often and how long it is polled."""

    is_complete: lambda_.IFunction
    query_interval: Duration
    total_timeout: Duration


def log_group(scope: Construct, construct_id: str) -> logs.LogGroup:
    """A log group for handlers and their framework, deleted with the stack; its retention is
    the configured function log retention (RemovedWithStack)."""
    return logs.LogGroup(scope, construct_id, removal_policy=RemovalPolicy.DESTROY)


def handler_function(
    scope: Construct,
    construct_id: str,
    *,
    code: Path,
    handler: str,
    timeout: Duration,
    description: str,
    logs_to: logs.ILogGroup,
    placement: VpcPlacement | None = None,
) -> lambda_.Function:
    return lambda_.Function(
        scope,
        construct_id,
        runtime=HANDLER_RUNTIME,
        handler=handler,
        code=lambda_.Code.from_asset(str(code)),
        timeout=timeout,
        description=description,
        log_group=logs_to,
        vpc=placement.vpc if placement else None,
        vpc_subnets=ec2.SubnetSelection(subnets=list(placement.subnets)) if placement else None,
        security_groups=[placement.security_group] if placement else None,
    )


def provider(
    scope: Construct,
    *,
    on_event: lambda_.IFunction,
    logs_to: logs.ILogGroup,
    waiter: Waiter | None = None,
) -> cr.Provider:
    """The Provider framework (construct ID "Provider"), logging to `logs_to`; its own functions
    run outside the VPC: they only call Lambda, Step Functions and CloudFormation's response URL.
    """
    return cr.Provider(
        scope,
        "Provider",
        on_event_handler=on_event,
        is_complete_handler=waiter.is_complete if waiter else None,
        query_interval=waiter.query_interval if waiter else None,
        total_timeout=waiter.total_timeout if waiter else None,
        log_group=logs_to,
    )


def checked_at_deploy(
    scope: Construct,
    *,
    code: Path,
    description: str,
    statements: Sequence[iam.PolicyStatement],
    resource_type: str,
    properties: Mapping[str, str],
) -> CustomResource:
    """A deploy-time check: one synchronous handler (index.on_event, 30 s, "Handler" with
    "HandlerLogs"), the Provider ("Provider", "ProviderLogs"), and the custom resource
    ("Check") that holds them all and fails the deploy when the handler raises."""
    handler = handler_function(
        scope,
        "Handler",
        code=code,
        handler="index.on_event",
        timeout=Duration.seconds(30),
        description=description,
        logs_to=log_group(scope, "HandlerLogs"),
    )
    for statement in statements:
        handler.add_to_role_policy(statement)
    check_provider = provider(scope, on_event=handler, logs_to=log_group(scope, "ProviderLogs"))
    resource = CustomResource(
        scope,
        "Check",
        service_token=check_provider.service_token,
        resource_type=resource_type,
        service_timeout=synchronous_service_timeout(handler),
        properties=dict(properties),
    )
    hold_provider(resource, check_provider)
    acknowledge_provider_findings(scope, check_provider)
    return resource


def hold_provider(resource: CustomResource, provider: cr.Provider) -> None:
    """`resource` depends on every policy of its provider chain: those of the Provider's
    framework functions and waiter state machine, and of the user handlers. CloudFormation
    orders only what depends on what (cloudformation_order in testing_support), and nothing
    names a policy that add_to_role_policy attached as a resource of its own
    (@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy): without this, it may be created
    after the first request and deleted while the delete request still runs (aws/aws-cdk#9840).
    The functions, roles and state machine need no DependsOn: the ServiceToken names the
    framework function, and it names the rest (cfn-lint W3005 flags such a DependsOn)."""
    owners: list[IConstruct] = [provider, provider.on_event_handler]
    if provider.is_complete_handler is not None:
        owners.append(provider.is_complete_handler)
    policies = [c for owner in owners for c in owner.node.find_all() if isinstance(c, iam.Policy)]
    resource.node.add_dependency(*policies)


def synchronous_service_timeout(handler: lambda_.Function) -> Duration:
    """How long CloudFormation should wait for a Provider without isComplete: the framework's
    answer after one invocation of `handler` that runs into its timeout."""
    assert handler.timeout is not None
    return Duration.seconds(framework_answer_seconds(int(handler.timeout.to_seconds())))


def acknowledge_provider_findings(scope: Construct, provider: cr.Provider) -> None:
    """The cdk-nag findings on what the Provider framework and CDK's Lambda construct attach."""
    # The waiter state machine invokes these two (framework-onEvent is invoked by CloudFormation,
    # not through a policy of this stack).
    waiter_targets = [
        child
        for name in ("framework-isComplete", "framework-onTimeout")
        if isinstance(child := provider.node.try_find_child(name), lambda_.Function)
    ]
    invoked: list[lambda_.IFunction] = [provider.on_event_handler, *waiter_targets]
    if provider.is_complete_handler is not None:
        invoked.append(provider.is_complete_handler)
    acknowledgments = [
        Acknowledgment(
            id=LAMBDA_BASIC_EXECUTION_FINDING,
            reason="Lets the custom resource's handlers and its Provider framework write their "
            "own CloudWatch logs; CDK's Lambda and Provider constructs attach it.",
        ),
        *(
            Acknowledgment(
                id=any_version_finding(scope, function),
                reason="The Provider framework may invoke any version of its own handlers "
                "(<arn>:*) and no other function.",
            )
            for function in invoked
        ),
    ]
    if any(_in_vpc(function) for function in invoked):
        acknowledgments.append(
            Acknowledgment(
                id=LAMBDA_VPC_ACCESS_FINDING,
                reason="A handler placed in the VPC (to reach a private or CIDR-restricted API "
                "endpoint) creates and deletes its own ENIs there; CDK's Lambda construct "
                "attaches it.",
            )
        )
    if provider.is_complete_handler is not None:
        acknowledgments += [
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SF1",
                reason="The Provider's waiter state machine only re-invokes isComplete, which "
                "logs every decision and what is left to its own log group.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SF2",
                reason="A poll loop of one Lambda function; its logs say more than an X-Ray "
                "trace would.",
            ),
        ]
    Validations.of(scope).acknowledge(*acknowledgments)


def _in_vpc(function: lambda_.IFunction) -> bool:
    return isinstance(function, lambda_.Function) and function.is_bound_to_vpc
