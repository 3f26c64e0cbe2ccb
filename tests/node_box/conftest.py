"""The node box tier: real nodes under QEMU (testing_support/node_box), booted from an image
built once per set of inputs and cached outside the clone.

`node_image` builds or finds the image for the session; `boot_node` boots a fresh box from it
for one test (a new overlay: nothing of another test's boot is seen) and ends it afterwards.
Without the box's prerequisites (root and debootstrap to build, qemu-system-x86, qemu-utils and
genisoimage to boot: `make dataplane-tools`) the tests skip and say which, except under CI=true,
where they fail. The run ends with the image's build time, each boot's and the tier's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testing_support.node_box import NodeBox, NodeImage, Unavailable, build_image
from tests.helpers import unavailable_here

#: Units a box may have failed with and still count as booted (systemd "degraded"), each with
#: the reason it fails in the box and not on a node. None so far.
KNOWN_FAILED_UNITS: frozenset[str] = frozenset()

BootNode = Callable[..., NodeBox]


@dataclass
class _Timings:
    """What the run's summary reports: the image's build, each test's boots, the tier's time."""

    image: str = ""
    boots: list[tuple[str, list[float]]] = field(default_factory=list)
    tier_seconds: float = 0.0


_TIMINGS = _Timings()


@pytest.fixture(scope="session")
def node_image() -> NodeImage:
    try:
        image = build_image()
    except Unavailable as error:
        unavailable_here(f"the node box cannot run here: {error}")
    built = image.built_seconds
    _TIMINGS.image = f"built in {built:.0f} s" if built is not None else "cached"
    _TIMINGS.image += f" ({image.directory})"
    return image


@pytest.fixture
def boot_node(
    node_image: NodeImage, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[BootNode]:
    """boot_node(user_data=..., instance_id=...) -> a box booted to the end of systemd's start
    (NodeBox.wait_until_booted), ended after the test. Its console.log stays in tmp_path."""
    boxes: list[NodeBox] = []

    def boot(**options: Any) -> NodeBox:
        box = NodeBox(node_image, tmp_path / f"box{len(boxes)}", **options)
        boxes.append(box)
        try:
            box.start()
        except Unavailable as error:
            unavailable_here(f"the node box cannot run here: {error}")
        box.wait_until_booted()
        return box

    try:
        yield boot
    finally:
        for box in boxes:
            box.stop()
            _TIMINGS.boots.append((request.node.name, box.boots.seconds))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sums the tier's own time (setup, call and teardown of its tests, the image included)."""
    if report.nodeid.startswith("tests/node_box/"):
        _TIMINGS.tier_seconds += report.duration


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TIMINGS.image:
        return
    terminalreporter.section("node box timings", sep="-")
    terminalreporter.line(f"image: {_TIMINGS.image}")
    for name, seconds in _TIMINGS.boots:
        boots = ", ".join(f"{value:.1f} s" for value in seconds)
        terminalreporter.line(f"boots of {name}: {boots}")
    terminalreporter.line(
        f"tier (setup, call and teardown of its tests): {_TIMINGS.tier_seconds:.0f} s"
    )
