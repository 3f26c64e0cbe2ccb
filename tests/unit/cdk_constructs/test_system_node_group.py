"""SystemNodeGroup on a bare Stack: IMDSv2 with one hop, an encrypted gp3 root volume, the
cluster's Kubernetes version, and the label + NoSchedule taint that reserve the nodes."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template

from cdk_constructs.system_node_group import DedicatedNodes, SystemNodeGroup, SystemNodeGroupProps

KUBERNETES_VERSION = "1.33"
ROOT_VOLUME_GIB = 40
DEDICATED = DedicatedNodes(key="example.com/role", value="system")
SUBNET_IDS = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]


@pytest.fixture(scope="module")
def template() -> Template:
    stack = cdk.Stack(
        cdk.App(), "Bare", env=cdk.Environment(account="111111111111", region="us-west-2")
    )
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-west-2a"]
    )
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="bare", vpc=vpc)
    subnets = [
        ec2.Subnet.from_subnet_attributes(
            stack, f"Subnet{i}", subnet_id=subnet_id, availability_zone=f"us-west-2{'ab'[i]}"
        )
        for i, subnet_id in enumerate(SUBNET_IDS)
    ]
    SystemNodeGroup(
        stack,
        "System",
        SystemNodeGroupProps(
            cluster=cluster,
            kubernetes_version=KUBERNETES_VERSION,
            subnets=subnets,
            instance_types=["c5.large", "m5.large"],
            min_size=1,
            desired_size=2,
            max_size=3,
            root_volume_gib=ROOT_VOLUME_GIB,
            dedicated=DEDICATED,
        ),
    )
    return Template.from_stack(stack)


def test_launch_template_requires_imdsv2_with_one_hop(template: Template) -> None:
    template.resource_count_is("AWS::EC2::LaunchTemplate", 1)
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {"MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}}
            )
        },
    )


def test_root_volume_is_encrypted_gp3_of_the_given_size(template: Template) -> None:
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {
                    "BlockDeviceMappings": [
                        {
                            # AL2023 EKS AMIs boot from /dev/xvda.
                            "DeviceName": "/dev/xvda",
                            "Ebs": Match.object_like(
                                {
                                    "Encrypted": True,
                                    "VolumeType": "gp3",
                                    "VolumeSize": ROOT_VOLUME_GIB,
                                    "DeleteOnTermination": True,
                                }
                            ),
                        }
                    ]
                }
            )
        },
    )


def test_launch_template_leaves_ami_and_user_data_to_eks(template: Template) -> None:
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"ImageId": Match.absent()})},
    )
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": Match.object_like({"UserData": Match.absent()})},
    )


def test_nodegroup_follows_the_cluster_version(template: Template) -> None:
    template.resource_count_is("AWS::EKS::Nodegroup", 1)
    template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "ClusterName": "bare",
            "Version": KUBERNETES_VERSION,
            "AmiType": "AL2023_x86_64_STANDARD",
            "InstanceTypes": ["c5.large", "m5.large"],
            "ScalingConfig": {"MinSize": 1, "DesiredSize": 2, "MaxSize": 3},
            "Subnets": SUBNET_IDS,
            "LaunchTemplate": Match.object_like({"Id": Match.any_value()}),
        },
    )


def test_nodes_are_labelled_and_tainted_no_schedule(template: Template) -> None:
    template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "Labels": {"example.com/role": "system"},
            "Taints": [{"Effect": "NO_SCHEDULE", "Key": "example.com/role", "Value": "system"}],
        },
    )


def test_dedicated_nodes_toleration_matches_the_taint() -> None:
    assert DEDICATED.toleration == {
        "key": "example.com/role",
        "operator": "Equal",
        "value": "system",
        "effect": "NoSchedule",
    }
    assert DEDICATED.node_selector_requirement == {
        "key": "example.com/role",
        "operator": "In",
        "values": ["system"],
    }


def test_node_role_has_no_cni_policy(template: Template) -> None:
    roles = template.find_resources("AWS::IAM::Role")
    (role,) = roles.values()
    policies = str(role["Properties"]["ManagedPolicyArns"])
    assert "AmazonEKSWorkerNodePolicy" in policies
    assert "AmazonEC2ContainerRegistryPullOnly" in policies
    # The VPC CNI has its own Pod Identity role: ENI rights must not be reachable via nodes.
    assert "AmazonEKS_CNI_Policy" not in policies
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": Match.object_like(
                {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {"Principal": {"Service": "ec2.amazonaws.com"}, "Effect": "Allow"}
                            )
                        ]
                    )
                }
            )
        },
    )
