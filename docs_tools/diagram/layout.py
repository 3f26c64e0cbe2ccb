"""Where each box goes: the VPC, its AZs side by side with their subnets, then the Multus
networks and the node pools in rows as wide as the VPC, the legend below."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from config import AppConfig
from docs_tools.diagram.elements import (
    AddressBar,
    Box,
    network_box,
    pool_box,
    vpc_summary,
    zone_boxes,
)
from docs_tools.diagram.legend import draw_legend, legend_height
from docs_tools.diagram.svg import BAR_HEIGHT, LINE, Canvas

MARGIN = 16
VPC_PADDING = 14
VPC_HEADER = 56
AZ_WIDTH = 350
AZ_GAP = 14
AZ_HEADER = 30
BOX_GAP = 8
BOX_INSET = 10
SECTION_HEADER = 28
# Network lines (a route to a transit gateway, a described rule) run to ~75 characters; a
# narrower column would cut them, so two AZs' width holds one column of networks. Pool lines
# are as short as a subnet's.
NETWORK_COLUMN = 480
POOL_COLUMN = AZ_WIDTH - 2 * BOX_INSET
LEGEND_GAP = 24


def render_svg(config: AppConfig) -> str:
    zones = [zone_boxes(config, index) for index in range(len(config.availability_zones))]
    zone_height = AZ_HEADER + max(stack_height(boxes) for boxes in zones)
    count = len(zones)
    inner_width = count * AZ_WIDTH + (count - 1) * AZ_GAP
    sections = [
        (
            "Multus networks",
            NETWORK_COLUMN,
            [network_box(config, network) for network in config.multus.networks],
        ),
        (
            "Karpenter node pools",
            POOL_COLUMN,
            [pool_box(config, pool) for pool in config.node_pools],
        ),
    ]

    canvas = Canvas()
    vpc_x, vpc_y = MARGIN, MARGIN
    x = vpc_x + VPC_PADDING
    y: float = vpc_y + VPC_HEADER
    # The VPC's box is drawn first, under its contents, but its height is known only after them.
    inside = Canvas()
    for index, (zone, boxes) in enumerate(zip(config.availability_zones, zones, strict=True)):
        draw_zone(inside, x + index * (AZ_WIDTH + AZ_GAP), y, zone_height, zone, boxes)
    y += zone_height + BOX_GAP
    for heading, min_column, boxes in sections:
        columns = max(1, (inner_width + BOX_GAP) // (min_column + BOX_GAP))
        y = draw_section(inside, x, y, inner_width, columns, heading, boxes)

    vpc_width = inner_width + 2 * VPC_PADDING
    vpc_height = y - vpc_y + VPC_PADDING - BOX_GAP
    vpc, nat = vpc_summary(config)
    title = f"{vpc} in {config.region}, cluster {config.cluster_name}"
    canvas.rect(vpc_x, vpc_y, vpc_width, vpc_height, "vpc", rx="8")
    canvas.text(x, vpc_y + 22, title, bold=True)
    canvas.text(
        x,
        vpc_y + 40,
        f"Kubernetes {config.cluster.kubernetes_version}; NADs in namespace "
        f"{config.multus.nad_namespace}; {nat}",
        "muted",
    )
    canvas.parts += inside.parts
    canvas.kinds |= inside.kinds
    drawn = set(canvas.kinds)
    legend_y = vpc_y + vpc_height + LEGEND_GAP
    draw_legend(canvas, MARGIN, legend_y, drawn)
    width = vpc_width + 2 * MARGIN
    height = legend_y + legend_height(drawn) + MARGIN
    return canvas.svg(width, height, title)


def stack_height(boxes: Sequence[Box]) -> int:
    return sum(box.height + BOX_GAP for box in boxes)


def draw_zone(
    canvas: Canvas, x: float, y: float, height: float, zone: str, boxes: Sequence[Box]
) -> None:
    canvas.open_group(f"zone-{zone}")
    canvas.rect(x, y, AZ_WIDTH, height, "az", rx="6", **{"stroke-dasharray": "6 4"})
    canvas.text(x + 10, y + 20, f"Availability zone {zone}", bold=True)
    box_y = y + AZ_HEADER
    for box in boxes:
        draw_box(canvas, x + BOX_INSET, box_y, AZ_WIDTH - 2 * BOX_INSET, box)
        box_y += box.height + BOX_GAP
    canvas.close_group()


def draw_section(
    canvas: Canvas,
    x: float,
    y: float,
    width: float,
    columns: int,
    heading: str,
    boxes: Sequence[Box],
) -> float:
    """A heading and its boxes in rows of `columns`; returns where the next section starts."""
    canvas.text(x, y + 18, heading, bold=True)
    y += SECTION_HEADER
    column_width = (width - (columns - 1) * BOX_GAP) / columns
    for start in range(0, len(boxes), columns):
        row = boxes[start : start + columns]
        for position, box in enumerate(row):
            draw_box(canvas, x + position * (column_width + BOX_GAP), y, column_width, box)
        y += max(box.height for box in row) + BOX_GAP
    return y


def draw_box(canvas: Canvas, x: float, y: float, width: float, box: Box) -> None:
    if box.group_id:
        canvas.open_group(box.group_id)
    canvas.rect(x, y, width, box.height, box.kind, rx="4")
    text_x, baseline = x + 8, y + LINE + 2
    canvas.text(text_x, baseline, box.title, bold=True)
    if box.bar:
        baseline += 6
        draw_address_bar(canvas, text_x, baseline, width - 16, box.bar)
        baseline += BAR_HEIGHT
    for line in box.lines:
        baseline += LINE
        canvas.text(text_x, baseline, line.text, line.kind)
    if box.group_id:
        canvas.close_group()


def draw_address_bar(canvas: Canvas, x: float, y: float, width: float, bar: AddressBar) -> None:
    """The subnet's addresses left to right, the reservation and its fixed range where they
    sit among them."""
    block = ipaddress.IPv4Network(bar.subnet)
    scale = width / block.num_addresses
    canvas.rect(x, y, width, BAR_HEIGHT, "bar", rx="2")
    for kind, cidr in (("reservation", bar.reservation), ("static_range", bar.static_range)):
        if cidr is None:
            continue
        part = ipaddress.IPv4Network(cidr)
        offset = int(part.network_address) - int(block.network_address)
        width_of_part = max(part.num_addresses * scale, 2.0)
        canvas.rect(x + offset * scale, y, width_of_part, BAR_HEIGHT, kind)
