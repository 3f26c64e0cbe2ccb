"""Aspect that records, in the template itself, the few cfn-lint findings we accept.

Each entry is a finding on CDK-generated wiring that changes nothing at deploy time and that
CDK offers no switch to avoid; the ignore sits on the resource type it concerns, so anyone who
lints cdk.out sees the same clean result, and every other rule stays active.
"""

from __future__ import annotations

import jsii
from aws_cdk import Acknowledgment, CfnResource, IAspect, Validations
from constructs import IConstruct

_REDUNDANT_DEPENDS_ON = (
    "CDK adds a DependsOn on the role next to the GetAtt that already implies it (ordering the "
    "role's default policy first); harmless, and CDK has no switch to drop it."
)

# resource type -> cfn-lint rule -> why it is accepted there
ACCEPTED_FINDINGS: dict[str, dict[str, str]] = {
    "AWS::Lambda::Function": {"W3005": _REDUNDANT_DEPENDS_ON},
    # custom_resources.Provider's waiter state machine and its role.
    "AWS::StepFunctions::StateMachine": {"W3005": _REDUNDANT_DEPENDS_ON},
    "AWS::CodePipeline::Pipeline": {
        "W3005": _REDUNDANT_DEPENDS_ON,
        "E3703": "CDK Pipelines builds the cross-account deploy role ARNs of its actions with "
        "Fn::Join, which CodePipeline resolves; cfn-lint's action schema only accepts Fn::Sub.",
    },
}


@jsii.implements(IAspect)
class RecordAcceptedLintFindings:
    """Writes each accepted cfn-lint rule into the resource's template metadata (for anyone
    linting cdk.out) and acknowledges it with its reason (for the validation report)."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and node.cfn_resource_type in ACCEPTED_FINDINGS:
            accepted = ACCEPTED_FINDINGS[node.cfn_resource_type]
            node.add_metadata("cfn-lint", {"config": {"ignore_checks": list(accepted)}})
            Validations.of(node).acknowledge(
                *(
                    Acknowledgment(id=f"CloudFormation-Validate::{rule}", reason=reason)
                    for rule, reason in accepted.items()
                )
            )
