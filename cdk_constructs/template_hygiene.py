"""Aspect that records, in the template itself, the few cfn-lint findings we accept.

Each entry is a finding on CDK-generated wiring that changes nothing at deploy time and that
CDK offers no switch to avoid; the ignore sits on the resource type it concerns, so anyone who
lints cdk.out sees the same clean result, and every other rule stays active.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

# resource type -> cfn-lint rules ignored on it
ACCEPTED_FINDINGS: dict[str, tuple[str, ...]] = {
    # W3005: CDK puts an explicit DependsOn on the execution role next to the GetAtt that
    # already implies it (it orders the role's default policy before first use).
    "AWS::Lambda::Function": ("W3005",),
    # W3005 as above, for custom_resources.Provider's waiter state machine and its role.
    "AWS::StepFunctions::StateMachine": ("W3005",),
    # W3005 as above, for the pipeline's service role. E3703: CDK Pipelines builds the
    # cross-account deploy role ARNs of its actions with Fn::Join; CodePipeline resolves them,
    # cfn-lint's action schema only prefers Fn::Sub.
    "AWS::CodePipeline::Pipeline": ("W3005", "E3703"),
}


@jsii.implements(IAspect)
class RecordAcceptedLintFindings:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and node.cfn_resource_type in ACCEPTED_FINDINGS:
            rules = list(ACCEPTED_FINDINGS[node.cfn_resource_type])
            node.add_metadata("cfn-lint", {"config": {"ignore_checks": rules}})
