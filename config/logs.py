"""The `logs` section: what the app's CloudWatch log groups keep, and what `cdk destroy` keeps.

The control-plane log group (API server, audit, authenticator...) and the VPC flow logs are an
incident's evidence: by default they outlive the stacks. Every log group keeps its events a year
by default, the least AWS Control Tower's proactive control CT.CLOUDWATCH.PR.2 accepts ("Require
an Amazon CloudWatch log group to be retained for at least one year").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from config.coercion import STRICT_SECTION

LogRetention = Literal[
    "ONE_WEEK", "TWO_WEEKS", "ONE_MONTH", "THREE_MONTHS", "SIX_MONTHS", "ONE_YEAR", "TWO_YEARS"
]
# RetentionInDays of AWS::Logs::LogGroup for each (aws-cdk-lib's logs.RetentionDays values).
RETENTION_DAYS: dict[str, int] = {
    "ONE_WEEK": 7,
    "TWO_WEEKS": 14,
    "ONE_MONTH": 30,
    "THREE_MONTHS": 90,
    "SIX_MONTHS": 180,
    "ONE_YEAR": 365,
    "TWO_YEARS": 731,
}


class LogsConfig(BaseModel):
    """Log groups of the app's Lambda functions and what destroy keeps."""

    model_config = STRICT_SECTION

    function_retention: LogRetention = Field(
        default="ONE_YEAR",
        description="How long the log groups of the app's Lambda functions (CIDR reservations, "
        "AMI release check, teardown, the kubectl handler, their Provider frameworks) keep "
        "their events. Below ONE_YEAR they fail AWS Control Tower's CT.CLOUDWATCH.PR.2.",
    )
    keep_audit_logs_on_destroy: bool = Field(
        default=True,
        description="Keep the control-plane log group (/aws/eks/<cluster>/cluster: API server, "
        "audit, authenticator) and the VPC flow logs when the stacks are destroyed, as an "
        "incident's evidence. A cluster of the same name deploys again only once the kept "
        "control-plane group is deleted (docs/operations.md). false: deleted with the stacks.",
    )
