"""Config -> props of every construct and chart ClusterStack composes: pure functions.

They take the AppConfig and the few deploy-time values (IDs, tokens, constructs) that only exist
once an earlier construct is built, and return the typed props; ClusterStack only wires them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.ami_release_check import AmiReleaseCheckProps
from cdk_constructs.api_clients_security_group import ApiClientsSecurityGroup
from cdk_constructs.cluster_workloads import ClusterWorkloadsProps
from cdk_constructs.eks_cluster import EksClusterProps
from cdk_constructs.karpenter_controller import KarpenterControllerProps
from cdk_constructs.karpenter_teardown import KarpenterTeardownProps
from cdk_constructs.multus_vpc import KARPENTER_DISCOVERY_TAG
from cdk_constructs.system_node_group import DedicatedNodes, SystemNodeGroupProps
from charts.cleartaints import ClearTaintsNodes, ClearTaintsProps
from charts.karpenter_node_pool import DisruptionBudget, KarpenterNodePoolProps
from charts.multus import MultusProps
from charts.multus_pod_ips import MultusPodIpsProps, PodIpsNodes
from charts.multus_pod_ips_monitoring import MonitoringProps
from charts.nad_cni_configs import (
    Ipv6Range,
    NetworkAttachment,
    cni_binaries,
    cni_host_files,
    whereabouts_range_and_gateway,
)
from charts.network_attachments import NetworkAttachmentsProps
from charts.sample_workloads import SampleWorkloadsProps, ZoneWorkload
from charts.whereabouts import WhereaboutsProps
from config import AppConfig
from config.model import NODE_TERMINATION_MARGIN_MINUTES, NodePoolConfig
from config.network_plan import (
    NetworkPlan,
    NetworkPlanRow,
    network_attachment_name,
    networks_in_order,
)
from config.node_bootstrap_plan import NodeBootstrapProps
from config.node_bootstrap_plan import node_bootstrap_props as plan_bootstrap_props
from config.node_labels import (
    KARPENTER_NODE_LABEL_KEY,
    KARPENTER_NODE_LABEL_VALUE,
    KARPENTER_NODEPOOL_LABEL,
    MULTUS_NOT_READY_TAINT,
    NETWORK_LABEL_VALUE,
    NodeTaint,
    network_label,
)
from node_bootstrap.host_device import HOST_DEVICE_CNI_PLUGINS, host_device_config_file_name
from node_bootstrap.node_prefix import CNI_CONFIG_DIR as NODE_CNI_CONFIG_DIR
from node_bootstrap.node_prefix import NODE_PREFIX_CNI_PLUGINS, cni_config_file_name
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from stacks.network_stack import MultusAttachment

# The seed's marker of the nodes that run the Karpenter controller and CoreDNS.
CONTROLLER_NODES = DedicatedNodes(key="karpenter.sh/controller", value="true")
# EKS tags the cluster security group with the cluster name; Karpenter nodes join it.
EKS_CLUSTER_SG_TAG = "aws:eks:cluster-name"


def eks_cluster_props(
    config: AppConfig, *, vpc_id: str, node_subnets: Sequence[ec2.ISubnet]
) -> EksClusterProps:
    return EksClusterProps(
        cluster_name=config.cluster_name,
        kubernetes_version=config.cluster.kubernetes_version,
        vpc_id=vpc_id,
        availability_zones=config.availability_zones,
        node_subnets=node_subnets,
        control_plane_subnets=[
            subnet
            for subnet in node_subnets
            if subnet.availability_zone in config.control_plane_zones
        ],
        public_access_cidrs=config.cluster.public_access_cidrs,
        admin_principal_arns=config.cluster.admin_principal_arns,
        core_dns_tolerations=[CONTROLLER_NODES.toleration],
        addon_versions=config.cluster.pinned_addon_versions,
        control_plane_log_retention=logs.RetentionDays[config.cluster.control_plane_log_retention],
        keep_control_plane_logs=config.logs.keep_audit_logs_on_destroy,
        warn_without_admins=not config.acknowledges("no-cluster-admins"),
    )


def system_node_group_props(
    config: AppConfig, *, cluster: eks.ICluster, node_subnets: Sequence[ec2.ISubnet]
) -> SystemNodeGroupProps:
    nodes = config.cluster.system_node_group
    return SystemNodeGroupProps(
        cluster=cluster,
        kubernetes_version=config.cluster.kubernetes_version,
        subnets=node_subnets,
        instance_types=nodes.instance_types,
        min_size=nodes.min_size,
        desired_size=nodes.desired_size,
        max_size=nodes.max_size,
        root_volume_gib=nodes.root_volume_gib,
        dedicated=CONTROLLER_NODES,
    )


def karpenter_controller_props(
    config: AppConfig, *, cluster: eks.ICluster
) -> KarpenterControllerProps:
    karpenter = config.karpenter
    return KarpenterControllerProps(
        cluster=cluster,
        cluster_name=config.cluster_name,
        region=config.region,
        version=karpenter.version,
        namespace=karpenter.namespace,
        replicas=karpenter.replicas,
        controller_cpu=karpenter.controller_cpu,
        controller_memory=karpenter.controller_memory,
        controller_nodes=CONTROLLER_NODES,
        spot_service_linked_role=karpenter.spot_service_linked_role,
        # Karpenter must not count the Multus ENIs as pod ENIs; the setting is global, so it is
        # the most any pool attaches (docs/node-capacity.md).
        reserved_enis=config.reserved_enis,
        node_overlay=config.node_overlay_needed,
        controller_image=config.images.karpenter_controller,
    )


def ami_release_check_props(config: AppConfig) -> list[AmiReleaseCheckProps]:
    """One check per distinct ami_alias of the pools, in node_pools order; its message names
    every pool that pins it."""
    pools: dict[str, list[str]] = {}
    for pool in config.node_pools:
        pools.setdefault(pool.ami_alias, []).append(f"{config.pool_path(pool)}.ami_alias")
    return [
        AmiReleaseCheckProps(
            kubernetes_version=config.cluster.kubernetes_version,
            ami_alias=alias,
            config_field=", ".join(fields),
        )
        for alias, fields in pools.items()
    ]


def karpenter_teardown_props(
    config: AppConfig,
    *,
    cluster: eks.Cluster,
    node_subnets: Sequence[ec2.ISubnet],
    api_clients: ApiClientsSecurityGroup,
) -> KarpenterTeardownProps:
    timeout = config.cluster.teardown_timeout_minutes
    return KarpenterTeardownProps(
        cluster=cluster,
        cluster_name=config.cluster_name,
        node_subnets=node_subnets,
        api_clients=api_clients,
        cluster_tag_key=CLUSTER_TAG_KEY,
        eni_network_tag_key=NETWORK_TAG_KEY,
        timeout_minutes=timeout,
        force_after_minutes=timeout - NODE_TERMINATION_MARGIN_MINUTES,
    )


def node_bootstrap_props(
    config: AppConfig, attachments: Sequence[MultusAttachment], pool: NodePoolConfig
) -> NodeBootstrapProps:
    """A pool's user-data's data: each of its networks' interface at the device index its nodes
    use and, per AZ, those networks' Multus subnets and security groups, and its node profile."""
    by_subnet = {(a.plan.network, a.plan.availability_zone): a for a in attachments}

    def attachment(row: NetworkPlanRow) -> MultusAttachment:
        return by_subnet[(row.network, row.availability_zone)]

    return plan_bootstrap_props(
        config.cluster_name,
        config.pool_plan(pool),
        subnet_id=lambda row: attachment(row).subnet.subnet_id,
        security_group_id=lambda row: attachment(row).security_group.security_group_id,
        node_profile=pool.planned_node_profile(),
    )


def pool_taints(pool: NodePoolConfig) -> list[NodeTaint]:
    return [NodeTaint(key=t.key, value=t.value, effect=t.effect) for t in pool.taints]


def pool_node_selector(pool: NodePoolConfig) -> dict[str, str]:
    """The labels of a pool's nodes that per-pool DaemonSets select (karpenter.sh/nodepool is
    Karpenter's own label of the NodePool a node belongs to)."""
    return {
        KARPENTER_NODE_LABEL_KEY: KARPENTER_NODE_LABEL_VALUE,
        KARPENTER_NODEPOOL_LABEL: pool.name,
    }


def node_pool_props(
    config: AppConfig, pool: NodePoolConfig, *, node_role_name: str, user_data: str | None
) -> KarpenterNodePoolProps:
    """A pool's NodePool and EC2NodeClass; user_data None for a pool without networks."""
    networks = networks_in_order(config.pool_plan(pool))
    return KarpenterNodePoolProps(
        node_pool_name=pool.name,
        node_class_name=pool.name,
        labels={
            **{network_label(row.network): NETWORK_LABEL_VALUE for row in networks},
            **pool.labels,
        },
        startup_taint=MULTUS_NOT_READY_TAINT if networks else None,
        taints=pool_taints(pool),
        weight=pool.weight,
        zones=config.availability_zones,
        node_role_name=node_role_name,
        subnet_selector_terms=node_subnet_selector_terms(config),
        security_group_selector_tags={EKS_CLUSTER_SG_TAG: config.cluster_name},
        user_data=user_data,
        ami_alias=pool.ami_alias,
        root_volume_size=f"{pool.root_volume_gib}Gi",
        instance_categories=pool.instance_categories,
        instance_cpus=[str(cpus) for cpus in pool.instance_cpus],
        instance_families=pool.instance_families,
        capacity_types=pool.capacity_types,
        consolidate_after=pool.disruption.consolidate_after,
        consolidation_policy=pool.disruption.consolidation_policy,
        expire_after=pool.disruption.expire_after,
        budgets=[
            DisruptionBudget(
                nodes=budget.nodes,
                reasons=budget.reasons or (),
                schedule=budget.schedule,
                duration=budget.duration,
            )
            for budget in pool.disruption.budgets
        ],
        cpu_limit=pool.cpu_limit,
        memory_limit=pool.memory_limit,
        termination_grace_period=pool.termination_grace_period,
        extended_resources=pool.extended_resources,
        kubelet=pool.karpenter_kubelet,
    )


def node_subnet_selector_terms(config: AppConfig) -> list[dict[str, Any]]:
    """Karpenter's subnetSelectorTerms of the node subnets: the discovery tag the network stack
    puts on the subnets it creates, or the IDs of an existing VPC's node subnets, which the app
    never tags (EC2NodeClass CRD: a term selects by id or by tags)."""
    existing = config.vpc.existing
    if existing is None:
        return [{"tags": {KARPENTER_DISCOVERY_TAG: config.cluster_name}}]
    return [{"id": subnet.id} for subnet in existing.node_subnets]


def cluster_workloads_props(
    config: AppConfig,
    attachments: Sequence[MultusAttachment],
    *,
    cluster: eks.Cluster,
    karpenter_release: Construct,
    node_pools: Sequence[KarpenterNodePoolProps],
) -> ClusterWorkloadsProps:
    images = config.images
    nads = []
    node_local_names = []
    # Each network's NAD names, in multus.networks order, and each manifest's: one per network,
    # and one per network and AZ for an AZ that can be removed (charts/network_attachments.py).
    networks: dict[str, list[str]] = {network.name: [] for network in config.multus.networks}
    manifests: dict[str, list[str]] = {}
    fixed_zones = set(config.control_plane_zones)
    for a in attachments:
        if a.plan.whereabouts_chain:
            nad = network_attachment(a.plan, ipv6_range(a))
            nads.append(nad)
            names = [nad.name, *([nad.static_name] if nad.static_name else [])]
        else:
            # node_prefix NADs and one per host-device ENI slot: Multus reads the node's config.
            names = [slot.nad_name for slot in a.plan.eni_slots]
            node_local_names += names
        networks[a.plan.network] += names
        zone = a.plan.availability_zone
        key = (
            a.plan.network if zone in fixed_zones else network_attachment_name(a.plan.network, zone)
        )
        manifests.setdefault(key, []).extend(names)
    pod_ips = pod_ips_props(
        config,
        images.multus_pod_ips.reference,
        {
            (a.plan.network, a.plan.availability_zone): a.ipv6_pod_range
            for a in attachments
            if a.ipv6_pod_range is not None
        },
        {
            (a.plan.network, a.plan.availability_zone): a.subnet.route_table.route_table_id
            for a in attachments
            if a.plan.pod_routed_ranges
        },
    )
    return ClusterWorkloadsProps(
        cluster=cluster,
        karpenter_release=karpenter_release,
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
            node_local_names=node_local_names,
            create_namespace=config.multus.creates_nad_namespace,
            networks={network: names for network, names in networks.items() if names},
            manifests={key: names for key, names in manifests.items() if names},
        ),
        clear_taints=ClearTaintsProps(
            image=images.cleartaints.reference,
            pools=[
                clear_taints_nodes(pool, plan)
                for pool in config.node_pools
                if (plan := config.pool_plan(pool))
            ],
        ),
        pod_ips=pod_ips,
        monitoring=monitoring_props(config, pod_ips),
        node_pools=node_pools,
        sample_workloads=sample_workloads_props(config) if config.extras.sample_workloads else None,
    )


def monitoring_props(
    config: AppConfig, pod_ips: MultusPodIpsProps | None
) -> MonitoringProps | None:
    """The agents' PodMonitor, alerts and dashboard: only where the Prometheus Operator runs
    (its CRDs) and some pool runs the agent (the metrics they watch are its own)."""
    if not config.monitoring.prometheus_operator or pod_ips is None:
        return None
    return MonitoringProps(
        agent_names=[nodes.daemon_set_name for nodes in pod_ips.pools],
        namespace=pod_ips.namespace,
        selector_labels=config.monitoring.selector_labels,
    )


def sample_workloads_props(config: AppConfig) -> SampleWorkloadsProps:
    """A multitool per AZ and pool with networks, attaching that pool's networks there."""
    return SampleWorkloadsProps(
        namespace=config.multus.nad_namespace,
        image=config.images.sample_workloads.reference,
        workloads=[
            ZoneWorkload(
                availability_zone=az,
                network_attachment_names=[row.nad_name for row in rows],
                networks=[row.network for row in rows],
                pool=pool.name,
                tolerations=pool_taints(pool),
            )
            for pool in config.node_pools
            for az in config.availability_zones
            if (rows := [row for row in config.pool_plan(pool) if row.availability_zone == az])
        ],
    )


def clear_taints_nodes(pool: NodePoolConfig, plan: NetworkPlan) -> ClearTaintsNodes:
    """What cleartaints waits for on a pool's nodes: the CNI binaries and files of the NADs of
    its networks, the node-local configs of its node_prefix networks and host-device ENIs (at
    its device indexes) and the pod IP agent when one of its networks runs it."""
    # Which plugins the chains call depends on neither their routes nor the IPv6 side (a
    # deploy-time value that an IPv6 route's gateway needs): both are left out here.
    nads = [replace(network_attachment(row), routes=()) for row in plan if row.whereabouts_chain]
    node_prefix_files = [
        cni_config_file_name(index, card)
        for card, index in dict.fromkeys(
            row.attachment_slot for row in plan if row.ip_management.node_local_config
        )
    ]
    host_device_files = [
        host_device_config_file_name(slot.device_index, row.network_card)
        for row in networks_in_order(plan)
        if row.host_device
        for slot in row.eni_slots
    ]
    return ClearTaintsNodes(
        pool=pool.name,
        cni_binaries=sorted(
            {
                *cni_binaries(nads),
                *(NODE_PREFIX_CNI_PLUGINS if node_prefix_files else ()),
                *(HOST_DEVICE_CNI_PLUGINS if host_device_files else ()),
            }
        ),
        cni_files=[
            *cni_host_files(nads),
            *(f"{NODE_CNI_CONFIG_DIR}/{name}" for name in node_prefix_files + host_device_files),
        ],
        wait_for_pod_ips=any(row.runs_pod_ip_agent for row in plan),
        node_selector=pool_node_selector(pool),
        tolerations=pool_taints(pool),
        replace_after_seconds=pool.replace_not_ready_after_seconds,
    )


def pod_ips_props(
    config: AppConfig,
    image: str,
    ipv6_pod_ranges: Mapping[tuple[str, str], str] | None = None,
    route_table_ids: Mapping[tuple[str, str], str] | None = None,
) -> MultusPodIpsProps | None:
    """Per pool, per Multus interface of its networks whose mode runs the pod IP agent, the
    reservations its pods' addresses come from (one per AZ, and on a dual-stack network the
    reserved IPv6 pod range of each AZ: ipv6_pod_ranges, by (network, AZ), deploy-time values),
    the static ranges inside them and their floating addresses; on a network with
    pod_routed_ranges, those ranges and the route table of each of its subnets (route_table_ids,
    by (network, AZ)), in every AZ: a host of the network in any AZ reaches the range through
    its own subnet's table. None when no pool has such a network."""
    pools = []
    for pool in config.node_pools:
        ranges: dict[str, list[str]] = {}
        static_ranges: dict[str, list[str]] = {}
        floating: dict[str, list[str]] = {}
        routed_ranges: dict[str, list[str]] = {}
        route_tables: dict[str, list[str]] = {}
        for row in config.pool_plan(pool):
            if row.runs_pod_ip_agent:
                ranges.setdefault(row.interface_name, []).append(row.reservation_cidr)
                ipv6_range = (ipv6_pod_ranges or {}).get((row.network, row.availability_zone))
                if ipv6_range is not None:
                    ranges[row.interface_name].append(ipv6_range)
                if row.static_range:
                    static_ranges.setdefault(row.interface_name, []).append(row.static_range)
                if row.floating_addresses:
                    floating.setdefault(row.interface_name, []).extend(row.floating_addresses)
                if row.pod_routed_ranges:
                    routed_ranges[row.interface_name] = list(row.pod_routed_ranges)
                    route_tables.setdefault(row.interface_name, []).append(
                        _route_table_id(route_table_ids, row)
                    )
        if ranges:
            pools.append(
                PodIpsNodes(
                    interfaces=ranges,
                    static_ranges=static_ranges,
                    floating_addresses=floating,
                    routed_ranges=routed_ranges,
                    route_tables=route_tables,
                    pool=pool.name,
                    node_selector=pool_node_selector(pool),
                )
            )
    return MultusPodIpsProps(image=image, pools=pools) if pools else None


def _route_table_id(
    route_table_ids: Mapping[tuple[str, str], str] | None, row: NetworkPlanRow
) -> str:
    route_table = (route_table_ids or {}).get((row.network, row.availability_zone))
    if route_table is None:
        raise ValueError(
            f"{row.subnet_path}: no route table ID given for {row.network} in "
            f"{row.availability_zone}, whose pod_routed_ranges the agent routes"
        )
    return route_table


def ipv6_range(attachment: MultusAttachment) -> Ipv6Range | None:
    """The IPv6 side of a dual-stack attachment's NAD, from its reservation's attributes."""
    reservation = attachment.ipv6_reservation
    if reservation is None:
        return None
    return Ipv6Range(
        subnet_cidr=reservation.subnet_cidr,
        first_address=reservation.first_address,
        last_address=reservation.last_address,
        gateway=reservation.router_address,
    )


def network_attachment(row: NetworkPlanRow, ipv6: Ipv6Range | None = None) -> NetworkAttachment:
    whereabouts_range, gateway = whereabouts_range_and_gateway(
        row.subnet_cidr, row.reservation_cidr
    )
    return NetworkAttachment(
        name=row.nad_name,
        master_interface=row.interface_name,
        ipvlan_mode=row.ipvlan_mode,
        whereabouts_range=whereabouts_range,
        gateway=gateway,
        static_range=row.static_range,
        static_name=row.static_nad_name,
        routes=[route.destination for route in row.routes],
        pod_routes=[destination for route in row.routes for destination in route.pod_destinations],
        ipv6=ipv6,
        mtu=row.mtu,
        pod_routed_ranges=row.pod_routed_ranges,
    )
