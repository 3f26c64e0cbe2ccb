"""The managed node group that runs only system pods and the Karpenter controller.

Karpenter must not run on nodes it provisions itself, so its controller (and CoreDNS, which the
cluster needs before any Karpenter node exists) live on this small fixed group. The group is
labelled and tainted; only pods that tolerate the taint land here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

ROOT_DEVICE = "/dev/xvda"  # AL2023 EKS AMIs boot from this device
# One hop: host processes and hostNetwork pods reach IMDS, other pods (one hop further) do not,
# so no pod can take the node role's credentials.
IMDS_HOP_LIMIT = 1
# What kubelet needs to join and pull images. No AmazonEKS_CNI_Policy: the VPC CNI has its own
# role (EKS Pod Identity), so pods on these nodes cannot reach ENI rights through the node.
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")


@dataclass(frozen=True)
class DedicatedNodes:
    """A node label and a NoSchedule taint with the same key=value, reserving nodes for the pods
    that tolerate the taint and select the label."""

    key: str
    value: str

    @property
    def labels(self) -> dict[str, str]:
        return {self.key: self.value}

    @property
    def taint(self) -> eks.TaintSpec:
        return eks.TaintSpec(effect=eks.TaintEffect.NO_SCHEDULE, key=self.key, value=self.value)

    @property
    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": "NoSchedule"}

    @property
    def node_selector_requirement(self) -> dict[str, Any]:
        return {"key": self.key, "operator": "In", "values": [self.value]}


@dataclass(frozen=True)
class SystemNodeGroupProps:
    """The managed system node group: subnets, instance types, sizes, root disk and dedication.

    kubernetes_version: the group's version, the cluster's: bumping it rolls the group
    (EKS UpdateNodegroupVersion) right after the control plane, with no replacement."""

    cluster: eks.ICluster
    kubernetes_version: str
    subnets: Sequence[ec2.ISubnet]
    instance_types: Sequence[str]
    min_size: int
    desired_size: int
    max_size: int
    root_volume_gib: int
    dedicated: DedicatedNodes


class SystemNodeGroup(Construct):
    """AL2023 managed node group with IMDSv2 only and an encrypted gp3 root volume."""

    def __init__(self, scope: Construct, construct_id: str, props: SystemNodeGroupProps) -> None:
        super().__init__(scope, construct_id)
        # No AMI and no user data: EKS picks the AL2023 AMI and writes the nodeadm config.
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            require_imdsv2=True,
            http_put_response_hop_limit=IMDS_HOP_LIMIT,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        props.root_volume_gib,
                        encrypted=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        delete_on_termination=True,
                    ),
                )
            ],
        )
        # Optional only for imported templates; one defined here always has an ID.
        assert self.launch_template.launch_template_id is not None
        node_role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="System node group (Karpenter controller, CoreDNS)",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_POLICIES
            ],
        )
        self.nodegroup = eks.Nodegroup(
            self,
            "Nodegroup",
            cluster=props.cluster,
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            instance_types=[ec2.InstanceType(name) for name in props.instance_types],
            min_size=props.min_size,
            desired_size=props.desired_size,
            max_size=props.max_size,
            subnets=ec2.SubnetSelection(subnets=list(props.subnets)),
            node_role=node_role,
            labels=props.dedicated.labels,
            taints=[props.dedicated.taint],
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.launch_template_id,
                version=self.launch_template.latest_version_number,
            ),
        )
        # aws_eks_v2's Nodegroup has no version prop; without Version the group keeps the
        # version it was created with when the cluster is upgraded.
        nodegroup_resource = self.nodegroup.node.default_child
        assert isinstance(nodegroup_resource, eks.CfnNodegroup)
        nodegroup_resource.version = props.kubernetes_version
        Validations.of(node_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                "policy/AmazonEKSWorkerNodePolicy]",
                reason="AmazonEKSWorkerNodePolicy on the system nodes' role: kubelet's EC2 "
                "Describe* calls and eks-auth:AssumeRoleForPodIdentity for the Pod Identity "
                "agent, the minimum AWS documents for an EKS node.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                "policy/AmazonEC2ContainerRegistryPullOnly]",
                reason="AmazonEC2ContainerRegistryPullOnly on the system nodes' role: kubelet "
                "pulls the add-on images (VPC CNI, kube-proxy, CoreDNS) from ECR; read-only.",
            ),
        )
