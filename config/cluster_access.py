"""Who may administer the cluster and from where the API endpoint is reachable.

EKS access entries take IAM role or user ARNs only: an STS assumed-role ARN (what
`aws sts get-caller-identity` prints for a role session) is refused by EKS and would roll the
cluster stack back, so it is refused here, with the role ARN to use instead.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_PARTITION = r"aws(?:-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?"
_IAM_PRINCIPAL = re.compile(
    rf"^arn:{_PARTITION}:iam::\d{{12}}:(?:role|user)(?:/[\w+=,.@-]+)+$",
)
_ASSUMED_ROLE = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):sts::(?P<account>\d{{12}}):assumed-role/"
    r"(?P<role>[\w+=,.@-]+)/(?P<session>.+)$"
)


def _admin_principal_arn(value: str) -> str:
    assumed = _ASSUMED_ROLE.fullmatch(value)
    if assumed:
        role_arn = f"arn:{assumed['partition']}:iam::{assumed['account']}:role/{assumed['role']}"
        raise ValueError(
            f"{value!r} is an STS assumed-role session, which EKS access entries refuse; use the "
            f"role's ARN, {role_arn} (a session ARN does not show the role's path: if the role "
            f"has one, e.g. /team/, write role/team/{assumed['role']}; "
            f"`aws iam get-role --role-name {assumed['role']} --query Role.Arn` prints it)"
        )
    if not _IAM_PRINCIPAL.fullmatch(value):
        raise ValueError(
            f"{value!r} is not an IAM role or user ARN (arn:aws:iam::<12-digit account>:"
            "role/<name> or :user/<name>), for example arn:aws:iam::123456789012:role/eks-admins"
        )
    return value


#: An IAM role or user ARN an EKS access entry accepts.
AdminPrincipalArn = Annotated[str, AfterValidator(_admin_principal_arn)]


def check_public_access_cidrs(cidrs: list[str] | None) -> list[str] | None:
    """None keeps the endpoint private; an empty list would be ambiguous, so it is refused."""
    if cidrs is not None and not cidrs:
        raise ValueError(
            "an empty list opens nothing; leave public_access_cidrs unset (null) for a "
            "private-only endpoint, or list the CIDRs that may reach the public endpoint"
        )
    return cidrs


RENAMED_KEYS = {
    "admin_principal_arn": "admin_principal_arns (a list of IAM role or user ARNs, "
    'e.g. ["arn:aws:iam::123456789012:role/platform-admins"])',
}


NO_ADMIN_WARNING = (
    "cluster.admin_principal_arns is empty: nobody can use kubectl on this cluster after "
    "deploy (only the kubectl handler has an access entry). List your IAM role or user ARNs "
    "there (README, 'Cluster access and kubectl')."
)


WORLD_OPEN_WARNING = (
    "cluster.public_access_cidrs includes 0.0.0.0/0: the Kubernetes API endpoint answers the "
    "whole internet (requests still need IAM authentication, but every API server flaw is "
    "exposed). List the ranges your operators and pipelines come from instead, or leave "
    "public_access_cidrs unset for a private endpoint (README, 'Cluster access and kubectl')."
)


def access_warnings(admin_principal_arns: list[str]) -> list[str]:
    """What synth should tell the user about cluster access (not errors: deploy still works)."""
    return [] if admin_principal_arns else [NO_ADMIN_WARNING]


def endpoint_warnings(public_access_cidrs: list[str] | None) -> list[str]:
    """What synth should tell the user about the API endpoint's reach."""
    return [WORLD_OPEN_WARNING] if "0.0.0.0/0" in (public_access_cidrs or []) else []
