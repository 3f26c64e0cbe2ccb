"""ClusterStack: EKS, the system node group, managed add-ons and the Karpenter controller.

Public attributes for whoever adds cdk8s charts and the NodePool:
- cluster: the aws_eks_v2 Cluster (add_cdk8s_chart, add_manifest);
- karpenter_node_role: the IAM role EC2NodeClass.spec.role names;
- karpenter_release: the controller's Helm release; NodePool/EC2NodeClass manifests depend on it;
- karpenter_crds: the karpenter-crd Helm release (the CRDs those manifests need).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput
from constructs import Construct

from cdk_constructs.eks_cluster import EksCluster, EksClusterProps
from cdk_constructs.karpenter_controller import KarpenterController, KarpenterControllerProps
from cdk_constructs.system_node_group import DedicatedNodes, SystemNodeGroup, SystemNodeGroupProps
from config import AppConfig
from stacks.base import ConfiguredAzStack
from stacks.network_stack import NetworkStack

# The seed's marker of the nodes that run the Karpenter controller and CoreDNS.
CONTROLLER_NODES = DedicatedNodes(key="karpenter.sh/controller", value="true")


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

        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.cluster.cluster_name} "
            f"--region {self.region}",
        )
        CfnOutput(self, "InterruptionQueueName", value=karpenter.interruption.queue.queue_name)
        CfnOutput(self, "KarpenterNodeRoleName", value=self.karpenter_node_role.role_name)
