"""The SVG the picture is made of: a canvas that collects elements and the kinds it drew."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

LINE = 15
BAR_HEIGHT = 12

COLORS = {
    "vpc": "#f7f7f7",
    "az": "#ffffff",
    "public": "#e3f1e3",
    "nodes": "#e4ecf7",
    "multus": "#fdf1e1",
    "network": "#f3eefa",
    "pool": "#eaf5f4",
    "bar": "#f4d7ae",
    "reservation": "#d9822b",
    "static_range": "#8c3b0c",
    "stroke": "#5f6b7a",
    "text": "#1f2933",
    "muted": "#52606d",
    "route": "#1f5fa8",
    "rule": "#a8321f",
}


class Canvas:
    """The picture's elements in drawing order, and every kind of element drawn, so the legend
    explains exactly what the picture shows."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kinds: set[str] = set()

    def rect(
        self, x: float, y: float, width: float, height: float, kind: str, **extra: str
    ) -> None:
        """A rectangle filled in the color of `kind`; `extra` are further SVG attributes."""
        self.kinds.add(kind)
        attributes = "".join(f" {name}={quoteattr(value)}" for name, value in sorted(extra.items()))
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}" '
            f'fill="{COLORS[kind]}" stroke="{COLORS["stroke"]}"{attributes}/>'
        )

    def text(
        self, x: float, y: float, content: str, kind: str = "text", bold: bool = False
    ) -> None:
        """One line of text in the color of `kind` (text, muted, route, rule)."""
        self.kinds.add(kind)
        weight = ' font-weight="bold"' if bold else ""
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" fill="{COLORS[kind]}"{weight}>{escape(content)}</text>'
        )

    def open_group(self, group_id: str) -> None:
        # Groups name what their texts belong to (a zone, a network, a pool), which readers of
        # the SVG and the tests use to find an element in its place.
        self.parts.append(f"<g id={quoteattr(group_id)}>")

    def close_group(self) -> None:
        self.parts.append("</g>")

    def svg(self, width: float, height: float, title: str) -> str:
        head = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" '
            'font-size="12">',
            f"<title>{escape(title)}</title>",
            f'<rect width="{width:.0f}" height="{height:.0f}" fill="#ffffff"/>',
        ]
        return "\n".join([*head, *self.parts, "</svg>"]) + "\n"
