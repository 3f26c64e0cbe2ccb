"""What the three custom resources share, in the default synth: one handler runtime, logs in
a log group of the stack, and a ServiceTimeout that covers the framework's answer but does not
leave CloudFormation waiting the default hour for a synchronous handler."""

from __future__ import annotations

from typing import Any

import pytest

from cdk_constructs.custom_resource_kit import HANDLER_RUNTIME
from tests.conftest import SynthesizedApp
from tests.helpers import resources

OUR_RESOURCES = (
    "Custom::SubnetCidrReservation",
    "Custom::AmiReleaseCheck",
    "Custom::KarpenterTeardown",
)
SYNCHRONOUS = OUR_RESOURCES[:2]
# aws-cdk-lib custom-resources runtime outbound.ts: a failed invocation is retried after
# waiting up to 300 s for the function to become Active.
ACTIVATION_WAIT_SECONDS = 300


@pytest.fixture(scope="module")
def templates(default_app: SynthesizedApp) -> list[dict[str, Any]]:
    stage = default_app.stage
    return [default_app.template_json(stage.network), default_app.template_json(stage.cluster)]


def handler_of(template: dict[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    """The on-event handler behind a custom resource: its service token is the framework's
    onEvent function, which names the handler in its environment."""
    functions = template["Resources"]
    (framework, _) = resource["Properties"]["ServiceToken"]["Fn::GetAtt"]
    variables = functions[framework]["Properties"]["Environment"]["Variables"]
    (handler, _) = variables["USER_ON_EVENT_FUNCTION_ARN"]["Fn::GetAtt"]
    return dict(functions[handler])


def our_resources(
    templates: list[dict[str, Any]], *types: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(t, r) for t in templates for r in resources(t, *types).values()]


def test_each_resource_type_is_in_the_default_synth(templates: list[dict[str, Any]]) -> None:
    found = {r["Type"] for _, r in our_resources(templates, *OUR_RESOURCES)}
    assert found == set(OUR_RESOURCES)


def test_synchronous_resources_wait_for_one_handler_run_not_the_default_hour(
    templates: list[dict[str, Any]],
) -> None:
    """Without ServiceTimeout CloudFormation waits 3600 s (template reference,
    AWS::CloudFormation::CustomResource) for an answer a lost framework never sends."""
    for template, resource in our_resources(templates, *SYNCHRONOUS):
        handler = handler_of(template, resource)["Properties"]
        timeout = int(resource["Properties"]["ServiceTimeout"])
        assert ACTIVATION_WAIT_SECONDS + handler["Timeout"] <= timeout < 3600, resource


def test_every_handler_runs_the_kits_runtime_and_logs_to_its_stack(
    templates: list[dict[str, Any]],
) -> None:
    for template, resource in our_resources(templates, *OUR_RESOURCES):
        handler = handler_of(template, resource)["Properties"]
        assert handler["Runtime"] == HANDLER_RUNTIME.name
        (log_group,) = handler["LoggingConfig"]["LogGroup"].values()
        assert template["Resources"][log_group]["Type"] == "AWS::Logs::LogGroup"
