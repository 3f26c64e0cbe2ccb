"""The numbers behind every ServiceTimeout, held against their sources: CloudFormation's limit
and the pinned aws-cdk-lib's Provider framework."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import Duration

from config import custom_resource_timing as timing

OUTBOUND_JS = "package/custom-resources/lib/provider-framework/runtime/outbound.js"


def pinned_framework_source(member: str) -> str:
    """A file of the aws-cdk-lib release this app pins, from the jsii bundle it runs."""
    (bundle,) = (Path(cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as archive:
        extracted = archive.extractfile(member)
        assert extracted is not None
        return extracted.read().decode()


def test_the_limit_is_cloudformations_hour() -> None:
    """CloudFormation template reference, AWS::CloudFormation::CustomResource: ServiceTimeout
    is an integer from 1 to 3600 seconds (default 3600)."""
    assert timing.SERVICE_TIMEOUT_LIMIT_SECONDS == 3600


@pytest.mark.parametrize(("seconds", "accepted"), [(3600, True), (3601, False)])
def test_aws_cdk_lib_refuses_a_service_timeout_past_the_limit(seconds: int, accepted: bool) -> None:
    """aws-cdk-lib core/lib/custom-resource.ts checks serviceTimeout against 1-3600 s at synth."""
    stack = cdk.Stack(cdk.App(), "Bare")

    def build() -> None:
        cdk.CustomResource(
            stack, f"R{seconds}", service_token="arn", service_timeout=Duration.seconds(seconds)
        )

    if accepted:
        build()
    else:
        with pytest.raises(RuntimeError, match="between 1 and 3600 seconds"):
            build()


def test_activation_wait_is_the_one_the_pinned_framework_uses() -> None:
    """aws-cdk-lib custom-resources runtime outbound.ts, defaultInvokeFunction: a failed
    invocation is retried after waitUntilFunctionActiveV2 with maxWaitTime 300 (seconds)."""
    source = pinned_framework_source(OUTBOUND_JS)
    waits = re.findall(r"waitUntilFunctionActiveV2\)\(\{client:lambda,maxWaitTime:(\d+)\}", source)
    assert [int(wait) for wait in waits] == [timing.FRAMEWORK_ACTIVATION_WAIT_SECONDS]


def test_the_longest_teardown_bound_is_the_last_that_fits_the_hour() -> None:
    longest = timing.LONGEST_TEARDOWN_TIMEOUT_MINUTES
    assert timing.teardown_service_timeout_seconds(longest) <= 3600
    assert timing.teardown_service_timeout_seconds(longest + 1) > 3600


def test_the_teardown_margin_covers_the_answer_after_the_deadline() -> None:
    # before onEvent reads the clock: the framework's start and one activation wait; after the
    # deadline: up to one poll interval until the deciding poll, which runs up to its timeout.
    assert timing.TEARDOWN_MARGIN_SECONDS == 60 + 300 + 30 + 120
    assert timing.TEARDOWN_MARGIN_MINUTES == 8.5
