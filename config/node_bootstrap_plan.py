"""The node bootstrap's plan: what its user-data is rendered from (node_bootstrap/renderer.py),
built from the network plan for the cluster stack, which renders the user-data, and for the
config's check of its size, which must measure the same; and the bootstrap's contract with the
charts (its readiness marker)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from config.connection_tracking import ConnectionTracking
from config.network_plan import NetworkPlan, NetworkPlanRow, networks_in_order
from config.node_profile import NodeProfile
from config.path_mtu import VPC_MTU

#: Directory the bootstrap keeps its state in; the readiness marker lives here.
READY_MARKER_DIR = "/var/lib/multus-eni"
#: Written only once every Multus interface is attached and up (one interface name per line).
READY_MARKER_PATH = f"{READY_MARKER_DIR}/ready"

#: Budget of our part: EC2 caps user-data at 16 KB (before base64) and Karpenter merges its own
#: nodeadm part (cluster endpoint, CA bundle, kubelet flags: ~3 KB) into the same document.
USER_DATA_LIMIT_BYTES = 12 * 1024
#: How the config measures a plan's user-data: node_bootstrap.renderer.deployed_size, handed to
#: the loader by the app (config/loader.py), so the model never imports the renderer.
UserDataSize = Callable[["NodeBootstrapProps"], int]
#: The key of that measure in the model's validation context.
USER_DATA_SIZE = "user_data_size"


@dataclass(frozen=True)
class NodePrefixNetwork:
    """One node_prefix network in one AZ.

    cni_network_name: the NAD's name; Multus picks the config file whose "name" equals it.
    device_index / network_card: where the network's ENI is attached (names the config file).
    prefix_count: /28 prefixes requested on the ENI.
    subnet_cidr / reservation_cidr: the Multus subnet and its prefix-type reservation, which
    every prefix must lie in. ipvlan_mode: l2, l3 or l3s.
    """

    availability_zone: str
    interface_name: str
    device_index: int
    prefix_count: int
    cni_network_name: str
    subnet_cidr: str
    reservation_cidr: str
    ipvlan_mode: str
    network_card: int = 0


@dataclass(frozen=True)
class HostDeviceEni:
    """One ENI of a host-device network in one AZ, which a pod takes whole.

    cni_network_name: the NAD's name (<network>-<az>-<slot>); Multus picks the node's config
    file whose "name" equals it. device_index / network_card: where the ENI is attached (names
    the config file). subnet_cidr: the Multus subnet (the address's prefix length, the VPC
    router); routes: the network's IPv4 destinations beyond the VPC, via that router.
    """

    availability_zone: str
    interface_name: str
    device_index: int
    cni_network_name: str
    subnet_cidr: str
    routes: Sequence[str] = ()
    network_card: int = 0


@dataclass(frozen=True)
class MultusInterface:
    """One Multus ENI of a node: its network, Linux interface name, EC2 device index, whether
    EC2's source/dest check stays on (False: the bootstrap turns it off), its security
    groups (its network's; a group is VPC-wide, so the same in every AZ) and whether its
    network is dual-stack (the ENI gets one IPv6 address of the subnet at creation)."""

    network: str  # Multus network name, e.g. "multus1"
    interface_name: str  # stable Linux name given to the ENI, e.g. "multus1" (<=15 chars)
    device_index: int  # EC2 device index to attach at (1, 2, ...)
    source_dest_check: bool = False  # the seed's choice: off
    security_group_ids: Sequence[str] = ()  # at least one
    ipv6: bool = False
    mtu: int = VPC_MTU  # the network's (config/path_mtu.py): its .link and node-local config
    connection_tracking: ConnectionTracking | None = None  # timeouts set at creation
    network_card: int = 0  # EC2 network card; device_index counts on this card


@dataclass(frozen=True)
class AzPlacement:
    """Where the Multus ENIs of a node in one AZ go: a subnet per interface."""

    subnet_ids: Sequence[str]  # one per interface, same order as NodeBootstrapProps.interfaces


@dataclass(frozen=True)
class NodeBootstrapProps:
    """What the node bootstrap script is rendered from: cluster, interfaces, per-AZ placements.

    placements: AZ name -> placement.
    node_prefix: one entry per (AZ, network) in node_prefix mode.
    host_device: one entry per (AZ, ENI) of the host-device networks.
    node_profile: the pool's node profile (config/node_profile.py), or None."""

    cluster_name: str
    interfaces: Sequence[MultusInterface]
    placements: Mapping[str, AzPlacement]
    node_prefix: Sequence[NodePrefixNetwork] = ()
    node_profile: NodeProfile | None = None
    host_device: Sequence[HostDeviceEni] = ()


def node_bootstrap_props(
    cluster_name: str,
    plan: NetworkPlan,
    *,
    subnet_id: Callable[[NetworkPlanRow], str],
    security_group_id: Callable[[NetworkPlanRow], str],
    node_profile: NodeProfile | None = None,
) -> NodeBootstrapProps:
    """Each network's interface (a host-device network's enis_per_node ones) at its device
    index with its network's security group and, per AZ, each interface's subnet (in
    interface order), and the pool's node profile; subnet_id and security_group_id give a
    row's deploy-time IDs."""
    zones: dict[str, list[NetworkPlanRow]] = {}
    for row in sorted(plan, key=lambda row: row.attachment_slot):
        zones.setdefault(row.availability_zone, []).append(row)
    return NodeBootstrapProps(
        cluster_name=cluster_name,
        interfaces=[
            MultusInterface(
                network=row.network,
                interface_name=slot.interface_name,
                device_index=slot.device_index,
                source_dest_check=row.source_dest_check,
                security_group_ids=[security_group_id(row)],
                ipv6=row.ipv6 is not None,
                mtu=row.mtu,
                connection_tracking=row.connection_tracking,
                network_card=row.network_card,
            )
            for row in networks_in_order(plan)
            for slot in row.eni_slots
        ],
        placements={
            az: AzPlacement(subnet_ids=[subnet_id(row) for row in rows for _ in row.eni_slots])
            for az, rows in zones.items()
        },
        node_prefix=[
            _node_prefix_network(row) for row in plan if row.ip_management.node_local_config
        ],
        node_profile=node_profile,
        host_device=[
            HostDeviceEni(
                availability_zone=row.availability_zone,
                interface_name=slot.interface_name,
                device_index=slot.device_index,
                cni_network_name=slot.nad_name,
                subnet_cidr=row.subnet_cidr,
                routes=[route.destination for route in row.routes if not route.is_ipv6],
                network_card=row.network_card,
            )
            for row in plan
            if row.host_device
            for slot in row.eni_slots
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
        network_card=row.network_card,
    )
