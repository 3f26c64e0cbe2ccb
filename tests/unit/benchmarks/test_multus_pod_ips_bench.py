"""The pod IP burst benchmark's pods, table and call counts (not its timings).

The acceptance target (issue #25): 50 pods with both families get routable addresses in <= 3 s
with <= 10 EC2 calls, beside the IPv4 row.
"""

from __future__ import annotations

import ipaddress

import pytest

from benchmarks.multus_pod_ips_bench import (
    MODES,
    TARGET_EC2_CALLS,
    TARGET_MEDIAN_SECONDS,
    TARGET_PODS,
    Burst,
    measure,
    pods,
    table,
)

RANGES = {"multus1": "2600:1f14:0:4::1:0/112", "multus2": "2600:1f14:0:6::1:0/112"}


def test_dual_stack_pods_get_one_address_of_each_family_from_their_networks_ranges() -> None:
    wanted = pods(4, RANGES)

    assert [(pod.master, pod.ip) for pod in wanted] == [
        ("multus1", "10.0.4.33"),
        ("multus2", "10.0.6.33"),
        ("multus1", "10.0.4.34"),
        ("multus2", "10.0.6.34"),
    ]
    for pod in wanted:
        assert pod.ipv6 is not None
        assert ipaddress.ip_address(pod.ipv6) in ipaddress.ip_network(RANGES[pod.master])
    assert len({pod.ipv6 for pod in wanted}) == 4
    assert {pod.ipv6 for pod in pods(4)} == {None}


def burst(seconds: float, calls: int) -> Burst:
    return Burst(seconds, calls, seconds / 2, calls)


def test_the_table_has_a_row_per_mode_with_the_median_and_the_most_calls() -> None:
    lines = table(4, {"IPv4": [burst(1.0, 4), burst(2.0, 3)], "IPv4 + IPv6": [burst(3.0, 8)]})

    assert len(lines) == 3
    ipv4, dual_stack = ([cell.strip() for cell in line.split("|")] for line in lines[1:])
    assert ipv4 == ["IPv4", "2", "1.50", "4", "0.75", "4"]
    assert dual_stack == ["IPv4 + IPv6", "1", "3.00", "8", "1.50", "8"]
    assert list(MODES) == ["IPv4", "IPv4 + IPv6"]


@pytest.mark.parametrize(
    ("seconds", "calls", "verdict"),
    [
        (TARGET_MEDIAN_SECONDS, TARGET_EC2_CALLS, "target met"),
        (TARGET_MEDIAN_SECONDS + 0.01, TARGET_EC2_CALLS, "target NOT met"),
        (TARGET_MEDIAN_SECONDS, TARGET_EC2_CALLS + 1, "target NOT met"),
    ],
)
def test_the_target_verdict_at_its_boundary(seconds: float, calls: int, verdict: str) -> None:
    (_, row) = table(TARGET_PODS, {"IPv4 + IPv6": [burst(seconds, calls)]})
    assert row.endswith(f"| {verdict}")


@pytest.mark.integration
def test_a_dual_stack_burst_counts_one_call_per_family_and_eni_and_releases_all() -> None:
    """One pod per network: one assign per family per ENI (the agent read each ENI at start-up,
    in its first reconcile, before the burst), and the delete burst one unassign per family per
    ENI. measure raises SystemExit when EC2 does not hold the burst's addresses, or still holds
    any of them after the delete burst."""
    (result,) = measure(pod_count=2, runs=1, latency_ms=0.0, dual_stack=True)

    assert (result.ec2_calls, result.delete_ec2_calls) == (4, 4)
