"""Text patterns of config fields, each with the plain words that explain it.

A pattern mismatch is reported with these words and an example instead of the regular
expression (config/messages.py looks the pattern up here). To add a pattern-validated field,
define its PlainPattern here and use `.regex` in the Field; a test fails for any field whose
pattern has no entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from config.interface_names import INTERFACE_NAME_PATTERN


@dataclass(frozen=True)
class PlainPattern:
    """A regular expression and what it allows, in words, with a valid example."""

    regex: str
    allowed: str
    example: str


ACCOUNT_ID = PlainPattern(
    r"^\d{12}$", "an AWS account ID: exactly 12 digits, quoted in YAML", '"123456789012"'
)
KUBERNETES_NAME = PlainPattern(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    "a Kubernetes name: lowercase letters, digits and '-', starting and ending with a letter or "
    "digit",
    "multus-networks",
)
LINUX_INTERFACE_NAME = PlainPattern(
    INTERFACE_NAME_PATTERN,
    "a Linux interface name: a lowercase letter, then up to 14 lowercase letters or digits",
    "multus1",
)
CPU_QUANTITY = PlainPattern(
    r"^([1-9][0-9]*m|[1-9][0-9]*(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)$",
    "a positive Kubernetes CPU quantity: cores (1, 0.5) or millicores (500m)",
    "500m",
)
CPU_LIST = PlainPattern(
    r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$",
    "a Linux CPU list: CPU numbers and ranges (low-high) separated by commas, no spaces",
    '"0-1" or "0,2"',
)
MEMORY_QUANTITY = PlainPattern(
    r"^[1-9][0-9]*(Mi|Gi)$", "a positive whole number of Mi or Gi", "512Mi or 2Gi"
)
APP_NAME = PlainPattern(
    r"^[a-zA-Z][-a-zA-Z0-9]{0,40}$",
    "1 to 41 letters, digits and '-', starting with a letter (it prefixes the stack names)",
    "karpenterwithmultus",
)
CLUSTER_NAME = PlainPattern(
    r"^[a-zA-Z][-a-zA-Z0-9]{0,99}$",
    "an EKS cluster name: 1 to 100 letters, digits and '-', starting with a letter",
    "eks-karpenterwithmultus",
)
ADMIN_PRINCIPAL_ARN = PlainPattern(
    r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:.+$",
    "the ARN of an IAM role or user",
    "arn:aws:iam::123456789012:role/eks-admins",
)
RELEASE_VERSION = PlainPattern(
    r"^\d+\.\d+\.\d+$", "a release number major.minor.patch, without a leading v", "1.14.1"
)
DURATION = PlainPattern(
    r"^\d+(s|m|h)$", "a whole number of seconds, minutes or hours (s, m or h)", "120s or 5m"
)
KARPENTER_DURATION = PlainPattern(
    r"^([0-9]+(s|m|h))+$",
    "a Karpenter duration: whole numbers of hours, minutes or seconds (h, m, s), combinable",
    "15m or 1h30m",
)
NOT_READY_BOUND = PlainPattern(
    r"^(Never|([0-9]+(s|m|h))+)$",
    "a duration (whole hours, minutes or seconds, combinable) or Never",
    "20m or Never",
)


def duration_seconds(duration: str) -> int:
    """Seconds of a KARPENTER_DURATION or NOT_READY_BOUND value (0 for Never)."""
    factors = {"h": 3600, "m": 60, "s": 1}
    return sum(int(n) * factors[unit] for n, unit in re.findall(r"(\d+)([hms])", duration))


# The karpenter.sh/v1 NodePool CRD's patterns (Karpenter v1.14 karpenter.sh_nodepools.yaml).
EXPIRE_AFTER = PlainPattern(
    r"^(([0-9]+(s|m|h))+|Never)$",
    "a Karpenter duration (whole hours, minutes or seconds, combinable) or Never",
    "720h or Never",
)
BUDGET_NODES = PlainPattern(
    r"^((100|[0-9]{1,2})%|[0-9]+)$",
    "a count of nodes or a percentage of the pool's nodes, 0% to 100%",
    '"1" or "10%"',
)
BUDGET_DURATION = PlainPattern(
    r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
    "whole hours or minutes, or hours and minutes (no seconds: cron has none)",
    "22h or 1h30m",
)
AMI_ALIAS = PlainPattern(
    r"^al2023@v\d{8}$",
    "al2023@v followed by the 8-digit date of an AL2023 AMI release (never @latest)",
    "al2023@v20261112",
)
CONNECTION_ARN = PlainPattern(
    r"^arn:aws[a-z-]*:(codestar-connections|codeconnections):[a-z0-9-]+:\d{12}:"
    r"connection/[-a-f0-9]+$",
    "the ARN of a CodeConnections (or CodeStar) connection to your Git provider",
    "arn:aws:codeconnections:us-west-2:111111111111:connection/0f4c2b8e-1d3a-4e5f-9a7b-2c6d8e0f1a3b",
)
REPOSITORY = PlainPattern(
    r"^[\w.-]+/[\w.-]+$", "a repository as owner/name", "example-telco/karpenter-multus-eks"
)
ENVIRONMENT_NAME = PlainPattern(
    r"^[a-zA-Z][-a-zA-Z0-9]{0,30}$",
    "1 to 31 letters, digits and '-', starting with a letter",
    "staging",
)
PIPELINE_NAME = PlainPattern(
    r"^[a-zA-Z][-a-zA-Z0-9]{0,60}$",
    "1 to 61 letters, digits and '-', starting with a letter",
    "karpenter-multus-pipeline",
)
IMAGE_REPOSITORY = PlainPattern(
    r"^[a-z0-9]([a-z0-9._:-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+$",
    "an image repository: registry host (optionally :port), then one or more lowercase path "
    "parts separated by '/'",
    "123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirror/whereabouts",
)
IMAGE_TAG = PlainPattern(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$",
    "an image tag: up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
    "v0.9.4",
)
IMAGE_DIGEST = PlainPattern(
    r"^sha256:[0-9a-f]{64}$",
    "an image digest: sha256: and 64 lowercase hex digits",
    "sha256:" + "0" * 64,
)
# EC2 API Reference, IpRange / UserIdGroupPair: Description.
SECURITY_GROUP_RULE_DESCRIPTION = PlainPattern(
    r"^[a-zA-Z0-9 ._:/()#,@\[\]+=&;{}!$*-]{0,255}$",
    "a security-group rule description: up to 255 letters, digits, spaces and "
    "._-:/()#,@[]+=&;{}!$*",
    "N2 (SCTP) from the RAN",
)


def _ec2_resource_id(prefix: str, what: str) -> PlainPattern:
    # EC2 resource IDs are the type's prefix and 8 or 17 lowercase hex digits (EC2 user guide,
    # "Resource IDs": the longer IDs since 2018, the short ones of older resources).
    return PlainPattern(
        rf"^{prefix}-([0-9a-f]{{8}}|[0-9a-f]{{17}})$",
        f"the ID of {what}: {prefix}- and 8 or 17 lowercase hex digits",
        f"{prefix}-0123456789abcdef0",
    )


VPC_ID = _ec2_resource_id("vpc", "a VPC")
SUBNET_ID = _ec2_resource_id("subnet", "a subnet")
NAT_GATEWAY_ID = _ec2_resource_id("nat", "a NAT gateway")
TRANSIT_GATEWAY_ID = _ec2_resource_id("tgw", "a transit gateway")
VPN_GATEWAY_ID = _ec2_resource_id("vgw", "a virtual private gateway")
NETWORK_INTERFACE_ID = _ec2_resource_id("eni", "a network interface")

PLAIN_PATTERNS: dict[str, PlainPattern] = {
    pattern.regex: pattern
    for pattern in (
        ACCOUNT_ID,
        SECURITY_GROUP_RULE_DESCRIPTION,
        TRANSIT_GATEWAY_ID,
        VPN_GATEWAY_ID,
        NETWORK_INTERFACE_ID,
        KUBERNETES_NAME,
        LINUX_INTERFACE_NAME,
        CPU_QUANTITY,
        CPU_LIST,
        MEMORY_QUANTITY,
        APP_NAME,
        CLUSTER_NAME,
        ADMIN_PRINCIPAL_ARN,
        RELEASE_VERSION,
        DURATION,
        KARPENTER_DURATION,
        NOT_READY_BOUND,
        EXPIRE_AFTER,
        BUDGET_NODES,
        BUDGET_DURATION,
        AMI_ALIAS,
        CONNECTION_ARN,
        REPOSITORY,
        ENVIRONMENT_NAME,
        PIPELINE_NAME,
        IMAGE_REPOSITORY,
        IMAGE_TAG,
        IMAGE_DIGEST,
        VPC_ID,
        SUBNET_ID,
        NAT_GATEWAY_ID,
    )
}
