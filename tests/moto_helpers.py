"""Helpers for tests on moto. Light on purpose (no CDK import): the Lambda handlers' tests import
only this, so a mutation run (one pytest process per mutant) does not start jsii for them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws
from moto.core.models import MockAWS

#: An injected answer: (EC2 error code, HTTP status), or the exception botocore would raise.
Fault = tuple[str, int] | Exception


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


@contextmanager
def failing_calls(
    service: str, operation: str, answer: Fault, times: int | None = None
) -> Iterator[list[str]]:
    """While active, every `operation` call of clients created from boto3's default session
    (or only the first `times` of them: IAM refusing a new role until it has propagated)
    fails as it does once botocore's own retries are spent: with the EC2 error `answer` names,
    or with the exception botocore raises for a refused connection or a timeout. Such a call
    never reaches moto; the later ones do. Yields the operations that failed so."""
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    session = boto3.DEFAULT_SESSION
    assert session is not None
    answered: list[str] = []

    def fail(**_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if times is not None and len(answered) >= times:
            return None  # on to moto
        answered.append(operation)
        if isinstance(answer, Exception):
            raise answer
        code, status = answer
        parsed = {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        return AWSResponse("https://injected", status, {}, None), parsed

    event = f"before-call.{service}.{operation}"
    session.events.register_first(event, fail, unique_id=f"failing-{event}")
    try:
        yield answered
    finally:
        session.events.unregister(event, unique_id=f"failing-{event}")


@contextmanager
def recorded_ec2_calls() -> Iterator[list[tuple[str, dict[str, str]]]]:
    """While active, every EC2 call of clients created with boto3.client is recorded as (action,
    query parameters) before it is sent: what a handler asked of EC2, to evaluate against IAM."""
    calls: list[tuple[str, dict[str, str]]] = []
    original = boto3.client

    def recording_client(*args: Any, **kwargs: Any) -> Any:
        client = original(*args, **kwargs)
        client.meta.events.register(
            "before-call.ec2.*",
            lambda model, params, **_: calls.append((model.name, params["body"])),
        )
        return client

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(boto3, "client", recording_client)
        yield calls
