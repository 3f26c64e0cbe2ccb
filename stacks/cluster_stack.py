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

from cdk_constructs.ami_release_check import AmiReleaseCheck, AmiReleaseCheckProps
from cdk_constructs.eks_cluster import EksCluster, EksClusterProps
from cdk_constructs.karpenter_controller import KarpenterController, KarpenterControllerProps
from cdk_constructs.karpenter_teardown import KarpenterTeardown, KarpenterTeardownProps
from cdk_constructs.multus_vpc import KARPENTER_DISCOVERY_TAG
from cdk_constructs.multus_workloads import MultusWorkloads, MultusWorkloadsProps
from cdk_constructs.system_node_group import DedicatedNodes, SystemNodeGroup, SystemNodeGroupProps
from charts.building_blocks import NodeTaint
from charts.cleartaints import ClearTaintsProps
from charts.karpenter_node_pool import KarpenterNodePoolProps
from charts.multus import MultusProps
from charts.multus_pod_ips import MultusPodIpsProps
from charts.network_attachments import (
    NetworkAttachment,
    NetworkAttachmentsProps,
    cni_binaries,
    cni_host_files,
    network_attachment_name,
    whereabouts_range_and_gateway,
)
from charts.sample_workloads import SampleWorkloadsProps, ZoneWorkload
from charts.whereabouts import WhereaboutsProps
from config import AppConfig
from config.images import ImageRef
from config.model import NODE_TERMINATION_MARGIN_MINUTES, MultusNetworkConfig
from node_bootstrap.iam import multus_eni_policy_statements
from node_bootstrap.node_prefix import (
    CNI_CONFIG_DIR as NODE_CNI_CONFIG_DIR,
)
from node_bootstrap.node_prefix import (
    NODE_PREFIX_CNI_PLUGINS,
    NodePrefixNetwork,
    cni_config_file_name,
)
from node_bootstrap.pod_ip_iam import multus_pod_ip_policy_statements
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    NETWORK_TAG_KEY,
    OWNER_TAG_KEY,
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
    """The EKS cluster, its system nodes, Karpenter and the in-cluster Multus components."""

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
                cluster_name=config.cluster_name,
                kubernetes_version=cluster_config.kubernetes_version,
                vpc_id=network.vpc.vpc_id,
                availability_zones=config.availability_zones,
                node_subnets=network.network.node_subnets,
                public_access_cidrs=cluster_config.public_access_cidrs,
                admin_principal_arns=cluster_config.admin_principal_arns,
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
                kubernetes_version=cluster_config.kubernetes_version,
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
                cluster_name=config.cluster_name,
                region=config.region,
                version=config.karpenter.version,
                namespace=config.karpenter.namespace,
                replicas=config.karpenter.replicas,
                controller_cpu=config.karpenter.controller_cpu,
                controller_memory=config.karpenter.controller_memory,
                controller_nodes=CONTROLLER_NODES,
                spot_service_linked_role=config.karpenter.spot_service_linked_role,
                # Karpenter must not count the Multus ENIs as pod ENIs (docs/node-capacity.md).
                reserved_enis=len(config.multus.networks),
                controller_image=config.images.karpenter_controller,
            ),
        )
        # The controller tolerates only the system nodes; CoreDNS must resolve for it.
        karpenter.release.node.add_dependency(system_nodes, eks_cluster.core_dns)
        self.karpenter_node_role = karpenter.node_role
        self.karpenter_release = karpenter.release
        self.karpenter_crds = karpenter.crds

        eni_policy = self._grant_multus_eni_management(config, network)
        self.multus = MultusWorkloads(
            self, "Multus", _multus_workloads_props(config, network, self)
        )
        # Runs in parallel with the cluster; only the NodePool waits for it.
        ami_check = AmiReleaseCheck(
            self,
            "AmiReleaseCheck",
            AmiReleaseCheckProps(
                kubernetes_version=cluster_config.kubernetes_version,
                ami_alias=config.node_pool.ami_alias,
                config_field="node_pool.ami_alias",
            ),
        )
        self.multus.node_pool.node.add_dependency(ami_check)
        self.teardown = KarpenterTeardown(
            self,
            "Teardown",
            KarpenterTeardownProps(
                cluster=self.cluster,
                cluster_name=config.cluster_name,
                node_subnets=network.network.node_subnets,
                cluster_tag_key=CLUSTER_TAG_KEY,
                eni_network_tag_key=NETWORK_TAG_KEY,
                timeout_minutes=config.cluster.teardown_timeout_minutes,
                force_after_minutes=config.cluster.teardown_timeout_minutes
                - NODE_TERMINATION_MARGIN_MINUTES,
            ),
        )
        # Deleted first: the drain needs the controller (and the system nodes it runs on), the
        # node role with its access entry and ENI policy, and the in-cluster charts.
        self.teardown.resource.node.add_dependency(
            karpenter, system_nodes, eni_policy, *self.multus.manifests
        )
        if config.extras.node_latency:
            self._node_latency_monitor(config.images.node_latency)

        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.cluster.cluster_name} "
            f"--region {self.region}",
        )
        CfnOutput(self, "InterruptionQueueName", value=karpenter.interruption.queue.queue_name)
        CfnOutput(self, "KarpenterNodeRoleName", value=self.karpenter_node_role.role_name)

    def _grant_multus_eni_management(self, config: AppConfig, network: NetworkStack) -> iam.Policy:
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
                    cluster_name=config.cluster_name,
                    subnet_arns=subnet_arns,
                    security_group_arns=[
                        self._ec2_arn(
                            "security-group", network.multus_security_group.security_group_id
                        )
                    ],
                ),
                *multus_pod_ip_policy_statements(
                    cluster_name=config.cluster_name, multus_subnet_arns=subnet_arns
                ),
            ],
        )
        arn_prefix = "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>"
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:network-interface/*]",
                reason="ENI IDs exist only after creation: CreateNetworkInterface and its "
                f"CreateTags need the request to tag the ENI {OWNER_TAG_KEY}=<cluster>; attach, "
                "detach, modify and delete need that tag on the ENI, and only the bootstrap "
                "sets it; the pod IP agent's assign and unassign need that tag and the ENI in "
                "a Multus subnet (ec2:Subnet).",
            ),
            Acknowledgment(
                id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{arn_prefix}:instance/*]",
                reason="Attach, detach and modify on instance/* match only the calling "
                "instance: ec2:SourceInstanceARN must equal the target instance's ARN.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeNetworkInterfaces (a re-run after an interrupted bootstrap "
                "reads an attachment ID; the pod IP agent's reconcile) and "
                "ec2:DescribeInstanceTypes (addresses per ENI) have no resource-level "
                "permissions; in this region only (aws:RequestedRegion).",
            ),
        )
        return policy

    def _ec2_arn(self, resource: str, resource_id: str) -> str:
        return self.format_arn(service="ec2", resource=resource, resource_name=resource_id)

    def _node_latency_monitor(self, image: ImageRef | None) -> None:
        self.cluster.add_helm_chart(
            "NodeLatencyForK8s",
            repository=NODE_LATENCY_CHART_REPOSITORY,
            chart="node-latency-for-k8s-chart",
            version=NODE_LATENCY_CHART_VERSION,
            release="node-latency-for-k8s",
            namespace="node-latency-for-k8s",
            create_namespace=True,
            # Prometheus metrics only: the CloudWatch exporter would need its own IAM role.
            # No IMDS: pods cannot reach it (hop limit 1); the IMDS-based timings are skipped.
            values={
                "env": [
                    {"name": "PROMETHEUS_METRICS", "value": "true"},
                    {"name": "CLOUDWATCH_METRICS", "value": "false"},
                    {"name": "NO_IMDS", "value": "true"},
                    {"name": "OUTPUT", "value": "markdown"},
                    {"name": "TIMEOUT", "value": "250"},
                ],
                **({"image": image.helm_values()} if image else {}),
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
            cluster_name=config.cluster_name,
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
            node_prefix=_node_prefix_networks(config, attachments),
        )
    )
    pool = config.node_pool
    images = config.images
    nads = [
        _network_attachment(a, networks_by_name[a.network])
        for a in attachments
        if networks_by_name[a.network].ip_management == "whereabouts"
    ]
    node_prefix_files = [
        cni_config_file_name(index + 1)
        for index, n in enumerate(networks)
        if n.ip_management == "node_prefix"
    ]
    pod_ips = _pod_ips_props(attachments, networks_by_name, images.multus_pod_ips.reference)
    return MultusWorkloadsProps(
        cluster=stack.cluster,
        karpenter_release=stack.karpenter_release,
        multus=MultusProps(
            region=config.region, image=images.multus.reference if images.multus else None
        ),
        whereabouts=WhereaboutsProps(
            image=images.whereabouts.reference,
            reconciler_node_labels=CONTROLLER_NODES.labels,
            reconciler_tolerations=[
                NodeTaint(
                    key=CONTROLLER_NODES.key, value=CONTROLLER_NODES.value, effect="NoSchedule"
                )
            ],
        ),
        network_attachments=NetworkAttachmentsProps(
            namespace=config.multus.nad_namespace,
            attachments=nads,
            node_local_names=[
                network_attachment_name(a.network, a.availability_zone)
                for a in attachments
                if networks_by_name[a.network].ip_management == "node_prefix"
            ],
            create_namespace=config.multus.creates_nad_namespace,
        ),
        clear_taints=ClearTaintsProps(
            image=images.cleartaints.reference,
            cni_binaries=sorted(
                {*cni_binaries(nads), *(NODE_PREFIX_CNI_PLUGINS if node_prefix_files else ())}
            ),
            cni_files=[
                *cni_host_files(nads),
                *(f"{NODE_CNI_CONFIG_DIR}/{name}" for name in node_prefix_files),
            ],
            wait_for_pod_ips=pod_ips is not None,
        ),
        pod_ips=pod_ips,
        node_pool=KarpenterNodePoolProps(
            zones=config.availability_zones,
            node_role_name=stack.karpenter_node_role.role_name,
            subnet_selector_tags={KARPENTER_DISCOVERY_TAG: config.cluster_name},
            security_group_selector_tags={EKS_CLUSTER_SG_TAG: config.cluster_name},
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
            termination_grace_period=pool.termination_grace_period,
        ),
        sample_workloads=SampleWorkloadsProps(
            namespace=config.multus.nad_namespace,
            image=images.sample_workloads.reference,
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
    attachments: Sequence[MultusAttachment],
    networks: Mapping[str, MultusNetworkConfig],
    image: str,
) -> MultusPodIpsProps | None:
    """Per Multus interface of a whereabouts network, the reservations its pods' addresses come
    from (one per AZ); None when no network assigns addresses per pod."""
    ranges: dict[str, list[str]] = {}
    for attachment in attachments:
        network = networks[attachment.network]
        if network.ip_management == "whereabouts":
            ranges.setdefault(network.device_name, []).append(attachment.reservation_cidr)
    return MultusPodIpsProps(image=image, interfaces=ranges) if ranges else None


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


def _node_prefix_networks(
    config: AppConfig, attachments: list[MultusAttachment]
) -> list[NodePrefixNetwork]:
    """What the node bootstrap needs per (AZ, network) in node_prefix mode."""
    indexes = {n.name: index + 1 for index, n in enumerate(config.multus.networks)}
    networks = {n.name: n for n in config.multus.networks}
    return [
        NodePrefixNetwork(
            availability_zone=a.availability_zone,
            interface_name=networks[a.network].device_name,
            device_index=indexes[a.network],
            prefix_count=config.prefixes_per_node(networks[a.network]),
            cni_network_name=network_attachment_name(a.network, a.availability_zone),
            subnet_cidr=a.subnet_cidr,
            reservation_cidr=a.reservation_cidr,
            ipvlan_mode=networks[a.network].ipvlan_mode,
        )
        for a in attachments
        if networks[a.network].ip_management == "node_prefix"
    ]
