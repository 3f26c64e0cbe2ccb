"""Helpers for tests on moto. Light on purpose (no CDK import): the Lambda handlers' tests import
only this, so a mutation run (one pytest process per mutant) does not start jsii each time."""

from __future__ import annotations

import pytest


def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch, region: str) -> None:
    """Credentials and region for boto3 under moto's mock_aws (never real ones)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": region,
    }.items():
        monkeypatch.setenv(name, value)


def skip_moto_public_amis(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's EC2 backend loads some 1,300 public AMIs per region it starts unless told not to
    (about half a second each time); tests that launch instances do not need them: moto does
    not check that an instance's ImageId exists."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
