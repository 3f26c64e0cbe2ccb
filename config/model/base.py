"""Shared pieces of the config model: AWS limits, CIDR and quantity types, the strict base model."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    model_validator,
)
from pydantic.config import JsonDict

from config import instance_types, patterns
from config.custom_resource_timing import LONGEST_TEARDOWN_TIMEOUT_MINUTES
from config.messages import UNIT_KEY, UNIT_ONE_KEY, refuse_surrounding_whitespace

# AWS keeps the first four addresses and the last one of every subnet for itself.
AWS_RESERVED_HEAD = 4
AWS_RESERVED_TAIL = 1

# The largest gp3 volume (EC2 API reference, EBS block device VolumeSize: gp3 1-16,384 GiB).
GP3_MAX_GIB = 16384
# Subnet and VPC CIDR blocks: AWS allows /16 (65,536 addresses) to /28 (16 addresses).
MIN_PREFIX_LENGTH, MAX_PREFIX_LENGTH = 16, 28

KubernetesVersion = Literal["1.33", "1.34", "1.35", "1.36"]
# Namespaces every cluster has; any other nad_namespace is created by the app.
EXISTING_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# IPv4 ranges a VPC cannot take (special-purpose blocks, RFC 6890).
UNUSABLE_VPC_RANGES: dict[str, ipaddress.IPv4Network] = {
    "'this network'": ipaddress.IPv4Network("0.0.0.0/8"),
    "loopback": ipaddress.IPv4Network("127.0.0.0/8"),
    "link-local, where the instance metadata service lives": ipaddress.IPv4Network(
        "169.254.0.0/16"
    ),
    "multicast": ipaddress.IPv4Network("224.0.0.0/4"),
    "reserved": ipaddress.IPv4Network("240.0.0.0/4"),
}

# CloudFormation waits at most an hour for a custom resource, whatever the Provider's own
# timeout; the teardown's ServiceTimeout is its bound plus the framework's margin.
TEARDOWN_TIMEOUT_LIMIT_MINUTES = LONGEST_TEARDOWN_TIMEOUT_MINUTES
# Between a NodeClaim's drain deadline and its instance being gone: EC2 shutdown and Karpenter's
# finalizers take a few minutes; the teardown bound must leave room for them.
NODE_TERMINATION_MARGIN_MINUTES = 10


ACCOUNT_PATTERN = patterns.ACCOUNT_ID.regex
_K8S_NAME = patterns.KUBERNETES_NAME.regex
_LINUX_IFNAME = patterns.LINUX_INTERFACE_NAME.regex
_CPU_QUANTITY = patterns.CPU_QUANTITY.regex
_MEMORY_QUANTITY = patterns.MEMORY_QUANTITY.regex
_DURATION_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _ipv4_network(value: str) -> str:
    refuse_surrounding_whitespace(value)
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(
            f"{value!r} is not an IPv4 CIDR block with its host bits unset "
            f"(for example 10.0.4.0/24): {error}"
        ) from None
    return value


Cidr = Annotated[str, AfterValidator(_ipv4_network)]


def _ipv4_or_ipv6_network(value: str) -> str:
    refuse_surrounding_whitespace(value)
    if ":" not in value:
        return _ipv4_network(value)
    try:
        network = ipaddress.IPv6Network(value, strict=True)
    except ValueError as error:
        raise ValueError(
            f"{value!r} is not an IPv6 CIDR block with its host bits unset "
            f"(for example 2001:db8::/32): {error}"
        ) from None
    # One spelling per block (RFC 5952: lowercase, zeros compressed), so "0::/0" is the default
    # route it is, and rules and routes compare, deduplicate and render as EC2 shows them.
    return str(network)


#: A security-group rule's peer: IPv4 (10.0.0.0/16) or IPv6 (::/0).
RuleCidr = Annotated[str, AfterValidator(_ipv4_or_ipv6_network)]


def _subnet_size(value: str) -> str:
    if not MIN_PREFIX_LENGTH <= net(value).prefixlen <= MAX_PREFIX_LENGTH:
        raise ValueError(
            f"{value}: AWS subnets are /{MIN_PREFIX_LENGTH} to /{MAX_PREFIX_LENGTH} "
            f"(for example 10.0.4.0/24)"
        )
    return value


SubnetCidr = Annotated[Cidr, AfterValidator(_subnet_size)]


def _gp3_size(value: int) -> int:
    if value > GP3_MAX_GIB:
        raise ValueError(f"{value} GiB: a gp3 volume holds at most {GP3_MAX_GIB} GiB (16 TiB)")
    return value


Gp3SizeGib = Annotated[int, AfterValidator(_gp3_size)]


def _instance_type(value: str) -> str:
    refuse_surrounding_whitespace(value)
    if value not in instance_types.ec2_instance_types():
        raise ValueError(
            f"{value!r} is not an EC2 instance type known to the EC2 API "
            "(check the spelling, for example m6i.large)"
        )
    return value


InstanceType = Annotated[str, AfterValidator(_instance_type)]


def unit(many: str, one: str | None = None) -> JsonDict:
    """A number field's json_schema_extra naming what it counts (`one` for 1, default `many`):
    the messages of its bounds and the reference page give the number with it."""
    return {UNIT_KEY: many, UNIT_ONE_KEY: one or many}


def duration_seconds(duration: str) -> int:
    """Seconds of a Karpenter duration such as 1h30m."""
    return sum(
        int(amount) * _DURATION_UNIT_SECONDS[unit]
        for amount, unit in re.findall(r"([0-9]+)([smh])", duration)
    )


def net(cidr: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(cidr)


class StrictModel(BaseModel):
    """Base of every config section: unknown keys (typos) are rejected, values are immutable
    and taken only as their field's type (config/coercion.py, STRICT_SECTION)."""

    # config/coercion.py's STRICT_SECTION, spelled out for mypy's pydantic plugin (frozen).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    # Old key -> what replaced it: an old key fails with this text instead of "extra input".
    renamed_keys: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: object) -> object:
        if isinstance(data, dict):
            for old, new in cls.renamed_keys.items():
                if old in data:
                    raise ValueError(f"{old} was replaced by {new}")
        return data
