"""The generated accepted-findings page: current, and built from what synthesis records."""

from __future__ import annotations

import json
from pathlib import Path

from docs_tools import accepted_findings
from tests.conftest import REPO, SynthesizedApp, SynthesizedPipeline


def page(default_app: SynthesizedApp, pipeline_outdir: Path) -> str:
    return accepted_findings.render(
        accepted_findings.collect(
            accepted_findings.stack_metadata_files(Path(default_app.stage.outdir))
        ),
        accepted_findings.collect(accepted_findings.stack_metadata_files(pipeline_outdir)),
    )


def test_committed_page_matches_the_acknowledgments_in_code(
    default_app: SynthesizedApp, pipeline_synth: SynthesizedPipeline
) -> None:
    pipeline_outdir = pipeline_synth.outdir
    committed = (REPO / "docs" / "checks-and-accepted-findings.md").read_text(encoding="utf-8")
    assert committed == page(default_app, pipeline_outdir), (
        "docs/checks-and-accepted-findings.md is stale: run `make docs` and commit it"
    )


def test_every_suppressed_violation_of_the_report_is_on_the_page(
    default_app: SynthesizedApp,
) -> None:
    # The validation report lists what each plugin (cdk-nag, cfn-lint) found and suppressed
    # because of an acknowledgment: each of those has its row.
    findings = accepted_findings.collect(
        accepted_findings.stack_metadata_files(Path(default_app.stage.outdir))
    )
    checks = {"AwsSolutions": "cdk-nag", "CloudFormation Validate": "cfn-lint"}
    suppressed = {
        (checks[plugin["pluginName"]], violation["ruleName"])
        for plugin in default_app.validation_report()["pluginReports"]
        for violation in plugin["suppressedViolations"]
    }
    assert len(suppressed) > 20
    assert suppressed <= {(finding.check, finding.finding) for finding in findings}


def test_collect_groups_constructs_by_rule_and_reason(tmp_path: Path) -> None:
    ack = "aws:cdk:acknowledged-rules"
    (tmp_path / "One.metadata.json").write_text(
        json.dumps(
            {
                "/stage/Net/SubnetA": [
                    {"type": ack, "data": {"CloudFormation-Validate::W3010": "AZs"}}
                ],
                "/stage/Net/SubnetB": [
                    {"type": ack, "data": {"CloudFormation-Validate::W3010": "AZs"}}
                ],
                "/stage/Net/Role": [
                    {"type": "aws:cdk:logicalId", "data": "Role"},
                    {"type": ack, "data": {"AwsSolutions::AwsSolutions-IAM4[Policy::x]": "a|b"}},
                ],
            }
        )
    )
    findings = accepted_findings.collect([tmp_path / "One.metadata.json"])
    assert findings == [
        accepted_findings.AcceptedFinding(
            "cdk-nag", "AwsSolutions-IAM4[Policy::x]", "a|b", ("Net/Role",)
        ),
        accepted_findings.AcceptedFinding(
            "cfn-lint", "W3010", "AZs", ("Net/SubnetA", "Net/SubnetB")
        ),
    ]
    assert "a\\|b" in accepted_findings.render(findings, [])
