"""What the picture says, box by box, from the validated config: the subnets of each AZ, each
Multus network's routes and security group rules, and each node pool's attached networks.

Every CIDR, name and range comes from the config and from the helpers the NAD chart itself
uses, so the picture shows what the app deploys."""

from __future__ import annotations

from dataclasses import dataclass

from charts.nad_cni_configs import whereabouts_range_and_gateway
from config import AppConfig
from config.model import (
    ANYWHERE,
    ExistingVpcConfig,
    MultusNetworkConfig,
    NodePoolConfig,
    SecurityGroupRuleConfig,
)
from config.network_plan import (
    NetworkPlanRow,
    PlannedRoute,
    RouteTarget,
    network_plan,
    networks_in_order,
)
from config.node_prefix import PREFIX_LENGTH
from docs_tools.diagram.svg import BAR_HEIGHT, LINE

ROUTE_TARGET_NAMES: dict[RouteTarget, str] = {
    "transit_gateway": "transit gateway",
    "vpn_gateway": "VPN gateway",
    "network_interface": "network interface",
    "nat_gateway": "NAT gateway of the AZ",
}


@dataclass(frozen=True)
class Line:
    """A line of a box; its kind (muted, route, rule) is its color and its legend entry."""

    text: str
    kind: str = "muted"


@dataclass(frozen=True)
class AddressBar:
    """A Multus subnet's addresses left to right, with its reservation and fixed range."""

    subnet: str
    reservation: str
    static_range: str | None


@dataclass(frozen=True)
class Box:
    """One box as drawn: a title, its lines, and for a Multus subnet the address bar.
    group_id names the box in the SVG for boxes a reader looks up (networks, pools)."""

    kind: str
    title: str
    lines: tuple[Line, ...]
    bar: AddressBar | None = None
    group_id: str | None = None

    @property
    def height(self) -> int:
        bar = BAR_HEIGHT + 6 if self.bar else 0
        return LINE + 2 + bar + LINE * len(self.lines) + 12


def zone_boxes(config: AppConfig, index: int) -> list[Box]:
    """The subnets of the AZ at `index`: public and node subnet, then one per Multus network."""
    zone = config.availability_zones[index]
    existing = config.vpc.existing
    boxes = (
        new_vpc_boxes(config, index) if existing is None else existing_vpc_boxes(existing, index)
    )
    nat_egress = {network.name: network.nat_egress for network in config.multus.networks}
    return boxes + [
        multus_box(row, nat_egress[row.network])
        for row in network_plan(config)
        if row.availability_zone == zone
    ]


def new_vpc_boxes(config: AppConfig, index: int) -> list[Box]:
    """The public and node subnet of the AZ at `index` that the app creates."""
    has_nat = config.vpc.nat_gateways == "per_az" or index == 0
    public = "NAT gateway, load balancers" if has_nat else "load balancers"
    return [
        Box("public", f"public  {config.vpc.public_subnet_cidrs[index]}", (Line(public),)),
        Box(
            "nodes",
            f"nodes  {config.vpc.node_subnet_cidrs[index]}",
            (Line("system and Karpenter nodes (primary ENI)"),),
        ),
    ]


def existing_vpc_boxes(existing: ExistingVpcConfig, index: int) -> list[Box]:
    """The network team's public (if any) and node subnet of the AZ at `index`."""
    public = [
        Box("public", f"public  {subnet.cidr}", (Line(f"{subnet.id} (given)"),))
        for subnet in existing.public_subnets[index : index + 1]
    ]
    node = existing.node_subnets[index]
    nodes = Box(
        "nodes",
        f"nodes  {node.cidr}",
        (Line(f"{node.id} (given)"), Line("system and Karpenter nodes (primary ENI)")),
    )
    return [*public, nodes]


def multus_box(row: NetworkPlanRow, nat_egress: bool) -> Box:
    title = f"{row.network}  {row.subnet_cidr}" + ("" if nat_egress else "  (no NAT route)")
    static = (
        (Line(f"fixed range {row.static_range}"), Line(f"NAD {row.static_nad_name}"))
        if row.static_range
        else ()
    )
    return Box(
        kind="multus",
        title=title,
        lines=(
            Line(f"reservation {row.reservation_cidr}"),
            *address_plan(row),
            *static,
            *ipv6_plan(row),
        ),
        bar=AddressBar(row.subnet_cidr, row.reservation_cidr, row.static_range),
    )


def address_plan(row: NetworkPlanRow) -> tuple[Line, Line]:
    """How pods get addresses on this subnet: the NAD, and its Whereabouts range or the
    prefixes each node takes from the reservation (node-local config)."""
    nad = f"NAD {row.nad_name}"
    if row.host_device:
        last = row.eni_slots[-1].nad_name
        return (
            Line(f"{nad}{f' .. {last}' if len(row.eni_slots) > 1 else ''} (node-local config)"),
            Line("host-device: a whole ENI per pod, its primary address (outside the reservation)"),
        )
    if row.ip_management.node_local_config:
        return (
            Line(f"{nad} (node-local config)"),
            Line(f"{row.prefixes_per_node} x /{PREFIX_LENGTH} prefix(es) per node, host-local"),
        )
    ip_range, gateway = whereabouts_range_and_gateway(row.subnet_cidr, row.reservation_cidr)
    return (Line(nad), Line(f"range {ip_range} via {gateway}"))


def ipv6_plan(row: NetworkPlanRow) -> tuple[Line, ...]:
    """A dual-stack subnet's IPv6 side: which /64 of the VPC block, which block of it pods use
    (both known at deploy time only, so drawn by number)."""
    if row.ipv6 is None:
        return ()
    ipv6 = row.ipv6
    return (
        Line(
            f"IPv6 /64 no. {ipv6.subnet_index} of the VPC /56, "
            f"pods /{ipv6.pod_range_prefix_length} no. {ipv6.pod_range_offset}"
        ),
    )


def network_box(config: AppConfig, network: MultusNetworkConfig) -> Box:
    """A Multus network's settings shared by its subnets in every AZ: the pools that attach it,
    its routes, its security group's rules."""
    pools = [pool.name for pool in config.node_pools if attaches(config, pool, network)]
    attached = f"attached by pools: {', '.join(pools)}" if pools else "attached by no pool"
    default_route = (
        (Line(f"route {ANYWHERE} -> {ROUTE_TARGET_NAMES['nat_gateway']} (nat_egress)", "route"),)
        if network.nat_egress
        else ()
    )
    row = next(row for row in network_plan(config) if row.network == network.name)
    routes = [Line(route_text(route), "route") for route in row.routes]
    ingress = config.multus_ingress_rules(network)
    egress = network.security_group.egress
    return Box(
        kind="network",
        title=f"network {network.name}  (interface {row.interface_name}, MTU {row.mtu})",
        lines=(
            Line(attached),
            *default_route,
            *routes,
            *rule_lines("ingress", ingress),
            *rule_lines("egress", egress),
        ),
        group_id=f"network-{network.name}",
    )


def attaches(config: AppConfig, pool: NodePoolConfig, network: MultusNetworkConfig) -> bool:
    return any(row.network == network.name for row in config.pool_plan(pool))


def route_text(route: PlannedRoute) -> str:
    target = ROUTE_TARGET_NAMES[route.target]
    named = target if route.target_id is None else f"{target} {route.target_id}"
    return f"route {route.destination} -> {named}"


def rule_lines(direction: str, rules: list[SecurityGroupRuleConfig]) -> list[Line]:
    """The rules of one direction; none at all is drawn too, as it admits only replies."""
    if not rules:
        return [Line(f"{direction}: no rule (replies only)", "rule")]
    return [Line(rule_text(direction, rule), "rule") for rule in rules]


def rule_text(direction: str, rule: SecurityGroupRuleConfig) -> str:
    ports = "" if rule.ports is None else f" {rule.ports}"
    peer = rule.cidr if rule.cidr is not None else f"network {rule.network}"
    side = "from" if direction == "ingress" else "to"
    description = f"  ({rule.description})" if rule.description else ""
    return f"{direction} {rule.protocol}{ports} {side} {peer}{description}"


def pool_box(config: AppConfig, pool: NodePoolConfig) -> Box:
    """A node pool and the Multus networks its nodes attach, an ENI each at its device index."""
    attachments = tuple(
        line for row in networks_in_order(config.pool_plan(pool)) for line in attachment_lines(row)
    )
    return Box(
        kind="pool",
        title=f"node pool {pool.name}",
        lines=attachments or (Line("no Multus network"),),
        group_id=f"pool-{pool.name}",
    )


def attachment_lines(row: NetworkPlanRow) -> tuple[Line, ...]:
    """The network at its device index (and network card, unless 0), and on a node_prefix
    network the prefixes this pool's nodes take (they depend on the pool's sizes) on a line of
    their own."""
    card = f"card {row.network_card} " if row.network_card else ""
    slots = row.eni_slots
    devices = (
        f"devices {slots[0].device_index}-{slots[-1].device_index}"
        if len(slots) > 1
        else f"device {row.device_index}"
    )
    names = ", ".join(slot.interface_name for slot in slots)
    attachment = Line(f"{card}{devices}: {row.network} as {names}")
    if not row.prefixes_per_node:
        return (attachment,)
    return (attachment, Line(f"    {row.prefixes_per_node} x /{PREFIX_LENGTH} prefixes per node"))


def vpc_summary(config: AppConfig) -> tuple[str, str]:
    """The picture's title and the NAT part of its subtitle."""
    existing = config.vpc.existing
    if existing is None:
        return f"VPC {config.vpc.cidr}", f"NAT gateways: {config.vpc.nat_gateways}"
    nat = ", ".join(dict.fromkeys(existing.nat_gateway_ids)) or "none"
    return f"VPC {existing.vpc_id} {', '.join(existing.cidrs)} (given)", f"NAT gateways: {nat}"
