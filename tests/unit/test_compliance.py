"""Every synthesized template passes cfn-lint in both target regions and cdk-nag AwsSolutions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import APP_FIXTURES, SynthesizedApp, open_nag_findings
from tests.helpers import resources

# ap-northeast-1 has no AWS::EC2::SubnetCidrReservation: linting there proves we don't use it.
LINT_REGIONS = ["us-west-2", "ap-northeast-1"]
CFN_LINT = Path(sys.executable).with_name("cfn-lint")


# The default app, one with a security group per network and rules between the groups, one
# with routes to each kind of target, and one in a VPC the network team owns.
APPS = ["default_app", "per_network_rules_app", "routes_app", "existing_vpc_app"]


@pytest.mark.parametrize("app_fixture", APPS)
def test_cfn_lint_reports_nothing_in_either_region(
    app_fixture: str, request: pytest.FixtureRequest
) -> None:
    app: SynthesizedApp = request.getfixturevalue(app_fixture)
    templates = [str(path) for path in app.template_paths()]
    assert len(templates) == len(app.stage.node.children)
    result = subprocess.run(
        [str(CFN_LINT), "--format", "json", "--regions", *LINT_REGIONS, "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    summary = [f"{f['Rule']['Id']} {f['Filename']}: {f['Message']}" for f in findings]
    assert summary == [], "\n".join(summary)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("app_fixture", APPS)
def test_cdk_nag_has_no_unacknowledged_findings(
    app_fixture: str, request: pytest.FixtureRequest
) -> None:
    app: SynthesizedApp = request.getfixturevalue(app_fixture)
    open_findings = open_nag_findings(app.validation_report())
    assert open_findings == [], "\n".join(open_findings)
    assert app.synth_error is None


def test_every_acknowledgment_gives_a_reason(default_app: SynthesizedApp) -> None:
    report = default_app.validation_report()
    acknowledged = [
        violation
        for plugin in report["pluginReports"]
        for violation in plugin.get("suppressedViolations", [])
    ]
    assert acknowledged, "expected the documented acknowledgments to be exercised"
    for violation in acknowledged:
        assert len(violation["reason"]) > 40, violation["acknowledgedId"]


ACCEPTED_LINT_IGNORES = {
    "W3005": {
        "AWS::Lambda::Function",
        "AWS::CodePipeline::Pipeline",
        "AWS::StepFunctions::StateMachine",  # custom_resources.Provider's waiter
    },
    "E3703": {"AWS::CodePipeline::Pipeline"},
    "W3010": {"AWS::EC2::Subnet"},
}


def test_cfn_lint_ignores_are_only_the_documented_ones(default_app: SynthesizedApp) -> None:
    for path in default_app.template_paths():
        for logical_id, resource in json.loads(path.read_text())["Resources"].items():
            config = resource.get("Metadata", {}).get("cfn-lint", {}).get("config", {})
            for rule in config.get("ignore_checks", []):
                assert resource["Type"] in ACCEPTED_LINT_IGNORES.get(rule, set()), (
                    f"{path.name}:{logical_id} ignores {rule}"
                )


def meets_ct_cloudwatch_pr_2(log_group_properties: dict[str, Any]) -> bool:
    """AWS Control Tower CT.CLOUDWATCH.PR.2, "Require an Amazon CloudWatch log group to be
    retained for at least one year" (@cdklabs/cdk-validator-cfnguard 0.0.62,
    rules/control-tower/cfn-guard/cloudwatch/ct-cloudwatch-pr-2.guard): RetentionInDays absent
    (never expire) or at least 365."""
    days = log_group_properties.get("RetentionInDays")
    return days is None or int(days) >= 365


@pytest.mark.parametrize(("days", "meets"), [(None, True), (365, True), (180, False)])
def test_ct_cloudwatch_pr_2_boundary(days: int | None, meets: bool) -> None:
    properties = {} if days is None else {"RetentionInDays": days}
    assert meets_ct_cloudwatch_pr_2(properties) is meets


@pytest.mark.parametrize("fixture", APP_FIXTURES)
def test_every_log_group_meets_ct_cloudwatch_pr_2_by_default(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    """Every log group of every app, the Lambda functions' ones included (they kept 30 days,
    and an account with Control Tower's proactive controls refused the deploy)."""
    app: SynthesizedApp = request.getfixturevalue(fixture)
    groups = {
        f"{stack.stack_name}/{logical_id}": group.get("Properties", {})
        for stack in (app.stage.network, app.stage.cluster)
        for logical_id, group in resources(app.template_json(stack), "AWS::Logs::LogGroup").items()
    }
    assert len(groups) >= 6
    assert [g for g, p in groups.items() if not meets_ct_cloudwatch_pr_2(p)] == []


def test_control_plane_and_flow_logs_meet_ct_cloudwatch_pr_2(default_app: SynthesizedApp) -> None:
    """The incident evidence (audit and the other control-plane logs, VPC flow logs) is kept a
    year by default: CT.CLOUDWATCH.PR.2 (see meets_ct_cloudwatch_pr_2)."""
    evidence = {}
    for stack in (default_app.stage.network, default_app.stage.cluster):
        groups = resources(default_app.template_json(stack), "AWS::Logs::LogGroup")
        flow_logs = resources(default_app.template_json(stack), "AWS::EC2::FlowLog")
        flow_log_groups = {log["Properties"]["LogGroupName"]["Ref"] for log in flow_logs.values()}
        for logical_id, group in groups.items():
            name = group["Properties"].get("LogGroupName", "")
            if logical_id in flow_log_groups or str(name).startswith("/aws/eks/"):
                evidence[logical_id] = group["Properties"]
    assert len(evidence) == 2, sorted(evidence)
    assert all(meets_ct_cloudwatch_pr_2(properties) for properties in evidence.values()), evidence
