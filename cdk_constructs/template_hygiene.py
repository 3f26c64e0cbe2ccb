"""Aspect that records, in the template itself, the one cfn-lint finding we accept.

CDK gives every Lambda function an explicit DependsOn on its execution role although the
function already references the role with GetAtt; cfn-lint reports that as W3005 (redundant
dependency). It changes nothing at deploy time, and CDK offers no switch to drop it, so the
functions carry a cfn-lint ignore for W3005 only, visible to anyone who lints cdk.out.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

REDUNDANT_ROLE_DEPENDENCY = "W3005"


@jsii.implements(IAspect)
class AcceptLambdaRoleDependsOn:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource) and node.cfn_resource_type == "AWS::Lambda::Function":
            node.add_metadata(
                "cfn-lint", {"config": {"ignore_checks": [REDUNDANT_ROLE_DEPENDENCY]}}
            )
