"""ClusterStack: EKS, the system node group, managed add-ons and the Karpenter controller.

Public attributes for whoever adds cdk8s charts and the NodePool:
- cluster: the aws_eks_v2 Cluster (add_cdk8s_chart, add_manifest);
- karpenter_node_role: the IAM role EC2NodeClass.spec.role names;
- karpenter_release: the controller's Helm release; NodePool/EC2NodeClass manifests depend on it;
- karpenter_crds: the karpenter-crd Helm release (the CRDs those manifests need).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Acknowledgment, CfnOutput, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.eks_cluster import EksCluster, EksClusterProps
from cdk_constructs.karpenter_controller import KarpenterController, KarpenterControllerProps
from cdk_constructs.multus_vpc import KARPENTER_DISCOVERY_TAG
from cdk_constructs.multus_workloads import MultusWorkloads, MultusWorkloadsProps
from cdk_constructs.system_node_group import DedicatedNodes, SystemNodeGroup, SystemNodeGroupProps
from charts.cleartaints import ClearTaintsProps
from charts.karpenter_node_pool import KarpenterNodePoolProps
from charts.multus import MultusProps
from charts.multus_pod_ips import MultusPodIpsProps
from charts.network_attachments import (
    NetworkAttachment,
    NetworkAttachmentsProps,
    network_attachment_name,
    whereabouts_range_and_gateway,
)
from charts.sample_workloads import SampleWorkloadsProps, ZoneWorkload
from charts.whereabouts import WhereaboutsProps
from config import AppConfig
from config.model import MultusNetworkConfig
from node_bootstrap.iam import multus_eni_policy_statements
from node_bootstrap.pod_ip_iam import multus_pod_ip_policy_statements
from node_bootstrap.renderer import (
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
    render_user_data,
)
from stacks.base import ConfiguredAzStack
from stacks.network_stack import MultusAttachment, NetworkStack

# The seed's marker of the nodes that run the Karpenter controller and CoreDNS.
CONTROLLER_NODES = DedicatedNodes(key="karpenter.sh/controller", value="true")
# EKS tags the cluster security group with the cluster name; Karpenter nodes join it.
EKS_CLUSTER_SG_TAG = "aws:eks:cluster-name"
NODE_LATENCY_CHART_REPOSITORY = "oci://public.ecr.aws/g4k0u1s2/node-latency-for-k8s-chart"
NODE_LATENCY_CHART_VERSION = "v0.1.10"


class ClusterStack(ConfiguredAzStack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        network: NetworkStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope, construct_id, availability_zones=config.availability_zones, **kwargs
        )
        cluster_config = config.cluster
        eks_cluster = EksCluster(
            self,
            "Eks",
            EksClusterProps(
                cluster_name=cluster_config.name,
                kubernetes_version=cluster_config.kubernetes_version,
                vpc_id=network.vpc.vpc_id,
                availability_zones=config.availability_zones,
                node_subnets=network.network.node_subnets,
                public_access_cidrs=cluster_config.public_access_cidrs,
                admin_principal_arn=cluster_config.admin_principal_arn,
                core_dns_tolerations=[CONTROLLER_NODES.toleration],
            ),
        )
        self.cluster = eks_cluster.cluster

        nodes = cluster_config.system_node_group
        system_nodes = SystemNodeGroup(
            self,
            "SystemNodes",
            SystemNodeGroupProps(
                cluster=eks_cluster.cluster_ref,
                subnets=network.network.node_subnets,
                instance_types=nodes.instance_types,
                min_size=nodes.min_size,
                desired_size=nodes.desired_size,
                max_size=nodes.max_size,
                disk_size_gib=nodes.disk_size_gib,
                dedicated=CONTROLLER_NODES,
            ),
        )
        # Nodes only become Ready with pod networking; CoreDNS only becomes healthy on nodes.
        system_nodes.node.add_dependency(*eks_cluster.node_networking_addons)
        eks_cluster.core_dns.node.add_dependency(system_nodes)

        karpenter = KarpenterController(
            self,
            "Karpenter",
            KarpenterControllerProps(
                cluster=eks_cluster.cluster_ref,
                cluster_name=cluster_config.name,
                version=config.karpenter.version,
                namespace=config.karpenter.namespace,
                replicas=config.karpenter.replicas,
                controller_cpu=config.karpenter.controller_cpu,
                controller_memory=config.karpenter.controller_memory,
                controller_nodes=CONTROLLER_NODES,
                spot_service_linked_role=config.karpenter.spot_service_linked_role,
            ),
        )
        # The controller tolerates only the system nodes; CoreDNS must resolve for it.
        karpenter.release.node.add_dependency(system_nodes, eks_cluster.core_dns)
        self.karpenter_node_role = karpenter.node_role
        self.karpenter_release = karpenter.release
        self.karpenter_crds = karpenter.crds

        self._grant_multus_eni_management(config, network)
        self.multus = MultusWorkloads(
            self, "Multus", _multus_workloads_props(config, network, self)
        )
        if config.extras.node_latency:
            self._node_latency_monitor()

        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.cluster.cluster_name} "
            f"--region {self.region}",
        )
        CfnOutput(self, "InterruptionQueueName", value=karpenter.interruption.queue.queue_name)
        CfnOutput(self, "KarpenterNodeRoleName", value=self.karpenter_node_role.role_name)

    def _grant_multus_eni_management(self, config: AppConfig, network: NetworkStack) -> None:
        """The node bootstrap creates and attaches the Multus ENIs with the node's role; the
        multus-pod-ips agent (host network) assigns pod addresses to them with the same role."""
        subnet_arns = [
            self._ec2_arn("subnet", a.subnet.subnet_id) for a in network.multus_attachments
        ]
        policy = iam.Policy(
            self,
            "MultusEniPolicy",
            roles=[self.karpenter_node_role],
            statements=[
                *multus_eni_policy_statements(
                    cluster_name=config.cluster.name,
                    subnet_arns=subnet_arns,
                    security_group_arns=[
                        self._ec2_arn(
                            "security-group", network.multus_security_group.security_group_id
                        )
                    ],
                ),
                *multus_pod_ip_policy_statements(
                    cluster_name=config.cluster.name, multus_subnet_arns=subnet_arns
                ),
            ],
        )
        arn_prefix = "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>"
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:network-interface/*]",
                reason="ENI IDs exist only after creation: creating requires the cluster tag in "
                "the request, every later action requires it on the ENI (ec2:ResourceTag).",
            ),
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:instance/*]",
                reason="Karpenter launches the instances; attaching is limited to instances "
                "carrying this cluster's eks:eks-cluster-name tag.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeNetworkInterfaces (re-run after an interrupted bootstrap, "
                "pod IP reconcile) and ec2:DescribeInstanceTypes (addresses per ENI) have no "
                "resource-level permissions; limited to the region.",
            ),
        )

    def _ec2_arn(self, resource: str, resource_id: str) -> str:
        return self.format_arn(service="ec2", resource=resource, resource_name=resource_id)

    def _node_latency_monitor(self) -> None:
        self.cluster.add_helm_chart(
            "NodeLatencyForK8s",
            repository=NODE_LATENCY_CHART_REPOSITORY,
            chart="node-latency-for-k8s-chart",
            version=NODE_LATENCY_CHART_VERSION,
            release="node-latency-for-k8s",
            namespace="node-latency-for-k8s",
            create_namespace=True,
            # Prometheus metrics only: the CloudWatch exporter would need its own IAM role.
            values={
                "env": [
                    {"name": "PROMETHEUS_METRICS", "value": "true"},
                    {"name": "CLOUDWATCH_METRICS", "value": "false"},
                    {"name": "OUTPUT", "value": "markdown"},
                    {"name": "TIMEOUT", "value": "250"},
                ]
            },
        )


def _multus_workloads_props(
    config: AppConfig, network: NetworkStack, stack: ClusterStack
) -> MultusWorkloadsProps:
    networks = config.multus.networks
    attachments = network.multus_attachments
    networks_by_name = {n.name: n for n in networks}
    user_data = render_user_data(
        NodeBootstrapProps(
            cluster_name=config.cluster.name,
            interfaces=[
                MultusInterface(
                    network=n.name, interface_name=n.device_name, device_index=index + 1
                )
                for index, n in enumerate(networks)
            ],
            placements={
                az: AzPlacement(
                    subnet_ids=[
                        a.subnet.subnet_id for a in attachments if a.availability_zone == az
                    ],
                    security_group_ids=[network.multus_security_group.security_group_id],
                )
                for az in config.availability_zones
            },
        )
    )
    pool = config.node_pool
    return MultusWorkloadsProps(
        cluster=stack.cluster,
        karpenter_release=stack.karpenter_release,
        multus=MultusProps(region=config.region),
        whereabouts=WhereaboutsProps(),
        network_attachments=NetworkAttachmentsProps(
            namespace=config.multus.nad_namespace,
            attachments=[_network_attachment(a, networks_by_name[a.network]) for a in attachments],
        ),
        clear_taints=ClearTaintsProps(),
        pod_ips=_pod_ips_props(attachments, networks_by_name),
        node_pool=KarpenterNodePoolProps(
            zones=config.availability_zones,
            node_role_name=stack.karpenter_node_role.role_name,
            subnet_selector_tags={KARPENTER_DISCOVERY_TAG: config.cluster.name},
            security_group_selector_tags={EKS_CLUSTER_SG_TAG: config.cluster.name},
            user_data=user_data,
            ami_alias=pool.ami_alias,
            root_volume_size=f"{pool.root_volume_gib}Gi",
            instance_categories=pool.instance_categories,
            instance_cpus=[str(cpus) for cpus in pool.instance_cpus],
            instance_families=pool.instance_families,
            capacity_types=pool.capacity_types,
            consolidate_after=pool.consolidate_after,
            cpu_limit=pool.cpu_limit,
            memory_limit=pool.memory_limit,
        ),
        sample_workloads=SampleWorkloadsProps(
            namespace=config.multus.nad_namespace,
            workloads=[
                ZoneWorkload(
                    availability_zone=az,
                    network_attachment_names=[
                        network_attachment_name(n.name, az) for n in networks
                    ],
                )
                for az in config.availability_zones
            ],
        )
        if config.extras.sample_workloads
        else None,
    )


def _pod_ips_props(
    attachments: Sequence[MultusAttachment], networks: Mapping[str, MultusNetworkConfig]
) -> MultusPodIpsProps:
    """Per Multus interface, the reservations its pods' addresses come from (one per AZ)."""
    ranges: dict[str, list[str]] = {}
    for attachment in attachments:
        interface = networks[attachment.network].device_name
        ranges.setdefault(interface, []).append(attachment.reservation_cidr)
    return MultusPodIpsProps(interfaces=ranges)


def _network_attachment(
    attachment: MultusAttachment, network: MultusNetworkConfig
) -> NetworkAttachment:
    whereabouts_range, gateway = whereabouts_range_and_gateway(
        attachment.subnet_cidr, attachment.reservation_cidr
    )
    return NetworkAttachment(
        name=network_attachment_name(attachment.network, attachment.availability_zone),
        master_interface=network.device_name,
        ipvlan_mode=network.ipvlan_mode,
        whereabouts_range=whereabouts_range,
        gateway=gateway,
    )
