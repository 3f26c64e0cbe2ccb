"""Draw a configuration's network as SVG: the VPC, each AZ, its subnets, reservations and NADs.

    python -m docs_tools.diagram [-c key=value ...] [--output docs/architecture.svg]

takes the same `-c` values as `cdk synth` (for example -c config_file=...). Every CIDR, name and
range comes from the validated config and from the helpers the NAD chart itself uses, so the
picture shows what the app deploys. The output depends on the config alone (fixed order, no
timestamps), so regenerating an unchanged config gives the same bytes.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from charts.nad_cni_configs import whereabouts_range_and_gateway
from config import AppConfig, ConfigError
from config.model import ExistingVpcConfig
from config.network_plan import NetworkPlanRow, network_plan, networks_in_order
from config.node_prefix import PREFIX_LENGTH
from docs_tools.context import REPO, load_from_cli

DEFAULT_OUTPUT = REPO / "docs" / "architecture.svg"

MARGIN = 16
VPC_PADDING = 14
VPC_HEADER = 56
AZ_WIDTH = 340
AZ_GAP = 14
AZ_HEADER = 30
ROW_GAP = 8
ROW_INSET = 10
PLAIN_ROW_HEIGHT = 46
MULTUS_ROW_HEIGHT = 104
MULTUS_DETAIL_LINES = 3
LINE = 15
BAR_HEIGHT = 12
FOOTER = 56

COLORS = {
    "vpc": "#f7f7f7",
    "az": "#ffffff",
    "public": "#e3f1e3",
    "nodes": "#e4ecf7",
    "multus": "#fdf1e1",
    "bar": "#f4d7ae",
    "reservation": "#d9822b",
    "stroke": "#5f6b7a",
    "text": "#1f2933",
    "muted": "#52606d",
}


@dataclass(frozen=True)
class Row:
    """One subnet of one AZ as drawn: a title line, detail lines, and for Multus subnets the
    address bar with the reservation inside it."""

    kind: str
    title: str
    details: tuple[str, ...]
    subnet: str | None = None
    reservation: str | None = None

    @property
    def height(self) -> int:
        if not self.reservation:
            return PLAIN_ROW_HEIGHT
        # Room for the reservation, the NAD and its range; a dual-stack subnet has a line more.
        return MULTUS_ROW_HEIGHT + LINE * (len(self.details) - MULTUS_DETAIL_LINES)


def multus_row(row: NetworkPlanRow, nat_egress: bool) -> Row:
    return Row(
        kind="multus",
        title=f"{row.network}  {row.subnet_cidr}" + ("" if nat_egress else "  (no NAT route)"),
        details=(f"reservation {row.reservation_cidr}", *address_plan(row), *ipv6_plan(row)),
        subnet=row.subnet_cidr,
        reservation=row.reservation_cidr,
    )


def address_plan(row: NetworkPlanRow) -> tuple[str, str]:
    """How pods get addresses on this subnet: the NAD, and its Whereabouts range or the
    prefixes each node takes from the reservation (node-local config)."""
    nad = f"NAD {row.nad_name}"
    if row.ip_management.node_local_config:
        return (
            f"{nad} (node-local config)",
            f"{row.prefixes_per_node} x /{PREFIX_LENGTH} prefix(es) per node, host-local",
        )
    ip_range, gateway = whereabouts_range_and_gateway(row.subnet_cidr, row.reservation_cidr)
    return (nad, f"range {ip_range} via {gateway}")


def ipv6_plan(row: NetworkPlanRow) -> tuple[str, ...]:
    """A dual-stack subnet's IPv6 side: which /64 of the VPC block, which block of it pods use
    (both known at deploy time only, so drawn by number)."""
    if row.ipv6 is None:
        return ()
    ipv6 = row.ipv6
    return (
        f"IPv6 /64 no. {ipv6.subnet_index} of the VPC /56, "
        f"pods /{ipv6.pod_range_prefix_length} no. {ipv6.pod_range_offset}",
    )


def zone_rows(config: AppConfig, index: int) -> list[Row]:
    zone = config.availability_zones[index]
    existing = config.vpc.existing
    rows = new_vpc_rows(config, index) if existing is None else existing_vpc_rows(existing, index)
    nat_egress = {network.name: network.nat_egress for network in config.multus.networks}
    rows += [
        multus_row(row, nat_egress[row.network])
        for row in network_plan(config)
        if row.availability_zone == zone
    ]
    return rows


def new_vpc_rows(config: AppConfig, index: int) -> list[Row]:
    """The public and node subnet of the AZ at `index` that the app creates."""
    has_nat = config.vpc.nat_gateways == "per_az" or index == 0
    return [
        Row(
            kind="public",
            title=f"public  {config.vpc.public_subnet_cidrs[index]}",
            details=("NAT gateway, load balancers" if has_nat else "load balancers",),
        ),
        Row(
            kind="nodes",
            title=f"nodes  {config.vpc.node_subnet_cidrs[index]}",
            details=("system and Karpenter nodes (primary ENI)",),
        ),
    ]


def existing_vpc_rows(existing: ExistingVpcConfig, index: int) -> list[Row]:
    """The network team's public (if any) and node subnet of the AZ at `index`."""
    public = existing.public_subnets[index : index + 1]
    rows = [
        Row(kind="public", title=f"public  {s.cidr}", details=(f"{s.id} (given)",)) for s in public
    ]
    node = existing.node_subnets[index]
    nodes = Row(
        kind="nodes",
        title=f"nodes  {node.cidr}",
        details=(f"{node.id} (given): system and Karpenter nodes",),
    )
    return [*rows, nodes]


def vpc_summary(config: AppConfig) -> tuple[str, str]:
    """The picture's title and the NAT part of its subtitle."""
    existing = config.vpc.existing
    if existing is None:
        return f"VPC {config.vpc.cidr}", f"NAT gateways: {config.vpc.nat_gateways}"
    nat = ", ".join(dict.fromkeys(existing.nat_gateway_ids)) or "none"
    return f"VPC {existing.vpc_id} {', '.join(existing.cidrs)} (given)", f"NAT gateways: {nat}"


def _rect(x: float, y: float, width: float, height: float, fill: str, **extra: str) -> str:
    attributes = "".join(f" {name}={quoteattr(value)}" for name, value in sorted(extra.items()))
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
        f'fill="{fill}" stroke="{COLORS["stroke"]}"{attributes}/>'
    )


def _text(x: float, y: float, content: str, *, bold: bool = False, muted: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    color = COLORS["muted"] if muted else COLORS["text"]
    return f'<text x="{x:.1f}" y="{y:.1f}" fill="{color}"{weight}>{escape(content)}</text>'


def _address_bar(x: float, y: float, width: float, subnet: str, reservation: str) -> list[str]:
    """The subnet's addresses left to right, the reservation where it sits among them."""
    block = ipaddress.IPv4Network(subnet)
    reserved = ipaddress.IPv4Network(reservation)
    scale = width / block.num_addresses
    offset = int(reserved.network_address) - int(block.network_address)
    return [
        _rect(x, y, width, BAR_HEIGHT, COLORS["bar"], rx="2"),
        _rect(
            x + offset * scale,
            y,
            max(reserved.num_addresses * scale, 2.0),
            BAR_HEIGHT,
            COLORS["reservation"],
        ),
    ]


def _row(x: float, y: float, width: float, row: Row) -> list[str]:
    parts = [_rect(x, y, width, row.height, COLORS[row.kind], rx="4")]
    text_x, baseline = x + 8, y + LINE + 2
    parts.append(_text(text_x, baseline, row.title, bold=True))
    if row.subnet and row.reservation:
        baseline += 6
        parts += _address_bar(text_x, baseline, width - 16, row.subnet, row.reservation)
        baseline += BAR_HEIGHT
    for line in row.details:
        baseline += LINE
        parts.append(_text(text_x, baseline, line, muted=True))
    return parts


def _zone(x: float, y: float, height: float, zone: str, rows: Sequence[Row]) -> list[str]:
    parts = [
        _rect(x, y, AZ_WIDTH, height, COLORS["az"], rx="6", **{"stroke-dasharray": "6 4"}),
        _text(x + 10, y + 20, f"Availability zone {zone}", bold=True),
    ]
    row_y = y + AZ_HEADER
    for row in rows:
        parts += _row(x + ROW_INSET, row_y, AZ_WIDTH - 2 * ROW_INSET, row)
        row_y += row.height + ROW_GAP
    return parts


def render_svg(config: AppConfig) -> str:
    zones = [zone_rows(config, index) for index in range(len(config.availability_zones))]
    zone_height = AZ_HEADER + max(sum(row.height + ROW_GAP for row in rows) for rows in zones)
    count = len(zones)
    vpc_width = 2 * VPC_PADDING + count * AZ_WIDTH + (count - 1) * AZ_GAP
    vpc_height = VPC_HEADER + zone_height + VPC_PADDING
    width, height = vpc_width + 2 * MARGIN, vpc_height + 2 * MARGIN + FOOTER
    vpc, nat = vpc_summary(config)
    title = f"{vpc} in {config.region}, cluster {config.cluster_name}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        _rect(MARGIN, MARGIN, vpc_width, vpc_height, COLORS["vpc"], rx="8"),
        _text(MARGIN + VPC_PADDING, MARGIN + 22, title, bold=True),
        _text(
            MARGIN + VPC_PADDING,
            MARGIN + 40,
            f"Kubernetes {config.cluster.kubernetes_version}; NADs in namespace "
            f"{config.multus.nad_namespace}; {nat}",
            muted=True,
        ),
    ]
    for index, (zone, rows) in enumerate(zip(config.availability_zones, zones, strict=True)):
        zone_x = MARGIN + VPC_PADDING + index * (AZ_WIDTH + AZ_GAP)
        parts += _zone(zone_x, MARGIN + VPC_HEADER, zone_height, zone, rows)
    parts += _legend(MARGIN, MARGIN + vpc_height + 24, config)
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _legend(x: float, y: float, config: AppConfig) -> list[str]:
    interfaces = ", ".join(
        f"{row.interface_name} (ipvlan {row.ipvlan_mode})"
        for row in networks_in_order(network_plan(config))
    )
    return [
        _rect(x, y - 10, 24, BAR_HEIGHT, COLORS["reservation"]),
        _text(
            x + 32, y, "CIDR reservation: Multus pod addresses, never given to an ENI", muted=True
        ),
        _text(
            x + 32,
            y + LINE + 2,
            f"Multus interfaces on every Karpenter node: {interfaces}",
            muted=True,
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="context value, as for cdk synth (e.g. config_file=examples/...)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="SVG file to write")
    arguments = parser.parse_args(argv)
    try:
        loaded = load_from_cli(arguments.context)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 1
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(render_svg(loaded.base), encoding="utf-8")
    print(f"wrote {arguments.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
