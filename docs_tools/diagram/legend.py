"""The legend: one entry per kind of element the picture drew, and none for kinds it did not."""

from __future__ import annotations

from docs_tools.diagram.svg import BAR_HEIGHT, LINE, Canvas

SWATCH_WIDTH = 24

#: Kinds drawn as a filled swatch, in legend order, and what they mean.
BOX_ENTRIES = {
    "public": "public subnet",
    "nodes": "node subnet: the nodes' primary ENIs",
    "multus": "Multus subnet: one per network and AZ, its NAD and pod addresses",
    "reservation": "CIDR reservation: Multus pod addresses, never given to an ENI",
    "static_range": "fixed range: pod addresses asked for by name through the -static NAD",
    "network": "Multus network: its pools, routes and security group rules (in every AZ)",
    "pool": "Karpenter node pool: one ENI per attached network on each node, by device index",
}

#: Kinds drawn as colored lines of text.
LINE_ENTRIES = {
    "route": "route: destination -> target, in the route tables of the network's subnets",
    "rule": "security group rule: direction, protocol, ports, peer (description)",
}


def legend_entries(kinds: set[str]) -> list[tuple[str, str]]:
    """(kind, meaning) of each kind drawn, boxes first."""
    entries = {**BOX_ENTRIES, **LINE_ENTRIES}
    return [(kind, meaning) for kind, meaning in entries.items() if kind in kinds]


def legend_height(kinds: set[str]) -> int:
    return LINE * len(legend_entries(kinds))


def draw_legend(canvas: Canvas, x: float, y: float, kinds: set[str]) -> None:
    """The legend of `kinds` (taken before drawing it, since the legend draws swatches too)."""
    canvas.open_group("legend")
    for position, (kind, meaning) in enumerate(legend_entries(kinds)):
        baseline = y + position * LINE
        if kind in BOX_ENTRIES:
            canvas.rect(x, baseline - 10, SWATCH_WIDTH, BAR_HEIGHT - 2, kind)
        else:
            canvas.rect(x, baseline - 6, SWATCH_WIDTH, 3, kind)
        canvas.text(x + SWATCH_WIDTH + 8, baseline, meaning, "muted")
    canvas.close_group()
