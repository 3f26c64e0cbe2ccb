"""RecordAcceptedLintFindings on a bare Stack: the accepted cfn-lint rules land in the metadata
of exactly the resource types they concern, and nowhere else."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.accepted_lint_findings import ACCEPTED_FINDINGS, RecordAcceptedLintFindings


@pytest.fixture(scope="module")
def template() -> Template:
    stack = cdk.Stack(
        cdk.App(), "Bare", env=cdk.Environment(account="111111111111", region="us-west-2")
    )
    cdk.CfnResource(stack, "Function", type="AWS::Lambda::Function", properties={})
    cdk.CfnResource(stack, "Pipeline", type="AWS::CodePipeline::Pipeline", properties={})
    cdk.CfnResource(stack, "Queue", type="AWS::SQS::Queue", properties={})
    cdk.Aspects.of(stack).add(RecordAcceptedLintFindings())
    return Template.from_stack(stack)


def _ignored_checks(rules: list[str]) -> dict[str, object]:
    return {"Metadata": Match.object_like({"cfn-lint": {"config": {"ignore_checks": rules}}})}


def test_lambda_ignores_only_the_redundant_depends_on(template: Template) -> None:
    # W3005: DependsOn that an intrinsic (GetAtt on the role) already implies.
    template.has_resource("AWS::Lambda::Function", _ignored_checks(["W3005"]))


def test_pipeline_ignores_depends_on_and_its_action_arn_schema(template: Template) -> None:
    template.has_resource("AWS::CodePipeline::Pipeline", _ignored_checks(["W3005", "E3703"]))


def test_other_resource_types_keep_every_rule(template: Template) -> None:
    (queue,) = template.find_resources("AWS::SQS::Queue").values()
    assert "cfn-lint" not in queue.get("Metadata", {})


def test_every_accepted_finding_has_a_reason() -> None:
    for resource_type, rules in ACCEPTED_FINDINGS.items():
        for rule, reason in rules.items():
            assert rule[0] in "EWI" and rule[1:].isdigit(), (resource_type, rule)
            assert reason.strip(), (resource_type, rule)
