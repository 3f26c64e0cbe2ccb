"""cluster.admin_principal_arns and cluster.public_access_cidrs: what EKS accepts, or a clear
error naming the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from config import ConfigError, parse_config
from config.cluster_access import (
    NO_ADMIN_WARNING,
    WORLD_OPEN_WARNING,
    access_warnings,
    endpoint_warnings,
)


def error_for(cluster: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config({"cluster": cluster})
    return str(caught.value)


def test_defaults_keep_the_endpoint_private_and_name_no_admin() -> None:
    cluster = parse_config({}).cluster
    assert cluster.public_access_cidrs is None
    assert cluster.admin_principal_arns == []


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:role/platform-admins",
        "arn:aws:iam::123456789012:role/team/ops/platform-admins",  # access entries take paths
        "arn:aws:iam::123456789012:user/alice",
        "arn:aws-cn:iam::123456789012:role/Admin",
    ],
)
def test_iam_role_and_user_arns_are_accepted(arn: str) -> None:
    assert parse_config(
        {"cluster": {"admin_principal_arns": [arn]}}
    ).cluster.admin_principal_arns == [arn]


def test_assumed_role_session_is_refused_with_the_role_arn_to_use() -> None:
    message = error_for(
        {"admin_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Admin/alice@example.com"]}
    )
    assert "cluster.admin_principal_arns" in message
    assert "STS assumed-role session" in message
    assert "use the role's ARN, arn:aws:iam::123456789012:role/Admin" in message
    # A session ARN drops the role's path, so the exact ARN cannot be derived; say so.
    assert "path" in message
    assert "aws iam get-role --role-name Admin" in message


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:group/admins",  # groups cannot have access entries
        "arn:aws:iam::123456789012:root",
        "arn:aws:iam::12345:role/short-account",
        "platform-admins",
    ],
)
def test_other_principals_are_refused(arn: str) -> None:
    message = error_for({"admin_principal_arns": [arn]})
    assert "cluster.admin_principal_arns" in message
    assert "not an IAM role or user ARN" in message


def test_the_same_admin_twice_is_refused() -> None:
    arn = "arn:aws:iam::123456789012:role/platform-admins"
    assert "listed more than once" in error_for({"admin_principal_arns": [arn, arn]})


def test_the_old_single_admin_key_names_its_replacement() -> None:
    message = error_for({"admin_principal_arn": "arn:aws:iam::123456789012:role/platform-admins"})
    assert "admin_principal_arn was replaced by admin_principal_arns" in message


def test_public_access_cidrs_open_a_public_endpoint_only_for_those_ranges() -> None:
    cluster = parse_config({"cluster": {"public_access_cidrs": ["198.51.100.0/24"]}}).cluster
    assert cluster.public_access_cidrs == ["198.51.100.0/24"]


def test_an_empty_public_access_list_is_an_error_not_a_silent_private_endpoint() -> None:
    message = error_for({"public_access_cidrs": []})
    assert "cluster.public_access_cidrs" in message
    assert "leave public_access_cidrs unset (null)" in message


def test_a_bad_cidr_in_public_access_is_named() -> None:
    assert "cluster.public_access_cidrs" in error_for({"public_access_cidrs": ["10.0.0.1/8"]})


def test_no_admin_warns_and_naming_one_does_not() -> None:
    assert access_warnings([]) == [NO_ADMIN_WARNING]
    # Led by the key to fix, like every config error ("<field path>: ...").
    assert NO_ADMIN_WARNING.startswith("cluster.admin_principal_arns is empty")
    assert access_warnings(["arn:aws:iam::123456789012:role/platform-admins"]) == []


def test_an_endpoint_open_to_the_world_warns_naming_the_field() -> None:
    assert endpoint_warnings(["0.0.0.0/0"]) == [WORLD_OPEN_WARNING]
    assert WORLD_OPEN_WARNING.startswith("cluster.public_access_cidrs includes 0.0.0.0/0")
    assert endpoint_warnings(["203.0.113.0/24"]) == endpoint_warnings(None) == []
