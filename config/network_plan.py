"""The network plan: one row per (Multus network, AZ) with every fact derived from the config.

The network stack, the cluster props, the node bootstrap, the user-data size check, the NAD
chart and the diagram all read these rows, so none of them derives a device index, an interface
or NAD name, a reservation type or a security group by itself.

The module imports nothing from config.model: model validation builds the plan (the user-data
size and the node_prefix reservation checks read it), so the plan takes the config by its shape
(the Protocols below, which AppConfig satisfies) rather than by its class.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from config.connection_tracking import ConnectionTracking
from config.interface_names import eni_interface_names
from config.path_mtu import VPC_MTU

#: CreateSubnetCidrReservation's ReservationType: "explicit" keeps the addresses for whoever
#: assigns them itself, "prefix" lets EC2 pick ENIs' /28 prefixes from it.
ReservationType = Literal["explicit", "prefix"]
#: The kernel's ipvlan modes (the config allows l2 only: config.model explains why).
IpvlanMode = Literal["l2", "l3", "l3s"]
#: multus.networks[].mode: how pods reach a network's ENIs. ipvlan: each pod an ipvlan
#: interface on the node's one ENI; host-device: each pod a whole ENI of the node's
#: enis_per_node (containernetworking/plugins plugins/main/host-device moves it into the pod).
NetworkMode = Literal["ipvlan", "host-device"]
IPVLAN: NetworkMode = "ipvlan"
HOST_DEVICE: NetworkMode = "host-device"
#: What a route of a Multus network leads to (multus.networks[].routes[]).
RouteTarget = Literal["transit_gateway", "vpn_gateway", "network_interface", "nat_gateway"]


@dataclass(frozen=True)
class IpManagementMode:
    """What a network's multus.networks[].ip_management value means for everything it touches.

    reservation_type / reservation_purpose: the subnet's CIDR reservation (and its description).
    pod_ip_agent: each pod address becomes a secondary IP of the node's ENI (multus-pod-ips
    agent); the NAD's chain is ipvlan + Whereabouts IPAM over the reservation + sbr + the agent's
    plugin.
    node_local_config: the node bootstrap requests the network's /28 prefixes on its ENI and
    writes the NAD's CNI config on the node (host-local IPAM over them); the NAD carries no
    config and each row has prefixes_per_node.
    static_addresses: pods may own fixed addresses of a subnet's static_range (a second NAD
    per subnet with static IPAM); only where the pod IP agent moves an address with its pod.
    """

    name: str
    reservation_type: ReservationType
    reservation_purpose: str
    pod_ip_agent: bool
    node_local_config: bool
    static_addresses: bool


WHEREABOUTS = IpManagementMode(
    name="whereabouts",
    reservation_type="explicit",
    reservation_purpose="Whereabouts",
    pod_ip_agent=True,
    node_local_config=False,
    static_addresses=True,
)
NODE_PREFIX = IpManagementMode(
    name="node_prefix",
    reservation_type="prefix",
    reservation_purpose="node /28 prefixes",
    pod_ip_agent=False,
    node_local_config=True,
    static_addresses=False,
)
IP_MANAGEMENT_MODES: dict[str, IpManagementMode] = {
    mode.name: mode for mode in (WHEREABOUTS, NODE_PREFIX)
}


#: Every subnet's IPv6 CIDR is a /64 (VPC user guide, "Subnet CIDR blocks"; CloudFormation,
#: AWS::EC2::SubnetCidrBlock), and an Amazon-provided VPC block a /56 (VPC user guide, "VPC
#: CIDR blocks"): 256 /64s, one per index 0-255 of ipv6_subnet_index.
IPV6_SUBNET_PREFIX_LENGTH = 64
IPV6_SUBNETS_PER_VPC_BLOCK = 256


def ipv6_subnet_index(subnet_cidr: str) -> int:
    """Which /64 of the VPC's IPv6 block a dual-stack subnet gets: the third octet of its IPv4
    CIDR (10.0.6.0/24 -> 6, the /64 ending in 06). It depends on nothing but the subnet's own
    CIDR, so adding or removing a network or an AZ never renumbers another subnet (a subnet's
    IPv6 CIDR cannot change without replacing it); two dual-stack subnets in one /24 would
    share it, which the config refuses."""
    return ipaddress.IPv4Network(subnet_cidr).network_address.packed[2]


def network_attachment_name(network: str, availability_zone: str) -> str:
    """The NAD name pods use in their k8s.v1.cni.cncf.io/networks annotation."""
    return f"{network}-{availability_zone}"


def host_device_attachment_name(network: str, availability_zone: str, slot: int) -> str:
    """The NAD name of ENI slot `slot` (0, 1, ...) of a host-device network in that AZ."""
    return f"{network_attachment_name(network, availability_zone)}-{slot}"


def static_attachment_name(network: str, availability_zone: str) -> str:
    """The NAD name of the network's fixed addresses in that AZ (static IPAM)."""
    return f"{network_attachment_name(network, availability_zone)}-static"


@dataclass(frozen=True)
class PlannedRoute:
    """A destination beyond the VPC: in the route table of the row's subnet (to the target)
    and in its pods (via the subnet's VPC router over the Multus interface). target_id: the
    target's ID; None for nat_gateway, whose ID (the NAT gateway of the row's AZ) only the
    network stack knows."""

    destination: str
    target: RouteTarget
    target_id: str | None
    #: The destination's parts beyond the VPC, which the pods route over the Multus interface
    #: (a summary route around the VPC less the VPC's blocks); empty: the whole destination.
    beyond_vpc: tuple[str, ...] = ()

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.destination

    @property
    def pod_destinations(self) -> tuple[str, ...]:
        """What the pods route via the subnet's VPC router: the destination, or a summary
        route's parts beyond the VPC. In the subnet's route table the VPC's local route is more
        specific and wins for the VPC's addresses (EC2 picks the longest prefix), but in a pod's
        main table the summary would take them from eth0 (other pods, the nodes)."""
        return self.beyond_vpc or (self.destination,)


def beyond_vpc(destination: str, vpc_cidrs: Sequence[str]) -> tuple[str, ...]:
    """The parts of an IPv4 destination outside the VPC blocks it contains, in address order
    (10.0.0.0/8 around 10.10.0.0/16: 10.0.0.0/13, 10.8.0.0/15, 10.11.0.0/16, ...); () when it
    contains none (or is IPv6)."""
    network = ipaddress.ip_network(destination)
    blocks = [ipaddress.IPv4Network(cidr) for cidr in vpc_cidrs]
    inside = [
        block
        for block in blocks
        if isinstance(network, ipaddress.IPv4Network) and block.subnet_of(network)
    ]
    if not inside or not isinstance(network, ipaddress.IPv4Network):
        return ()
    parts = [network]
    for block in inside:
        parts = [
            piece
            for part in parts
            for piece in (part.address_exclude(block) if block.subnet_of(part) else [part])
        ]
    return tuple(str(part) for part in sorted(parts))


@dataclass(frozen=True)
class PlannedIpv6:
    """A dual-stack subnet: its /64 is number subnet_index of the VPC's IPv6 block
    (ipv6_subnet_index), its pod range the block pod_range_offset of size
    /pod_range_prefix_length inside that /64 (both only known at deploy time)."""

    subnet_index: int
    pod_range_prefix_length: int
    pod_range_offset: int


@dataclass(frozen=True)
class EniSlot:
    """One of a row's ENIs on a node: its Linux name, its device index (on the row's network
    card) and the NAD through which pods reach it."""

    interface_name: str
    device_index: int
    nad_name: str


@dataclass(frozen=True)
class NetworkPlanRow:
    """One Multus network in one AZ.

    device_index: EC2 device index of the network's (first) ENI on its network card (1, 2, ...
    in multus.networks order among the networks on that card, a host-device network taking
    enis_per_node consecutive ones; 0 on card 0 is the node's primary ENI). network_card: the
    card (EC2 numbers devices per card; 0 unless the network sets network_card).
    interface_name: the ENI's stable Linux name on the node (a host-device network's base name:
    eni_slots names its ENIs).
    prefixes_per_node: /28 prefixes on each node's ENI (node_local_config modes only, else None).
    static_range / static_nad_name: the subnet's block of fixed pod addresses and the NAD that
    hands them out (None without a static_range).
    floating_addresses: addresses of the static_range that move to the pod announcing them
    (active/standby pairs; docs/multus-pod-ips.md, floating addresses).
    ipv6: the subnet's IPv6 /64 and pod range on a dual-stack network, else None.
    security_group: the key of the network's own security group (the network's name), which
    the network stack maps to that group and everything else reads from there.
    network_path / subnet_path: where the row comes from in the config, for error messages.
    pool: None in the network plan; in a pool's view (pool_network_plan), the pool's name, and
    device_index and prefixes_per_node are those of that pool's nodes.
    routes: the network's routes (the same in each of its rows).
    mtu: the MTU of the network's ENIs and its pods' interfaces (config/path_mtu.py).
    pod_routed_ranges: the network's ranges whose route follows the pod that asks for it (the
    same in each of its rows).
    connection_tracking: the timeouts the network's ENIs are created with, None for EC2's.
    mode / enis_per_node: ipvlan (one ENI, shared by the pods) or host-device (enis_per_node
    ENIs, one per pod: eni_slots); nad_name is then slot 0's NAD.
    """

    network: str
    availability_zone: str
    device_index: int
    interface_name: str
    nad_name: str
    ip_management: IpManagementMode
    subnet_cidr: str
    reservation_cidr: str
    prefixes_per_node: int | None
    ipvlan_mode: IpvlanMode
    source_dest_check: bool
    security_group: str
    network_path: str
    subnet_path: str
    static_range: str | None = None
    static_nad_name: str | None = None
    floating_addresses: tuple[str, ...] = ()
    pool: str | None = None
    routes: tuple[PlannedRoute, ...] = ()
    ipv6: PlannedIpv6 | None = None
    mtu: int = VPC_MTU
    connection_tracking: ConnectionTracking | None = None
    pod_routed_ranges: tuple[str, ...] = ()
    network_card: int = 0
    mode: NetworkMode = IPVLAN
    enis_per_node: int = 1

    @property
    def host_device(self) -> bool:
        return self.mode == HOST_DEVICE

    @property
    def runs_pod_ip_agent(self) -> bool:
        """Whether the pod IP agent manages addresses on the row's ENI (never a host-device
        ENI, whose pod has the ENI's primary address)."""
        return self.ip_management.pod_ip_agent and not self.host_device

    @property
    def whereabouts_chain(self) -> bool:
        """Whether the row's NAD carries the ipvlan + Whereabouts chain (not node-local)."""
        return not self.ip_management.node_local_config and not self.host_device

    @property
    def eni_slots(self) -> tuple[EniSlot, ...]:
        """The row's ENIs on a node, at consecutive device indexes: one for ipvlan; for
        host-device, slot k named <interface_name>k, its NAD <network>-<az>-k."""
        if not self.host_device:
            return (EniSlot(self.interface_name, self.device_index, self.nad_name),)
        return tuple(
            EniSlot(
                name,
                self.device_index + slot,
                host_device_attachment_name(self.network, self.availability_zone, slot),
            )
            for slot, name in enumerate(
                eni_interface_names(self.interface_name, True, self.enis_per_node)
            )
        )

    @property
    def reservation_type(self) -> ReservationType:
        return self.ip_management.reservation_type

    @property
    def attachment_slot(self) -> tuple[int, int]:
        """(network card, device index): where on the node the ENI is, unique per node."""
        return self.network_card, self.device_index


NetworkPlan = tuple[NetworkPlanRow, ...]


class PlannedSubnet(Protocol):
    """What the plan reads of a Multus subnet (config.model.MultusSubnetConfig)."""

    @property
    def cidr(self) -> str: ...
    @property
    def reservation(self) -> str: ...
    @property
    def static_range(self) -> str | None: ...
    @property
    def floating_addresses(self) -> Sequence[str]: ...


class PlannedRouteSource(Protocol):
    """What the plan reads of a route (config.model.MultusRouteConfig)."""

    @property
    def destination(self) -> str: ...
    @property
    def target(self) -> RouteTarget: ...
    @property
    def target_id(self) -> str | None: ...


class PlannedIpv6Settings(Protocol):
    """What the plan reads of a network's ipv6 (config.model.NetworkIpv6Config)."""

    @property
    def pod_range_prefix_length(self) -> int: ...
    @property
    def pod_range_offset(self) -> int: ...


class PlannedNetwork(Protocol):
    """What the plan reads of a Multus network (config.model.MultusNetworkConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def device_name(self) -> str: ...
    @property
    def effective_mtu(self) -> int: ...
    @property
    def connection_tracking_plan(self) -> ConnectionTracking | None: ...
    @property
    def network_card(self) -> int: ...
    @property
    def mode(self) -> NetworkMode: ...
    @property
    def enis_per_node(self) -> int: ...
    @property
    def ip_management(self) -> str: ...
    @property
    def ipvlan_mode(self) -> IpvlanMode: ...
    @property
    def source_dest_check(self) -> bool: ...
    @property
    def prefixes_per_node(self) -> int | None: ...
    @property
    def subnets(self) -> Sequence[PlannedSubnet]: ...
    @property
    def routes(self) -> Sequence[PlannedRouteSource]: ...
    @property
    def pod_routed_ranges(self) -> Sequence[str]: ...
    @property
    def ipv6(self) -> PlannedIpv6Settings | None: ...


class PlannedNetworks(Protocol):
    """What the plan reads of the multus section (config.model.MultusConfig)."""

    @property
    def networks(self) -> Sequence[PlannedNetwork]: ...


class PlannedConfig(Protocol):
    """What the plan reads of an AppConfig."""

    @property
    def availability_zones(self) -> Sequence[str]: ...
    @property
    def vpc_cidrs(self) -> Sequence[str]: ...
    @property
    def multus(self) -> PlannedNetworks: ...
    @property
    def default_prefixes_per_node(self) -> int: ...


class PlannedPool(Protocol):
    """What a pool's view reads of a node pool (config.model.NodePoolConfig)."""

    @property
    def name(self) -> str: ...
    @property
    def networks(self) -> Sequence[str] | None: ...
    @property
    def default_prefixes_per_node(self) -> int: ...


def network_plan(config: PlannedConfig) -> NetworkPlan:
    """The rows in multus.networks order, each network's rows in availability_zones order."""
    networks = config.multus.networks
    return tuple(
        row
        for index, (network, device_index) in enumerate(
            zip(networks, _device_indexes(networks), strict=True)
        )
        for row in _network_rows(
            config,
            network,
            index,
            device_index=device_index,
            pool=None,
            default_prefixes=config.default_prefixes_per_node,
        )
    )


def pool_network_plan(config: PlannedConfig, pool: PlannedPool) -> NetworkPlan:
    """A pool's view: the rows of the networks its nodes attach (all when pool.networks is
    None, none when it is empty), in multus.networks order, at the device indexes 1..k its
    nodes use on each network card, with the prefixes per node its sizes take."""
    attached = [
        (index, network)
        for index, network in enumerate(config.multus.networks)
        if pool.networks is None or network.name in pool.networks
    ]
    device_indexes = _device_indexes([network for _, network in attached])
    return tuple(
        row
        for (index, network), device_index in zip(attached, device_indexes, strict=True)
        for row in _network_rows(
            config,
            network,
            index,
            device_index=device_index,
            pool=pool.name,
            default_prefixes=pool.default_prefixes_per_node,
        )
    )


def _device_indexes(networks: Sequence[PlannedNetwork]) -> list[int]:
    """Each network's (first) device index on its card: 1, 2, ... in order among the networks
    on the same card, a host-device network taking one per ENI (EC2 numbers devices per
    network card; device 0 of card 0 is the primary ENI)."""
    taken: dict[int, int] = {}
    indexes = []
    for network in networks:
        first = taken.get(network.network_card, 0) + 1
        indexes.append(first)
        taken[network.network_card] = first + _enis(network) - 1
    return indexes


def _enis(network: PlannedNetwork) -> int:
    return network.enis_per_node if network.mode == HOST_DEVICE else 1


def _network_rows(
    config: PlannedConfig,
    network: PlannedNetwork,
    index: int,
    *,
    device_index: int,
    pool: str | None,
    default_prefixes: int,
) -> list[NetworkPlanRow]:
    mode = IP_MANAGEMENT_MODES[network.ip_management]
    network_path = f"multus.networks[{index}] ({network.name})"
    routes = tuple(
        PlannedRoute(
            route.destination,
            route.target,
            route.target_id,
            beyond_vpc(route.destination, config.vpc_cidrs),
        )
        for route in network.routes
    )
    return [
        NetworkPlanRow(
            network=network.name,
            availability_zone=az,
            device_index=device_index,
            interface_name=network.device_name,
            nad_name=host_device_attachment_name(network.name, az, 0)
            if network.mode == HOST_DEVICE
            else network_attachment_name(network.name, az),
            ip_management=mode,
            subnet_cidr=subnet.cidr,
            reservation_cidr=subnet.reservation,
            prefixes_per_node=(network.prefixes_per_node or default_prefixes)
            if mode.node_local_config
            else None,
            ipvlan_mode=network.ipvlan_mode,
            source_dest_check=network.source_dest_check,
            security_group=network.name,
            network_path=network_path,
            subnet_path=f"{network_path}.subnets[{az_index}]",
            pool=pool,
            static_range=subnet.static_range,
            static_nad_name=static_attachment_name(network.name, az)
            if subnet.static_range
            else None,
            floating_addresses=tuple(subnet.floating_addresses),
            routes=routes,
            ipv6=_planned_ipv6(network.ipv6, subnet.cidr),
            mtu=network.effective_mtu,
            connection_tracking=network.connection_tracking_plan,
            pod_routed_ranges=tuple(network.pod_routed_ranges),
            network_card=network.network_card,
            mode=network.mode,
            enis_per_node=network.enis_per_node,
        )
        for az_index, (az, subnet) in enumerate(
            zip(config.availability_zones, network.subnets, strict=True)
        )
    ]


def _planned_ipv6(settings: PlannedIpv6Settings | None, subnet_cidr: str) -> PlannedIpv6 | None:
    if settings is None:
        return None
    return PlannedIpv6(
        subnet_index=ipv6_subnet_index(subnet_cidr),
        pod_range_prefix_length=settings.pod_range_prefix_length,
        pod_range_offset=settings.pod_range_offset,
    )


def networks_in_order(plan: NetworkPlan) -> list[NetworkPlanRow]:
    """The first row of each network, in attachment order (card 0's device indexes, then the
    next card's; per-network facts)."""
    seen: dict[str, NetworkPlanRow] = {}
    for row in plan:
        seen.setdefault(row.network, row)
    return sorted(seen.values(), key=lambda row: row.attachment_slot)
