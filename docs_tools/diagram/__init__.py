"""Draw a configuration's network as SVG: the VPC, each AZ, its subnets, reservations, fixed
ranges and NADs, each Multus network's routes and security group rules, each node pool's
networks, and a legend of what is drawn.

    python -m docs_tools.diagram [-c key=value ...] [--output docs/architecture.svg]
    python -m docs_tools.diagram --all

takes the same `-c` values as `cdk synth` (for example -c config_file=...); --all redraws every
committed picture (the default config's and one per example). The output depends on the config
alone (fixed order, no timestamps), so regenerating an unchanged config gives the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from config import ConfigError
from docs_tools.context import REPO, load_from_cli
from docs_tools.diagram.layout import render_svg

DEFAULT_OUTPUT = REPO / "docs" / "architecture.svg"

__all__ = ["committed_pictures", "main", "render_svg"]


def committed_pictures() -> dict[Path, list[str]]:
    """Each picture under docs/ and the -c values it is drawn from: the default config's, and
    docs/pictures/<example>.svg for each examples/<example>.json."""
    examples = sorted((REPO / "examples").glob("*.json"))
    return {
        DEFAULT_OUTPUT: [],
        **{
            REPO / "docs" / "pictures" / f"{example.stem}.svg": [
                f"config_file={example.relative_to(REPO)}"
            ]
            for example in examples
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="context value, as for cdk synth (e.g. config_file=examples/...)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="SVG file to write")
    parser.add_argument(
        "--all", action="store_true", help="redraw every committed picture (ignores -c, --output)"
    )
    arguments = parser.parse_args(argv)
    pictures = committed_pictures() if arguments.all else {arguments.output: arguments.context}
    for output, context in pictures.items():
        try:
            loaded = load_from_cli(context)
        except ConfigError as error:
            print(error, file=sys.stderr)
            return 1
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render_svg(loaded.base), encoding="utf-8")
        print(f"wrote {output}")
    return 0
