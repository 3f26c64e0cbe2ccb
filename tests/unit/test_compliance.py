"""Every synthesized template passes cfn-lint in both target regions and cdk-nag AwsSolutions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import SynthesizedApp, open_nag_findings

# ap-northeast-1 has no AWS::EC2::SubnetCidrReservation: linting there proves we don't use it.
LINT_REGIONS = ["us-west-2", "ap-northeast-1"]
CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def test_cfn_lint_reports_nothing_in_either_region(default_app: SynthesizedApp) -> None:
    templates = [str(path) for path in default_app.template_paths()]
    assert len(templates) == len(default_app.stage.node.children)
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


def test_cdk_nag_has_no_unacknowledged_findings(default_app: SynthesizedApp) -> None:
    open_findings = open_nag_findings(default_app.validation_report())
    assert open_findings == [], "\n".join(open_findings)
    assert default_app.synth_error is None


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
