"""IAM statements the node role needs for the Multus ENI bootstrap, scoped to one cluster."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from node_bootstrap.renderer import CLUSTER_TAG_KEY


def multus_eni_policy_statements(
    *, cluster_name: str, subnet_arns: Sequence[str], security_group_arns: Sequence[str]
) -> list[iam.PolicyStatement]:
    """Least-privilege statements for multus_eni_bootstrap.sh.

    ENIs can only be created in the Multus subnets with the Multus security groups and must
    carry the cluster tag from the start; every later action needs that tag on the ENI and,
    where an instance is involved, on the instance (Karpenter tags its instances with it).
    """
    if not subnet_arns:
        raise ValueError("subnet_arns: at least one Multus subnet ARN is required")
    if not security_group_arns:
        raise ValueError("security_group_arns: at least one security group ARN is required")

    def ec2_arn(resource: str) -> str:
        return f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}/*"

    network_interfaces = ec2_arn("network-interface")
    requests_cluster_tag = {"StringEquals": {f"aws:RequestTag/{CLUSTER_TAG_KEY}": cluster_name}}
    carries_cluster_tag = {"StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG_KEY}": cluster_name}}
    return [
        iam.PolicyStatement(
            sid="CreateMultusEniInMultusSubnets",
            actions=["ec2:CreateNetworkInterface"],
            resources=[*subnet_arns, *security_group_arns],
        ),
        iam.PolicyStatement(
            sid="CreateMultusEniTaggedForCluster",
            actions=["ec2:CreateNetworkInterface"],
            resources=[network_interfaces],
            conditions=requests_cluster_tag,
        ),
        iam.PolicyStatement(
            sid="TagMultusEniOnCreate",
            actions=["ec2:CreateTags"],
            resources=[network_interfaces],
            conditions={
                "StringEquals": {
                    "ec2:CreateAction": "CreateNetworkInterface",
                    **requests_cluster_tag["StringEquals"],
                }
            },
        ),
        iam.PolicyStatement(
            sid="ManageClusterMultusEnis",
            actions=[
                "ec2:AttachNetworkInterface",
                "ec2:DetachNetworkInterface",
                "ec2:ModifyNetworkInterfaceAttribute",
                "ec2:DeleteNetworkInterface",
            ],
            resources=[network_interfaces],
            conditions=carries_cluster_tag,
        ),
        iam.PolicyStatement(
            sid="AttachMultusEniToClusterInstances",
            actions=[
                "ec2:AttachNetworkInterface",
                "ec2:DetachNetworkInterface",
                "ec2:ModifyNetworkInterfaceAttribute",
            ],
            resources=[ec2_arn("instance")],
            conditions=carries_cluster_tag,
        ),
        # Only a re-run after an interrupted run reads an attachment ID back; EC2 Describe*
        # actions do not support resource-level permissions.
        iam.PolicyStatement(
            sid="ReadMultusEniAttachment",
            actions=["ec2:DescribeNetworkInterfaces"],
            resources=["*"],
        ),
    ]
