"""Spell values the way cdk-nag spells them in finding IDs, to acknowledge exactly one finding.

cdk-nag names a finding after the offending value as it appears in the template: a Ref becomes
<Name>, a GetAtt <LogicalId.Attribute>, an Fn::Join the concatenation of its parts, and any
other intrinsic its compact JSON. Deriving IDs from the same values the constructs use keeps an
acknowledgment tied to the statement or policy it is about, in every region and account.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

#: CDK's Lambda and Provider constructs attach this managed policy to every function's role.
LAMBDA_BASIC_EXECUTION_FINDING = (
    "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
    "service-role/AWSLambdaBasicExecutionRole]"
)


def any_version_finding(scope: IConstruct, function: lambda_.IFunction) -> str:
    """The IAM5 finding on a Provider framework's right to invoke any version (<arn>:*)."""
    return (
        f"AwsSolutions::AwsSolutions-IAM5[Resource::{finding_text(scope, function.function_arn)}:*]"
    )


def finding_text(scope: IConstruct, value: Any) -> str:
    return _render(Stack.of(scope).resolve(value))


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
        if function == "Fn::Join":
            separator, parts = argument
            return str(separator).join(_render(part) for part in parts)
    return json.dumps(value, separators=(",", ":"))
