"""The sample three-environment pipeline: order, approvals, per-environment placement, checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stages.environment_stage import EnvironmentStage
from stages.pipeline_stack import PipelineStack
from tests.conftest import PIPELINE_SAMPLE as SAMPLE
from tests.conftest import SynthesizedPipeline, open_nag_findings

CFN_LINT = Path(sys.executable).with_name("cfn-lint")


@pytest.fixture(scope="module")
def pipeline_app(pipeline_synth: SynthesizedPipeline) -> tuple[PipelineStack, Path, str | None]:
    children = pipeline_synth.app.node.children
    (stack,) = [child for child in children if isinstance(child, PipelineStack)]
    return stack, pipeline_synth.outdir, pipeline_synth.synth_error


@pytest.fixture(scope="module")
def pipeline_template(pipeline_app: tuple[PipelineStack, Path, str | None]) -> dict[str, Any]:
    stack, outdir, _ = pipeline_app
    return dict(json.loads((outdir / stack.template_file).read_text()))


def codepipeline_stages(template: dict[str, Any]) -> list[dict[str, Any]]:
    (pipeline,) = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"
    ]
    return list(pipeline["Properties"]["Stages"])


def test_environments_deploy_in_configured_order(pipeline_template: dict[str, Any]) -> None:
    names = [stage["Name"] for stage in codepipeline_stages(pipeline_template)]
    environment_stages = [name for name in names if name in {"dev", "staging", "production"}]
    assert environment_stages == ["dev", "staging", "production"]
    assert names.index("UpdatePipeline") < names.index("dev")


def test_manual_approval_precedes_flagged_environments_only(
    pipeline_template: dict[str, Any],
) -> None:
    for stage in codepipeline_stages(pipeline_template):
        if stage["Name"] not in {"dev", "staging", "production"}:
            continue
        approvals = [
            action
            for action in stage["Actions"]
            if action["ActionTypeId"]["Category"] == "Approval"
        ]
        deploys = [
            action
            for action in stage["Actions"]
            if action["ActionTypeId"]["Provider"] == "CloudFormation"
        ]
        if stage["Name"] == "dev":
            assert approvals == []
        else:
            assert len(approvals) == 1
            assert approvals[0]["RunOrder"] < min(action["RunOrder"] for action in deploys)


def test_each_environment_gets_its_account_region_azs_and_cidrs(
    pipeline_app: tuple[PipelineStack, Path, str | None],
) -> None:
    stack, _, _ = pipeline_app
    expected = {
        "dev": ("222222222222", "us-west-2", ["us-west-2a", "us-west-2b"], "10.0.4.0/24"),
        "staging": (
            "333333333333",
            "ap-northeast-1",
            ["ap-northeast-1a", "ap-northeast-1c"],
            "10.20.4.0/24",
        ),
        "production": (
            "444444444444",
            "ap-northeast-1",
            ["ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"],
            "10.30.20.0/24",
        ),
    }
    stages = {stage.node.id: stage for stage in stack.stages}
    assert set(stages) == set(expected)
    for name, (account, region, azs, first_multus_cidr) in expected.items():
        stage: EnvironmentStage = stages[name]
        network = stage.network
        assert (network.account, network.region) == (account, region)
        template = json.loads((Path(stage.outdir) / network.template_file).read_text())
        subnets = [
            r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::EC2::Subnet"
        ]
        assert sorted({s["AvailabilityZone"] for s in subnets}) == azs
        assert first_multus_cidr in {s["CidrBlock"] for s in subnets}


def test_synth_step_runs_the_test_suite_before_synth(pipeline_template: dict[str, Any]) -> None:
    buildspecs = [
        json.loads(r["Properties"]["Source"]["BuildSpec"])
        for r in pipeline_template["Resources"].values()
        if r["Type"] == "AWS::CodeBuild::Project"
        and "make synth" in r["Properties"]["Source"].get("BuildSpec", "")
    ]
    assert len(buildspecs) == 1
    commands = buildspecs[0]["phases"]["build"]["commands"]
    assert commands[0] == "make test"
    assert commands[1] == f"make synth CDK_ARGS='-c config_file={SAMPLE}'"


def test_pipeline_uses_rotating_cross_account_keys(pipeline_template: dict[str, Any]) -> None:
    keys = [
        r["Properties"]
        for r in pipeline_template["Resources"].values()
        if r["Type"] == "AWS::KMS::Key"
    ]
    assert keys
    assert all(key["EnableKeyRotation"] for key in keys)


def test_cfn_lint_and_cdk_nag_on_the_pipeline(
    pipeline_app: tuple[PipelineStack, Path, str | None],
) -> None:
    _, outdir, synth_error = pipeline_app
    templates = [str(path) for path in sorted(outdir.glob("*.template.json"))]
    assert len(templates) == 2  # the pipeline and its ap-northeast-1 replication support stack
    result = subprocess.run(
        [
            str(CFN_LINT),
            "--format",
            "json",
            "--regions",
            "us-west-2",
            "ap-northeast-1",
            "--",
            *templates,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = [f"{f['Rule']['Id']}: {f['Message']}" for f in json.loads(result.stdout or "[]")]
    assert findings == []
    report = json.loads((outdir / "validation-report.json").read_text())
    assert open_nag_findings(report) == []
    assert synth_error is None


def test_source_action_may_use_the_connection_under_its_arns_service_prefix(
    pipeline_template: dict[str, Any],
) -> None:
    # IAM matches a resource only with an action of the same service prefix; the sample's
    # connection has a codeconnections ARN (as every connection created since mid-2024).
    grants = [
        statement
        for resource in pipeline_template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if str(statement["Action"]).endswith("UseConnection")
    ]
    assert [(g["Action"], g["Resource"].split(":")[2]) for g in grants] == [
        ("codeconnections:UseConnection", "codeconnections")
    ]


def codebuild_buildspecs(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        key: json.loads(r["Properties"]["Source"]["BuildSpec"])
        for key, r in template["Resources"].items()
        if r["Type"] == "AWS::CodeBuild::Project"
    }


def test_every_codebuild_step_pins_its_runtimes(pipeline_template: dict[str, Any]) -> None:
    """Not the image's defaults (Node 24 on standard:8.0): the project's Python, a Node.js the
    CLI supports, in synth, self-mutation and every asset step alike."""
    buildspecs = codebuild_buildspecs(pipeline_template)
    assert len(buildspecs) >= 3
    for key, buildspec in buildspecs.items():
        assert buildspec["phases"]["install"]["runtime-versions"] == {
            "python": "3.11",
            "nodejs": "22",
        }, key


def test_self_mutation_and_assets_install_package_jsons_pins(
    pipeline_template: dict[str, Any],
) -> None:
    pins = json.loads((Path(__file__).parents[3] / "package.json").read_text())["devDependencies"]
    installs = {
        command
        for buildspec in codebuild_buildspecs(pipeline_template).values()
        for command in buildspec["phases"]["install"].get("commands", [])
    }
    assert installs == {
        f"npm install -g aws-cdk@{pins['aws-cdk']}",
        f"npm install -g cdk-assets@{pins['cdk-assets']}",
    }
