"""ClusterStack: EKS, the system node group, managed add-ons and the Karpenter controller.

Public attributes for whoever adds cdk8s charts and the NodePool:
- cluster: the aws_eks_v2 Cluster (add_cdk8s_chart, add_manifest);
- karpenter_node_role: the IAM role EC2NodeClass.spec.role names;
- karpenter_release: the controller's Helm release; NodePool/EC2NodeClass manifests depend on it;
- karpenter_crds: the karpenter-crd Helm release (the CRDs those manifests need).

The config-to-props mapping lives in stacks/cluster_props.py; this class only composes.
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import Annotations, CfnOutput
from constructs import Construct

from cdk_constructs.ami_release_check import AmiReleaseCheck
from cdk_constructs.cluster_workloads import ClusterWorkloads
from cdk_constructs.eks_cluster import EksCluster
from cdk_constructs.iam_policy_size import check_role_inline_policies
from cdk_constructs.karpenter_controller import KarpenterController
from cdk_constructs.karpenter_teardown import KarpenterTeardown
from cdk_constructs.multus_eni_sweeper import MultusEniSweeper
from cdk_constructs.system_node_group import SystemNodeGroup
from config import AppConfig
from node_bootstrap.renderer import render_user_data
from stacks import cluster_props
from stacks.base import ConfiguredAzStack
from stacks.multus_eni_policy import grant_multus_eni_management
from stacks.network_digest import record_network_digest
from stacks.network_stack import NetworkStack
from stacks.node_latency import add_node_latency_monitor

NETWORK_WITHOUT_POOL_WARNING_ID = "karpenter-multus:networkWithoutNodePool"


def ami_release_check_id(index: int, ami_alias: str) -> str:
    """The first alias's check keeps the seed's ID; the others are named after their alias."""
    return (
        "AmiReleaseCheck"
        if index == 0
        else f"AmiReleaseCheck{re.sub('[^A-Za-z0-9]', '', ami_alias)}"
    )


class ClusterStack(ConfiguredAzStack):
    """The EKS cluster with Karpenter and the in-cluster Multus components, on NetworkStack."""

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
        record_network_digest(self, network)
        node_subnets = network.node_subnets
        # A Kubernetes version bump with an ami_alias that has no image for it must fail before
        # UpdateClusterVersion starts: EKS cannot stop an upgrade once started nor downgrade, so
        # CloudFormation could not roll the cluster back. One check per distinct alias; the
        # first keeps the seed's construct ID.
        ami_checks = [
            AmiReleaseCheck(self, ami_release_check_id(index, props.ami_alias), props)
            for index, props in enumerate(cluster_props.ami_release_check_props(config))
        ]
        eks_cluster = EksCluster(
            self,
            "Eks",
            cluster_props.eks_cluster_props(
                config, vpc_id=network.vpc.vpc_id, node_subnets=node_subnets
            ),
        )
        self.cluster = eks_cluster.cluster
        eks_cluster.cfn_cluster.node.add_dependency(*(check.resource for check in ami_checks))

        system_nodes = SystemNodeGroup(
            self,
            "SystemNodes",
            cluster_props.system_node_group_props(
                config, cluster=eks_cluster.cluster_ref, node_subnets=node_subnets
            ),
        )
        # Nodes only become Ready with pod networking; CoreDNS only becomes healthy on nodes.
        system_nodes.node.add_dependency(*eks_cluster.node_networking_addons)
        eks_cluster.core_dns.node.add_dependency(system_nodes)

        karpenter = KarpenterController(
            self,
            "Karpenter",
            cluster_props.karpenter_controller_props(config, cluster=eks_cluster.cluster_ref),
        )
        # The controller tolerates only the system nodes; CoreDNS must resolve for it.
        karpenter.release.node.add_dependency(system_nodes, eks_cluster.core_dns)
        self.karpenter_node_role = karpenter.node_role
        self.karpenter_release = karpenter.release
        self.karpenter_crds = karpenter.crds

        attachments = network.multus_attachments
        eni_policy = grant_multus_eni_management(
            self,
            self.karpenter_node_role,
            cluster_name=config.cluster_name,
            multus_subnet_ids=[a.subnet.subnet_id for a in attachments],
            dual_stack_subnet_ids=[
                a.subnet.subnet_id for a in attachments if a.plan.ipv6 is not None
            ],
            pod_route_table_ids=[
                a.subnet.route_table.route_table_id for a in attachments if a.plan.pod_routed_ranges
            ],
            security_group_ids=[
                group.security_group_id for group in network.multus_security_groups.values()
            ],
        )
        node_pools = [
            cluster_props.node_pool_props(
                config,
                pool,
                node_role_name=self.karpenter_node_role.role_name,
                user_data=render_user_data(
                    cluster_props.node_bootstrap_props(config, attachments, pool)
                )
                if config.pool_plan(pool)
                else None,
            )
            for pool in config.node_pools
        ]
        for warning in [] if config.acknowledges("network-without-node-pool") else config.warnings:
            # Shown by `cdk deploy`; app.py prints the same on every synth.
            Annotations.of(self).add_warning_v2(NETWORK_WITHOUT_POOL_WARNING_ID, warning)
        self.workloads = ClusterWorkloads(
            self,
            "Multus",
            cluster_props.cluster_workloads_props(
                config,
                attachments,
                cluster=self.cluster,
                karpenter_release=self.karpenter_release,
                node_pools=node_pools,
            ),
        )
        # The user-data names each network's security group; the node role must be allowed to
        # use every one of them before a node of the new EC2NodeClass boots.
        for node_pool in self.workloads.node_pools:
            node_pool.node.add_dependency(*ami_checks, eni_policy)
        self.teardown = KarpenterTeardown(
            self,
            "Teardown",
            cluster_props.karpenter_teardown_props(
                config,
                cluster=self.cluster,
                node_subnets=node_subnets,
                api_clients=eks_cluster.api_clients,
            ),
        )
        # Deleted first: the drain needs the controller (and the system nodes it runs on), the
        # node role with its access entry and ENI policy, and the in-cluster charts.
        self.teardown.resource.node.add_dependency(
            karpenter, system_nodes, eni_policy, *self.workloads.manifests
        )
        MultusEniSweeper(self, "MultusEniSweeper", cluster_name=config.cluster_name)
        if config.extras.node_latency:
            add_node_latency_monitor(self.cluster, config.images.node_latency)

        CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {self.cluster.cluster_name} "
            f"--region {self.region}",
        )
        CfnOutput(self, "InterruptionQueueName", value=karpenter.interruption.queue.queue_name)
        CfnOutput(self, "KarpenterNodeRoleName", value=self.karpenter_node_role.role_name)
        # Last: every statement the node role gets is in place.
        check_role_inline_policies(
            self,
            self.karpenter_node_role,
            "the Multus ENI policy names each Multus subnet (networks x availability_zones), "
            "each network's security group and the route tables of networks with "
            "pod_routed_ranges: attach fewer networks or AZs",
        )
