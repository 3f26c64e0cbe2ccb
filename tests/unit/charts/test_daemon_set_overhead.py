"""docs/node-capacity.md states what our DaemonSets take from each Multus node; the charts must
deploy exactly that, and the documented totals must follow Kubernetes' effective-request rule."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "node-capacity.md"
# (DaemonSet, container) -> (init or app, (CPU request, CPU limit, memory request, memory limit));
# a CPU limit of None: none (the docs say "none").
Rows = dict[tuple[str, str], tuple[str, tuple[int, int | None, int, int]]]
MULTUS_NODE_CHARTS = ("multus", "whereabouts", "cleartaints", "multus-pod-ips")


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu_limit(quantity: str | None) -> int | None:
    return None if quantity in (None, "none") else millicores(quantity)


def mebibytes(quantity: str) -> int:
    if quantity.endswith("Gi"):
        return int(quantity[:-2]) * 1024
    assert quantity.endswith("Mi"), f"unexpected memory quantity {quantity}"
    return int(quantity[:-2])


def documented_rows() -> Rows:
    section = DOC.read_text().split("## What our DaemonSets take from each Multus node")[1]
    rows: Rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 7 or cells[0] in ("DaemonSet", "---"):
            continue
        daemon_set, container, kind, cpu, cpu_limit_cell, memory, memory_limit = cells
        figures = (
            millicores(cpu),
            cpu_limit(cpu_limit_cell),
            mebibytes(memory),
            mebibytes(memory_limit),
        )
        rows[(daemon_set, container)] = (kind, figures)
    return rows


def deployed_rows(
    seed_manifests: dict[str, list[dict[str, Any]]],
) -> Rows:
    rows: Rows = {}
    for chart in MULTUS_NODE_CHARTS:
        for manifest in seed_manifests[chart]:
            if manifest["kind"] != "DaemonSet":
                continue
            pod = manifest["spec"]["template"]["spec"]
            for kind, key in (("init", "initContainers"), ("app", "containers")):
                for container in pod.get(key, []):
                    requests = container["resources"]["requests"]
                    limits = container["resources"]["limits"]
                    figures = (
                        millicores(requests["cpu"]),
                        cpu_limit(limits.get("cpu")),
                        mebibytes(requests["memory"]),
                        mebibytes(limits["memory"]),
                    )
                    rows[(manifest["metadata"]["name"], container["name"])] = (kind, figures)
    return rows


def effective_requests(rows: Rows) -> tuple[int, int]:
    """Per pod: max(largest init request, sum of app requests); summed over the DaemonSets."""
    totals = [0, 0]
    for daemon_set in {name for name, _ in rows}:
        # (kind, (CPU request, memory request)) of each container of this DaemonSet
        mine = [
            (kind, (figures[0], figures[2]))
            for (name, _), (kind, figures) in rows.items()
            if name == daemon_set
        ]
        for slot in (0, 1):
            init = max((f[slot] for kind, f in mine if kind == "init"), default=0)
            app = sum(f[slot] for kind, f in mine if kind == "app")
            totals[slot] += max(init, app)
    return totals[0], totals[1]


def test_every_container_on_a_multus_node_is_documented_with_its_resources(
    seed_manifests: dict[str, list[dict[str, Any]]],
) -> None:
    assert deployed_rows(seed_manifests) == documented_rows()


def test_every_request_is_within_its_limit(
    seed_manifests: dict[str, list[dict[str, Any]]],
) -> None:
    # The API server refuses a container whose request exceeds its limit.
    for name, (_, (cpu, cpu_max, memory, memory_limit)) in deployed_rows(seed_manifests).items():
        assert (cpu_max is None or cpu <= cpu_max) and memory <= memory_limit, name


def test_documented_totals_follow_the_effective_request_rule() -> None:
    section = DOC.read_text().split("## What our DaemonSets take from each Multus node")[1]
    cpu, memory = re.findall(r"\*\*(\d+)(?:m|Mi)\*\*", section)
    assert (int(cpu), int(memory)) == effective_requests(documented_rows())


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # An init container larger than the app containers sets the pod's request.
        ({("a", "i"): ("init", (300, 0, 10, 0)), ("a", "c"): ("app", (100, 0, 50, 0))}, (300, 50)),
        # App containers add up; a smaller init container does not count.
        (
            {
                ("a", "i"): ("init", (50, 0, 10, 0)),
                ("a", "c"): ("app", (40, 0, 20, 0)),
                ("a", "d"): ("app", (30, 0, 20, 0)),
            },
            (70, 40),
        ),
    ],
)
def test_effective_request_rule(rows: Rows, expected: tuple[int, int]) -> None:
    assert effective_requests(rows) == expected
