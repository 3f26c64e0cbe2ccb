"""Every IAM statement of every synthesized template is one AWS evaluates as intended: checked
against the IAM service reference (testing_support/iam_reference.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing_support.iam_reference import cdk_out_problems
from tests.conftest import SynthesizedApp, SynthesizedPipeline


def assert_conformant(outdir: Path, expected_templates: int) -> None:
    checked, problems = cdk_out_problems(outdir)
    assert checked == expected_templates
    assert [str(problem) for problem in problems] == []


def test_default_app_policies_conform(default_app: SynthesizedApp) -> None:
    assert_conformant(default_app.outdir, expected_templates=2)


def test_three_by_three_policies_conform(three_by_three_app: SynthesizedApp) -> None:
    assert_conformant(three_by_three_app.outdir, expected_templates=2)


def test_5g_core_policies_conform(five_g_core_app: SynthesizedApp) -> None:
    assert_conformant(five_g_core_app.outdir, expected_templates=2)


def test_existing_vpc_policies_conform(existing_vpc_app: SynthesizedApp) -> None:
    assert_conformant(existing_vpc_app.outdir, expected_templates=2)


def test_dual_stack_policies_conform(dual_stack_app: SynthesizedApp) -> None:
    assert_conformant(dual_stack_app.outdir, expected_templates=2)


def test_pipeline_policies_conform(pipeline_synth: SynthesizedPipeline) -> None:
    # The pipeline stack, its cross-region support stack and 2 stacks per environment (3).
    assert_conformant(pipeline_synth.outdir, expected_templates=8)


@pytest.fixture(scope="module")
def policy_count(default_app: SynthesizedApp) -> int:
    return sum(
        path.read_text().count('"AWS::IAM::Policy"') for path in default_app.template_paths()
    )


def test_the_check_sees_the_handler_and_node_policies(policy_count: int) -> None:
    # Guards against a vacuous pass (no policies found): at least the reservation handler's,
    # the node role's Multus ENI policy, the kubectl provider's and the flow log role's.
    assert policy_count >= 4
