"""IAM statements the node role needs for the Multus ENI bootstrap, and nothing more.

What the bootstrap touches, and how each statement family pins it down:
- create: ENIs only in the Multus subnets, only with the Multus security groups (any of them:
  IAM authorizes each subnet and security group of the request on its own, so it cannot tie a
  network's group to its subnet; the bootstrap does), and only when the request tags them with
  OWNER_TAG_KEY=<cluster> and INSTANCE_TAG_KEY=<the calling instance's ID> (tags only at
  creation). Nothing else sets the owner tag, so it marks exactly the ENIs the bootstrap made
  (Karpenter's primary ENIs carry the cluster tag, never this one), and no node can write
  another instance's ID;
- owned ENIs: attach, detach, modify and delete only ENIs that carry the owner tag and the
  calling instance's ID (a node never touches another node's Multus ENIs);
- instance side: attach, detach and modify only on the calling instance (ec2:SourceInstanceARN
  must be the target instance's ARN), so a node can attach ENIs to itself and to no other node;
- failure tag: a node whose bootstrap failed tags its own instance with FAILURE_TAG_KEY (the
  reason) and with no other key, on no other instance;
- read: DescribeNetworkInterfaces (no resource-level permissions), in this region only.

One function per family so that new actions (e.g. secondary IP assignment on Multus ENIs) join
the family whose scope they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from node_bootstrap.renderer import FAILURE_TAG_KEY, INSTANCE_TAG_KEY, OWNER_TAG_KEY

#: Resolved by IAM per request: the ID of the instance the request targets.
TARGET_INSTANCE_ID = "${ec2:InstanceID}"
#: Resolved per request: the instance an ENI's tag names, in the request (create) or on the ENI.
REQUESTED_OWNER_INSTANCE_ID = f"${{aws:RequestTag/{INSTANCE_TAG_KEY}}}"
OWNER_INSTANCE_ID = f"${{aws:ResourceTag/{INSTANCE_TAG_KEY}}}"


@dataclass(frozen=True)
class MultusEniScope:
    """What the bootstrap may touch: this cluster's tag value, the Multus subnets and groups."""

    cluster_name: str
    subnet_arns: Sequence[str]
    security_group_arns: Sequence[str]

    def ec2_arn(self, resource: str) -> str:
        return ec2_arn(resource)

    @property
    def network_interfaces(self) -> str:
        return self.ec2_arn("network-interface/*")


def ec2_arn(resource: str) -> str:
    return f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}"


def multus_eni_policy_statements(
    *, cluster_name: str, subnet_arns: Sequence[str], security_group_arns: Sequence[str]
) -> list[iam.PolicyStatement]:
    """Least-privilege statements for multus_eni_bootstrap.sh (see the module docstring)."""
    if not subnet_arns:
        raise ValueError("subnet_arns: at least one Multus subnet ARN is required")
    if not security_group_arns:
        raise ValueError("security_group_arns: at least one security group ARN is required")
    scope = MultusEniScope(cluster_name, subnet_arns, security_group_arns)
    return [
        *create_statements(scope),
        owned_eni_statement(scope),
        calling_instance_statement(scope),
        failure_tag_statement(scope),
        read_statement(),
    ]


def create_statements(scope: MultusEniScope) -> list[iam.PolicyStatement]:
    requests_owner_tag = {f"aws:RequestTag/{OWNER_TAG_KEY}": scope.cluster_name}
    return [
        iam.PolicyStatement(
            sid="CreateMultusEniInMultusSubnets",
            actions=["ec2:CreateNetworkInterface"],
            resources=[*scope.subnet_arns, *scope.security_group_arns],
        ),
        iam.PolicyStatement(
            sid="CreateMultusEniTaggedAsOwned",
            actions=["ec2:CreateNetworkInterface"],
            resources=[scope.network_interfaces],
            conditions={
                "StringEquals": {
                    **requests_owner_tag,
                    **calling_instance_is(REQUESTED_OWNER_INSTANCE_ID),
                }
            },
        ),
        iam.PolicyStatement(
            sid="TagMultusEniOnlyWhileCreating",
            actions=["ec2:CreateTags"],
            resources=[scope.network_interfaces],
            conditions={
                "StringEquals": {
                    "ec2:CreateAction": "CreateNetworkInterface",
                    **requests_owner_tag,
                    **calling_instance_is(REQUESTED_OWNER_INSTANCE_ID),
                }
            },
        ),
    ]


def owned_eni_statement(scope: MultusEniScope) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid="ManageOwnedMultusEnis",
        actions=[
            "ec2:AttachNetworkInterface",
            "ec2:DetachNetworkInterface",
            "ec2:ModifyNetworkInterfaceAttribute",
            "ec2:DeleteNetworkInterface",
        ],
        resources=[scope.network_interfaces],
        conditions={
            "StringEquals": {
                f"aws:ResourceTag/{OWNER_TAG_KEY}": scope.cluster_name,
                **calling_instance_is(OWNER_INSTANCE_ID),
            }
        },
    )


def calling_instance_is(instance_id: str) -> dict[str, str]:
    """A condition (its key and value): the instance whose credentials sign the request is
    `instance_id` (a policy variable). Compared with StringEquals where the variable is a tag:
    ArnEquals would read a `*` in a tag a node wrote itself as a wildcard (IAM user guide,
    condition operators: the ARN operators match wildcards in each component).

    ec2:SourceInstanceARN is in the request context of calls made with an instance profile's
    credentials (Service Authorization Reference, Amazon EC2, condition keys), and a
    single-valued condition key can be a policy variable (IAM user guide, "IAM policy
    elements: Variables and tags"): an unresolved one (no such tag) matches nothing."""
    return {"ec2:SourceInstanceARN": ec2_arn(f"instance/{instance_id}")}


def _is_calling_instance(scope: MultusEniScope) -> dict[str, dict[str, str]]:
    """The target instance (instance/*) is the one whose credentials sign the request."""
    return {"ArnEquals": calling_instance_is(TARGET_INSTANCE_ID)}


def calling_instance_statement(scope: MultusEniScope) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid="AttachMultusEnisToCallingInstanceOnly",
        actions=[
            "ec2:AttachNetworkInterface",
            "ec2:DetachNetworkInterface",
            "ec2:ModifyNetworkInterfaceAttribute",
        ],
        resources=[scope.ec2_arn("instance/*")],
        conditions=_is_calling_instance(scope),
    )


def failure_tag_statement(scope: MultusEniScope) -> iam.PolicyStatement:
    # aws:TagKeys lists every key of the request (ForAllValues: no other key); ForAllValues
    # also holds for a request without tags, hence the Null check that the key is there.
    return iam.PolicyStatement(
        sid="TagCallingInstanceWithBootstrapFailureOnly",
        actions=["ec2:CreateTags"],
        resources=[scope.ec2_arn("instance/*")],
        conditions={
            **_is_calling_instance(scope),
            "ForAllValues:StringEquals": {"aws:TagKeys": [FAILURE_TAG_KEY]},
            "Null": {f"aws:RequestTag/{FAILURE_TAG_KEY}": "false"},
        },
    )


def read_statement() -> iam.PolicyStatement:
    # Only a re-run after an interrupted run reads an attachment ID back.
    return iam.PolicyStatement(
        sid="ReadNetworkInterfacesInRegion",
        actions=["ec2:DescribeNetworkInterfaces"],
        resources=["*"],
        conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
    )
