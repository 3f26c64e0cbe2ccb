"""The end of pytest's summary gives each tier's cost and names each tier with skipped tests and
why (tests/conftest.py), so a new tier shows what it adds to the budget and a run without the
data-plane VM or the cluster box cannot pass for a complete one."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from tests.conftest import TierScheduling, shared_state_tier, skipped_tiers, tier_times


def skipped(path: str, reason: str) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid=f"{path}::test",
        location=(path, 1, "test"),
        keywords={},
        outcome="skipped",
        longrepr=(path, 1, f"Skipped: {reason}"),
        when="setup",
    )


def test_skips_are_counted_per_tier_with_the_first_reason() -> None:
    reports = [
        skipped("tests/dataplane/test_multus_pods.py", "needs qemu-system-x86"),
        skipped("tests/dataplane/test_dual_stack_and_routed_chains.py", "needs qemu-system-x86"),
        skipped("tests/cluster_box/test_scheduling.py", "cluster box tier cannot run: no Go"),
        skipped("tests/integration/multus_pod_ips/test_pod_routes.py", "needs root"),
    ]
    assert skipped_tiers(reports) == {
        "dataplane": (2, "needs qemu-system-x86"),
        "cluster_box": (1, "cluster box tier cannot run: no Go"),
        "integration/multus_pod_ips": (1, "needs root"),
    }


def test_a_run_without_skips_names_no_tier() -> None:
    assert skipped_tiers([]) == {}


Phase = Literal["setup", "call", "teardown"]
Outcome = Literal["passed", "failed", "skipped"]


def phase(
    path: str, when: Phase, seconds: float, outcome: Outcome = "passed", **markers: int
) -> pytest.TestReport:
    keywords: dict[str, Any] = {"test": 1, **markers}
    return pytest.TestReport(
        nodeid=f"{path}::test",
        location=(path, 1, "test"),
        keywords=keywords,
        outcome=outcome,
        longrepr=None,
        when=when,
        duration=seconds,
    )


def test_each_tier_counts_its_tests_once_and_sums_every_phase() -> None:
    vm = "tests/dataplane/test_multus_pods.py"
    reports = [
        phase(vm, "setup", 1.0),
        phase(vm, "call", 600.0),
        phase(vm, "teardown", 0.5),
        phase("tests/unit/charts/test_chart.py", "setup", 0.25),
        phase("tests/unit/charts/test_chart.py", "call", 0.5),
        phase("tests/unit/charts/test_chart.py", "teardown", 0.25),
    ]
    assert tier_times(reports) == {"dataplane": (1, 601.5), "unit": (1, 1.0)}


def test_unit_tests_the_fast_loop_leaves_out_are_counted_apart() -> None:
    reports = [
        phase("tests/unit/test_examples.py", "call", 30.0, examples=1),
        phase("tests/unit/testing_support/test_vpc_fabric.py", "call", 2.0, integration=1),
        phase("tests/unit/test_config.py", "call", 0.1),
    ]
    assert tier_times(reports) == {
        "unit (examples)": (1, 30.0),
        "unit (integration)": (1, 2.0),
        "unit": (1, 0.1),
    }


def test_a_test_that_skips_or_fails_in_set_up_counts_as_run() -> None:
    reports = [
        phase("tests/node_box/test_boot.py", "setup", 0.2, outcome="skipped"),
        phase("tests/node_box/test_boot.py", "teardown", 0.0),
        phase("tests/cluster_box/test_rollouts.py", "setup", 13.0, outcome="failed"),
    ]
    assert tier_times(reports) == {"node_box": (1, 0.2), "cluster_box": (1, 13.0)}


@pytest.mark.parametrize(
    ("nodeid", "unit_of_work"),
    [
        ("tests/dataplane/test_multus_pods.py::test_ping", "dataplane"),
        ("tests/cluster_box/test_rollouts.py::test_a_change_rolls[multus]", "cluster_box"),
        ("tests/node_box/test_reboot.py::TestReboot::test_up", "node_box"),
        # Only a tier's own directory: a unit test about the tier is an ordinary module.
        ("tests/unit/dataplane/test_x.py::test_y", None),
        ("tests/unit/testing_support/test_node_box.py::test_image", None),
        ("tests/dataplane.py::test_z", None),
    ],
)
def test_a_shared_state_tier_is_one_unit_of_work_on_xdist(
    nodeid: str, unit_of_work: str | None
) -> None:
    assert shared_state_tier(nodeid) == unit_of_work


def test_the_vm_tiers_share_one_unit_of_work_and_the_other_tiers_have_their_own() -> None:
    scheduler = object.__new__(TierScheduling)  # _split_scope reads no state
    scopes = {
        nodeid: scheduler._split_scope(nodeid)
        for nodeid in (
            "tests/dataplane/test_multus_pods.py::test_ping",
            "tests/node_box/test_multus_node.py::test_first_boot",
            "tests/cluster_box/test_rollouts.py::test_a_change_rolls",
            "tests/cluster_box/test_scheduling.py::test_a_pool",
            "tests/unit/test_x.py::test_y",
        )
    }
    dataplane, node_box, rollouts, scheduling, unit = scopes.values()
    assert dataplane == node_box  # one worker runs both VMs, one after the other
    assert rollouts == scheduling != dataplane
    assert unit == "tests/unit/test_x.py"
