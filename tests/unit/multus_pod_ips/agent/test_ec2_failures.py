"""multus_pod_ips_ec2_failures_total counts calls that failed for good, once each with the error
they ended with, while multus_pod_ips_ec2_errors_total counts every attempt: a 5xx the retries
get past is an error but no failure (issue #53: MultusPodIpsEc2Refused read the attempts)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from multus_pod_ips.agent.ec2_query import Ec2Client, Ec2Error
from multus_pod_ips.agent.imds import InstanceMetadata
from testing_support.multus_emulator import ec2_error_xml
from tests.unit.multus_pod_ips.fakes import FakeAws

ACTION = "DescribeNetworkInterfaces"


@pytest.fixture
def fake_aws() -> Iterator[FakeAws]:
    fake = FakeAws()
    yield fake
    fake.close()


def client(fake_aws: FakeAws) -> Ec2Client:
    return Ec2Client(InstanceMetadata(fake_aws.url), "us-west-2", fake_aws.url)


def test_a_5xx_the_retries_get_past_is_an_error_but_no_failure(fake_aws: FakeAws) -> None:
    ec2 = client(fake_aws)
    fake_aws.ec2_answers = [(500, ec2_error_xml("InternalError", "try again"))] * 2

    ec2.call(ACTION, {}, deadline=time.monotonic() + 10)

    assert ec2.metrics.ec2_errors.value(ACTION, "InternalError") == 2
    assert ec2.metrics.ec2_failures.value(ACTION, "InternalError") == 0
    assert "multus_pod_ips_ec2_failures_total{" not in ec2.metrics.render()


def test_a_5xx_that_outlasts_the_retries_fails_the_call_once(fake_aws: FakeAws) -> None:
    ec2 = client(fake_aws)
    fake_aws.ec2_answers = [(503, ec2_error_xml("Unavailable", "later"))] * 50

    with pytest.raises(Ec2Error):
        ec2.call(ACTION, {}, deadline=time.monotonic() + 0.5)

    assert ec2.metrics.ec2_errors.value(ACTION, "Unavailable") >= 1
    assert ec2.metrics.ec2_failures.value(ACTION, "Unavailable") == 1


def test_a_refusal_no_retry_fixes_fails_the_call_at_once(fake_aws: FakeAws) -> None:
    ec2 = client(fake_aws)
    fake_aws.ec2_answers = [(403, ec2_error_xml("UnauthorizedOperation", "not allowed"))]

    with pytest.raises(Ec2Error):
        ec2.call(ACTION, {}, deadline=time.monotonic() + 10)

    assert ec2.metrics.ec2_failures.value(ACTION, "UnauthorizedOperation") == 1
    assert (
        'multus_pod_ips_ec2_failures_total{action="DescribeNetworkInterfaces",'
        'code="UnauthorizedOperation"} 1' in ec2.metrics.render()
    )
