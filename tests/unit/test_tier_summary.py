"""The end of pytest's summary names each tier with skipped tests and why (tests/conftest.py),
so a run without the data-plane VM or the cluster box cannot pass for a complete one."""

from __future__ import annotations

import pytest

from tests.conftest import skipped_tiers


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
