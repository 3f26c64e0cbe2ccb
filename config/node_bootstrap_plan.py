"""The node bootstrap's props from the network plan: one mapping for the cluster stack, which
renders the user-data, and for the config's check of its size, which must measure the same."""

from __future__ import annotations

from collections.abc import Callable

from config.network_plan import NetworkPlan, NetworkPlanRow, networks_in_order
from node_bootstrap.node_prefix import NodePrefixNetwork
from node_bootstrap.renderer import AzPlacement, MultusInterface, NodeBootstrapProps


def node_bootstrap_props(
    cluster_name: str,
    plan: NetworkPlan,
    *,
    subnet_id: Callable[[NetworkPlanRow], str],
    security_group_id: Callable[[NetworkPlanRow], str],
) -> NodeBootstrapProps:
    """Each network's interface at its device index with its network's security group and,
    per AZ, each interface's subnet (in interface order); subnet_id and security_group_id give
    a row's deploy-time IDs."""
    zones: dict[str, list[NetworkPlanRow]] = {}
    for row in sorted(plan, key=lambda row: row.device_index):
        zones.setdefault(row.availability_zone, []).append(row)
    return NodeBootstrapProps(
        cluster_name=cluster_name,
        interfaces=[
            MultusInterface(
                network=row.network,
                interface_name=row.interface_name,
                device_index=row.device_index,
                source_dest_check=row.source_dest_check,
                security_group_ids=[security_group_id(row)],
                ipv6=row.ipv6 is not None,
            )
            for row in networks_in_order(plan)
        ],
        placements={
            az: AzPlacement(subnet_ids=[subnet_id(row) for row in rows])
            for az, rows in zones.items()
        },
        node_prefix=[
            _node_prefix_network(row) for row in plan if row.ip_management.node_local_config
        ],
    )


def _node_prefix_network(row: NetworkPlanRow) -> NodePrefixNetwork:
    return NodePrefixNetwork(
        availability_zone=row.availability_zone,
        interface_name=row.interface_name,
        device_index=row.device_index,
        # The plan gives every node-local row its prefixes; without, the renderer refuses 0.
        prefix_count=row.prefixes_per_node or 0,
        cni_network_name=row.nad_name,
        subnet_cidr=row.subnet_cidr,
        reservation_cidr=row.reservation_cidr,
        ipvlan_mode=row.ipvlan_mode,
    )
