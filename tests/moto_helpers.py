"""Helpers for tests on moto. Light on purpose (no CDK import): the Lambda handlers' tests import
only this, so a mutation run (one pytest process per mutant) does not start jsii for them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import MockAWS


def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """Credentials and region for boto3 under moto's mock_aws (never real ones)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": region,
    }.items():
        monkeypatch.setenv(name, value)


@contextmanager
def moto_for_module(region: str) -> Iterator[MockAWS]:
    """moto started once for a test module; each test calls `reset()` for an empty account.

    Starting moto per test costs about a second: each start drops boto3's default session, so
    the next client parses botocore's service model again, and moto's EC2 backend loads some
    1,300 public AMIs per region it starts. Nothing here needs those AMIs: moto does not check
    that an instance's ImageId exists."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        fake_aws_credentials(monkeypatch, region)
        monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        with mock_aws() as mock:
            yield mock


def moto_ec2_fixtures(region: str) -> tuple[Any, Any]:
    """The `aws` (moto, once per module) and `ec2` (a client on an emptied account) fixtures of
    a handler's test module: `aws, ec2 = moto_ec2_fixtures(REGION)`."""

    @pytest.fixture(scope="module")
    def aws() -> Iterator[MockAWS]:
        with moto_for_module(region) as mock:
            yield mock

    @pytest.fixture
    def ec2(aws: MockAWS) -> Any:
        aws.reset()  # every test starts from an empty account
        return boto3.client("ec2", region_name=region)

    return aws, ec2
