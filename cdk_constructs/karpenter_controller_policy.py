"""IAM permissions of the Karpenter controller, scoped to one cluster and one region.

The same statements (actions, resources and conditions) as the controller policies of Karpenter
v1.14's getting-started CloudFormation template: instances, fleets, launch templates and
instance profiles may only be created with this cluster's ownership tags and only touched when
they carry them, iam:PassRole covers the node role alone, and reads are limited to the region.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam


@dataclass(frozen=True)
class ControllerScope:
    """What the permissions are scoped to. cluster_name must be a literal: it is part of
    condition keys (aws:ResourceTag/kubernetes.io/cluster/<name>), which cannot be tokens."""

    partition: str
    region: str
    account: str
    cluster_name: str
    cluster_arn: str
    node_role_arn: str
    interruption_queue_arn: str

    def ec2_arn(self, resource: str, account: str = "*") -> str:
        return f"arn:{self.partition}:ec2:{self.region}:{account}:{resource}"

    @property
    def instance_profiles_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:instance-profile/*"

    @property
    def owned(self) -> str:
        return f"kubernetes.io/cluster/{self.cluster_name}"


# Resources an instance launch reads but does not own (AMIs and snapshots have no account).
LAUNCH_INPUTS = ["security-group/*", "subnet/*", "capacity-reservation/*", "placement-group/*"]
# Resources a launch creates and tags.
LAUNCH_OUTPUTS = [
    "fleet/*",
    "instance/*",
    "volume/*",
    "network-interface/*",
    "launch-template/*",
    "spot-instances-request/*",
]
LAUNCH_ACTIONS = ["ec2:RunInstances", "ec2:CreateFleet"]
REGIONAL_READS = [
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
]


_LAUNCH_INPUT = (
    "launch inputs that EC2NodeClass selectors pick at runtime; RunInstances/CreateFleet only "
    "reference them, within this region (as in Karpenter's reference policy)"
)
_LAUNCH_OUTPUT = (
    "IDs of instances, fleets, volumes, ENIs and launch templates are unknown before Karpenter "
    "creates them; every statement on them requires this cluster's ownership tags "
    "(kubernetes.io/cluster/<name>=owned, eks:eks-cluster-name, karpenter.sh/nodepool)"
)
# Why each wildcard resource of the statements below cannot be narrower (cdk-nag IAM5).
WILDCARD_REASONS: dict[str, str] = {
    "image/*": "AMIs are resolved at runtime from the EC2NodeClass alias and owned by AWS; "
    "launches only read them, within this region",
    "snapshot/*": "AMI snapshots are owned by AWS and only read by launches, within this region",
    **dict.fromkeys(LAUNCH_INPUTS, _LAUNCH_INPUT),
    **dict.fromkeys(LAUNCH_OUTPUTS, _LAUNCH_OUTPUT),
    "instance-profile/*": "Karpenter creates one instance profile per EC2NodeClass at runtime; "
    "create, tag, role changes and delete require this cluster's and region's tags, the rest "
    "is GetInstanceProfile (read-only)",
    "parameter/aws/service/*": "read-only access to AWS's public parameters (EKS AMI IDs)",
    "*": "Describe*, pricing:GetProducts and iam:ListInstanceProfiles have no resource-level "
    "permissions; Describe* is limited to this region (aws:RequestedRegion) and the zonal-shift "
    "read to this cluster's ARN (condition)",
}


def wildcard_reason(resource: str) -> str:
    """The reason for a wildcard resource, keyed by its resource part (after the last ':')."""
    return WILDCARD_REASONS[resource.rsplit(":", 1)[-1]]


def controller_statements(scope: ControllerScope) -> list[iam.PolicyStatement]:
    return [
        *_node_lifecycle(scope),
        *_instance_profiles(scope),
        *_cluster_and_queue(scope),
        *_discovery(scope),
    ]


def _node_lifecycle(s: ControllerScope) -> list[iam.PolicyStatement]:
    request_tags_owned = {
        f"aws:RequestTag/{s.owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": s.cluster_name,
    }
    resource_owned = {
        "StringEquals": {f"aws:ResourceTag/{s.owned}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    return [
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceAccessActions",
            actions=LAUNCH_ACTIONS,
            resources=[
                f"arn:{s.partition}:ec2:{s.region}::image/*",
                f"arn:{s.partition}:ec2:{s.region}::snapshot/*",
                *(s.ec2_arn(resource) for resource in LAUNCH_INPUTS),
            ],
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2LaunchTemplateAccessActions",
            actions=LAUNCH_ACTIONS,
            resources=[s.ec2_arn("launch-template/*")],
            conditions=resource_owned,
        ),
        iam.PolicyStatement(
            sid="AllowScopedEC2InstanceActionsWithTags",
            actions=[*LAUNCH_ACTIONS, "ec2:CreateLaunchTemplate"],
            resources=[s.ec2_arn(resource) for resource in LAUNCH_OUTPUTS],
            conditions={
                "StringEquals": request_tags_owned,
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceCreationTagging",
            actions=["ec2:CreateTags"],
            resources=[s.ec2_arn(resource) for resource in LAUNCH_OUTPUTS],
            conditions={
                "StringEquals": {
                    **request_tags_owned,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedResourceTagging",
            actions=["ec2:CreateTags"],
            resources=[s.ec2_arn("instance/*")],
            conditions={
                **resource_owned,
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": s.cluster_name},
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                },
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedDeletion",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=[s.ec2_arn("instance/*"), s.ec2_arn("launch-template/*")],
            conditions=resource_owned,
        ),
    ]


def _instance_profiles(s: ControllerScope) -> list[iam.PolicyStatement]:
    region_tag = "topology.kubernetes.io/region"
    request_tags = {
        f"aws:RequestTag/{s.owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": s.cluster_name,
        f"aws:RequestTag/{region_tag}": s.region,
    }
    resource_tags = {
        f"aws:ResourceTag/{s.owned}": "owned",
        f"aws:ResourceTag/{region_tag}": s.region,
    }
    node_class_request = {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    node_class_resource = {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    return [
        iam.PolicyStatement(
            sid="AllowPassingInstanceRole",
            actions=["iam:PassRole"],
            resources=[s.node_role_arn],
            conditions={
                "StringEquals": {
                    "iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
                }
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileCreationActions",
            actions=["iam:CreateInstanceProfile"],
            resources=[s.instance_profiles_arn],
            conditions={"StringEquals": request_tags, "StringLike": node_class_request},
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileTagActions",
            actions=["iam:TagInstanceProfile"],
            resources=[s.instance_profiles_arn],
            conditions={
                "StringEquals": {**resource_tags, **request_tags},
                "StringLike": {**node_class_resource, **node_class_request},
            },
        ),
        iam.PolicyStatement(
            sid="AllowScopedInstanceProfileActions",
            actions=[
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            resources=[s.instance_profiles_arn],
            conditions={"StringEquals": resource_tags, "StringLike": node_class_resource},
        ),
    ]


def _cluster_and_queue(s: ControllerScope) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid="AllowAPIServerEndpointDiscovery",
            actions=["eks:DescribeCluster"],
            resources=[s.cluster_arn],
        ),
        iam.PolicyStatement(
            sid="AllowInterruptionQueueActions",
            actions=["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            resources=[s.interruption_queue_arn],
        ),
        iam.PolicyStatement(
            sid="AllowZonalShiftStatusReadOnly",
            actions=["arc-zonal-shift:GetManagedResource"],
            resources=["*"],
            conditions={"StringEquals": {"arc-zonal-shift:ResourceIdentifier": s.cluster_arn}},
        ),
    ]


def _discovery(s: ControllerScope) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid="AllowRegionalReadActions",
            actions=REGIONAL_READS,
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": s.region}},
        ),
        iam.PolicyStatement(
            sid="AllowSSMReadActions",
            actions=["ssm:GetParameter"],
            resources=[f"arn:{s.partition}:ssm:{s.region}::parameter/aws/service/*"],
        ),
        iam.PolicyStatement(
            sid="AllowPricingReadActions", actions=["pricing:GetProducts"], resources=["*"]
        ),
        iam.PolicyStatement(
            sid="AllowUnscopedInstanceProfileListAction",
            actions=["iam:ListInstanceProfiles"],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="AllowInstanceProfileReadActions",
            actions=["iam:GetInstanceProfile"],
            resources=[s.instance_profiles_arn],
        ),
    ]
