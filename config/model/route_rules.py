"""The rules of the Multus networks' routes that span the whole config: targets the VPC has, no
destination inside the VPC (one around it is a summary route), no pod on two networks that
route overlapping ranges or route a range the other serves, and what must exist outside the app
before a route can be created."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from config.model.base import net
from config.model.networks import MultusNetworkConfig
from config.synth_warnings import SynthWarning

# AWS::EC2::Route: a route table cannot use a transit gateway before it is attached to the VPC;
# GatewayId is a gateway attached to the VPC.
_PRECONDITIONS = {
    "transit_gateway": "an available VPC attachment of the transit gateway",
    "vpn_gateway": "the virtual private gateway attached to it",
}


def route_path(index: int, network: MultusNetworkConfig, position: int) -> str:
    """Where a route is in the config, for messages."""
    return f"multus.networks[{index}] ({network.name}).routes[{position}]"


def route_preconditions(networks: Sequence[MultusNetworkConfig]) -> list[str]:
    """What must exist outside the app before the network stack can create each route (a
    transit gateway attached to the VPC: an available VPC attachment; a virtual private
    gateway attached to it), and what an IPv6 route to a virtual private gateway needs (Direct
    Connect)."""
    return [warning.text for warning in route_precondition_warnings(networks)]


def route_precondition_warnings(networks: Sequence[MultusNetworkConfig]) -> list[SynthWarning]:
    """route_preconditions with their IDs (config/synth_warnings.py)."""
    attached = [
        SynthWarning(
            "route-needs-gateway-attachment",
            f"{route_path(index, network, position)}: {route.target_id} is used only once the "
            f"VPC has {_PRECONDITIONS[route.target]}; without it the network stack fails to "
            "create the route (with a VPC this app creates: deploy without the route, attach "
            "the gateway, then add the route)",
        )
        for index, network in enumerate(networks)
        for position, route in enumerate(network.routes)
        if route.target in _PRECONDITIONS
    ]
    # AWS Site-to-Site VPN User Guide, "How AWS Site-to-Site VPN works": a virtual private
    # gateway does not carry IPv6 over a VPN connection (a transit gateway does); a Direct
    # Connect private virtual interface on it can.
    ipv6_over_vpn = [
        SynthWarning(
            "ipv6-route-over-vpn-gateway",
            f"{route_path(index, network, position)}: {route.destination} is IPv6, which "
            f"{route.target_id} carries only from a Direct Connect private virtual interface, "
            "not over a Site-to-Site VPN connection; for IPv6 over VPN route to a "
            "transit_gateway_id",
        )
        for index, network in enumerate(networks)
        for position, route in enumerate(network.routes)
        if route.is_ipv6 and route.target == "vpn_gateway"
    ]
    return attached + ipv6_over_vpn


def check_route_targets(
    networks: Sequence[MultusNetworkConfig], vpc_cidrs: Sequence[str], has_nat_gateway: bool
) -> None:
    """No destination inside the VPC (its local route has it), no NAT gateway the VPC lacks.

    A summary route around the VPC (10.0.0.0/8 around a 10.10.0.0/16 VPC) is one EC2 takes: the
    VPC's local route is more specific and wins for the VPC's own addresses (VPC User Guide,
    route tables, "Route priority": the longest prefix match), and the pods route only its parts
    beyond the VPC (config/network_plan.py, beyond_vpc). The rules on ranges of the config inside
    it are those of any route: a pod-routed range of its network (networks.py) or of a network
    of the same pool, another route of the pool (check_routes_of_each_pool)."""
    vpc = [net(cidr) for cidr in vpc_cidrs]
    for index, network in enumerate(networks):
        for position, route in enumerate(network.routes):
            path = route_path(index, network, position)
            # An IPv6 destination never overlaps the VPC's IPv4 blocks; the VPC's own IPv6
            # block is Amazon's choice, known only at deploy time.
            destination = ipaddress.ip_network(route.destination)
            local = [
                str(block)
                for block in vpc
                if isinstance(destination, ipaddress.IPv4Network) and destination.subnet_of(block)
            ]
            if local:
                raise ValueError(
                    f"{path}.destination: {route.destination} overlaps the VPC CIDR "
                    f"{', '.join(local)}, which the VPC routes itself (its local route); "
                    "routes lead beyond the VPC: name the RAN's or data network's range (or a "
                    "summary around the VPC, such as 10.0.0.0/8)"
                )
            if route.nat_gateway and not has_nat_gateway:
                raise ValueError(
                    f"{path}.nat_gateway: this VPC has no NAT gateway the app may route to; "
                    "name another target (transit_gateway_id, vpn_gateway_id, "
                    "network_interface_id)"
                )


def check_pod_routed_ranges(
    networks: Sequence[MultusNetworkConfig], vpc_cidrs: Sequence[str]
) -> None:
    """No pod-routed range inside the VPC (its local route has it), none that two networks
    both claim."""
    vpc = [net(cidr) for cidr in vpc_cidrs]
    claimed: dict[str, str] = {}
    for index, network in enumerate(networks):
        for position, cidr in enumerate(network.pod_routed_ranges):
            path = f"multus.networks[{index}] ({network.name}).pod_routed_ranges[{position}]"
            local = [str(block) for block in vpc if block.overlaps(net(cidr))]
            if local:
                raise ValueError(
                    f"{path}: {cidr} overlaps the VPC CIDR {', '.join(local)}, which the VPC "
                    "routes itself (its local route); a pod-routed range lies outside the "
                    "VPC, such as a UE pool 10.45.0.0/16"
                )
            for other_path, other in claimed.items():
                if net(other).overlaps(net(cidr)):
                    raise ValueError(
                        f"{path}: {cidr} overlaps {other_path} ({other}); each range is served "
                        "over one network: list it on one of them"
                    )
            claimed[path] = cidr


def check_routes_of_each_pool(
    networks: Sequence[MultusNetworkConfig], pools: Sequence[tuple[str, Sequence[str]]]
) -> None:
    """No pool attaches two networks that route overlapping ranges, or one whose pod-routed
    range another's route overlaps. `pools`: each pool's path and the names of the networks its
    nodes attach.

    The pod IP plugin puts each route into the pod's main table via its network's interface
    (mainTableRoutes, `ip route replace`): a pod on two such networks reaches part of the range
    over one interface and the rest over the other (longest prefix wins), or one route replaces
    the other. Only a pool attaching both networks runs such a pod; networks of different pools
    may route one range (the RAN over N2 from the control pool and over N3 from the UPF's)."""
    indexes = {network.name: index for index, network in enumerate(networks)}
    for pool_path, names in pools:
        attached = [networks[indexes[name]] for name in names]
        for first_index, first in enumerate(attached):
            for second in attached[first_index + 1 :]:
                overlap = next(
                    (
                        (a, b)
                        for a in first.routes
                        for b in second.routes
                        if _overlap(a.destination, b.destination)
                    ),
                    None,
                )
                if overlap is not None:
                    a, b = overlap
                    raise ValueError(
                        f"{pool_path}: its nodes attach {first.name} and {second.name}, which "
                        f"route the overlapping {a.destination} and {b.destination} "
                        f"(multus.networks[{indexes[first.name]}] and "
                        f"[{indexes[second.name]}] routes); a pod on both would send part of "
                        "the range over one interface and the rest over the other: route the "
                        "range on one of them, or attach them in different pools"
                    )
                for served, routing in ((first, second), (second, first)):
                    _check_served_range_not_routed(pool_path, served, routing, indexes)


def _check_served_range_not_routed(
    pool_path: str,
    served: MultusNetworkConfig,
    routing: MultusNetworkConfig,
    indexes: dict[str, int],
) -> None:
    """A range pods answer for over one network of a pool is no route of another it attaches:
    the VPC brings the range's packets to the pod over the first, while the pod's route to the
    destination (mainTableRoutes, via the second's interface) sends its own packets for the
    range out over the second, to that route's target (as two overlapping routes would)."""
    for position, cidr in enumerate(served.pod_routed_ranges):
        for route_position, route in enumerate(routing.routes):
            if not _overlap(cidr, route.destination):
                continue
            raise ValueError(
                f"{pool_path}: its nodes attach {served.name} and {routing.name}; "
                f"multus.networks[{indexes[served.name]}] ({served.name}).pod_routed_ranges"
                f"[{position}] {cidr} overlaps multus.networks[{indexes[routing.name]}] "
                f"({routing.name}).routes[{route_position}] {route.destination}, so a pod on "
                f"both would get the range's packets over {served.name} and send its own for "
                f"it over {routing.name}: keep the range apart from {routing.name}'s routes "
                "(the RAN's range is not the UE pool), or attach the networks in different "
                "pools"
            )


def _overlap(first: str, second: str) -> bool:
    """Whether two destinations share addresses (never across IPv4 and IPv6)."""
    a, b = ipaddress.ip_network(first), ipaddress.ip_network(second)
    return a.version == b.version and a.overlaps(b)
