"""Benchmark of the Multus pod IP agent against the local EC2 emulator (not a test).

One node (m5.24xlarge: 50 IPv4 addresses per ENI, the most any ENI takes, so one network's ENI
fits 49 pods; as many IPv6 ones, the bootstrap's seed address among them) runs the agent; a
burst of pods, alternating between the node's Multus networks, reaches the CNI plugin at the
same moment, once with IPv4 networks and once with dual-stack ones (each pod an IPv4 and an
IPv6 address): every plugin process is started first and they are
then handed their configuration together, as Multus would when the kubelet starts many pods.
Measured per run: wall time from the burst until every plugin returned (each returns only once
its addresses are assigned, checked again against EC2 afterwards, as is their release after
the delete burst) and the EC2 calls made. Every
EC2 call gets a fixed latency in the proxy. Usage: python benchmarks/multus_pod_ips_bench.py
"""

from __future__ import annotations

import argparse
import ipaddress
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing_support.multus_emulator import AVAILABILITY_ZONES, running_emulator
from testing_support.pod_ip_node import (
    EMULATOR_RANGES,
    PodIpNode,
    dual_stack_ranges,
    outcome,
    pod_ip_vpc,
)

TARGET_PODS = 50
TARGET_MEDIAN_SECONDS = 3.0
TARGET_EC2_CALLS = 10
INSTANCE_TYPE = "m5.24xlarge"
# Host addresses inside the emulator's reservations (10.0.4.32/27 and 10.0.6.32/27 in AZ a).
_FIRST_HOST = 33
_NETWORKS = (("multus1", "10.0.4"), ("multus2", "10.0.6"))


@dataclass(frozen=True)
class Burst:
    """One measured burst of pods: wall time and EC2 calls to add them, then to delete them."""

    seconds: float
    ec2_calls: int
    delete_seconds: float
    delete_ec2_calls: int


@dataclass(frozen=True)
class BenchPod:
    """One pod of a burst: its network's master interface, its address and, on a dual-stack
    network, its IPv6 address."""

    master: str
    ip: str
    ipv6: str | None = None


def pods(count: int, ipv6_ranges: Mapping[str, str] | None = None) -> list[BenchPod]:
    """The burst's pods, alternating networks; with an IPv6 address of its network's range
    (master interface -> IPv6 pod range) on the networks `ipv6_ranges` names."""
    ranges = {master: ipaddress.ip_network(cidr) for master, cidr in (ipv6_ranges or {}).items()}
    wanted = []
    for n in range(count):
        master, prefix = _NETWORKS[n % 2]
        ipv6 = str(ranges[master][1 + n // 2]) if master in ranges else None
        wanted.append(BenchPod(master, f"{prefix}.{_FIRST_HOST + n // 2}", ipv6))
    return wanted


def burst(node: PodIpNode, command: str, run: int, wanted: list[BenchPod]) -> float:
    pending = []
    for index, pod in enumerate(wanted):
        container = f"run{run}-pod{index}"
        if command == "ADD":
            node.netns(container)
        pending.append(
            node.cni_command(command, container, master=pod.master, ip=pod.ip, ipv6=pod.ipv6)
        )
    time.sleep(1.0)  # let every plugin process finish starting before the burst
    node.emulator.proxy.reset()
    started = time.monotonic()
    for plugin in pending:
        plugin.release()
    results = [outcome(plugin) for plugin in pending]
    seconds = time.monotonic() - started
    failed = [result.stdout for result in results if result.status != 0]
    if failed:
        raise SystemExit(f"{len(failed)} {command}s failed, e.g. {failed[0]}\n{node.agent_log()}")
    return seconds


@contextmanager
def benchmark_node(latency_ms: float, dual_stack: bool = False) -> Iterator[PodIpNode]:
    """One emulated node with a running agent, every EC2 call delayed by `latency_ms`; with
    dual_stack, every Multus network is dual-stack."""
    networks = [master for master, _ in _NETWORKS]
    with running_emulator() as emulator:
        vpc = pod_ip_vpc(emulator, dual_stack=networks if dual_stack else ())
        node = PodIpNode.bootstrap(
            emulator,
            vpc,
            AVAILABILITY_ZONES[0],
            "bench-cluster",
            instance_type=INSTANCE_TYPE,
            reconcile_seconds=3600,  # no reconcile calls inside the measured bursts
            interfaces={
                master: dual_stack_ranges(vpc, master) if dual_stack else EMULATOR_RANGES[master]
                for master in networks
            },
        )
        node.start_agent()
        emulator.proxy.latency_seconds = latency_ms / 1000
        try:
            yield node
        finally:
            node.stop_agent()


def measure(pod_count: int, runs: int, latency_ms: float, dual_stack: bool = False) -> list[Burst]:
    results = []
    with benchmark_node(latency_ms, dual_stack) as node:
        ranges = {m: node.ipv6_pod_range(m) for m, _ in _NETWORKS} if dual_stack else None
        wanted = pods(pod_count, ranges)
        proxy = node.emulator.proxy
        for run in range(runs):
            seconds = burst(node, "ADD", run, wanted)
            calls = len(proxy.calls)
            check_held(node, wanted, ranges, present=True)
            delete_seconds = burst(node, "DEL", run, wanted)
            check_held(node, wanted, ranges, present=False)
            results.append(Burst(seconds, calls, delete_seconds, len(proxy.calls)))
    return results


def check_held(
    node: PodIpNode, wanted: list[BenchPod], ranges: Mapping[str, str] | None, present: bool
) -> None:
    """EC2 holds exactly the burst's addresses (present) or none of them (after the DEL burst);
    the seed IPv6 address, outside the pod range, does not count."""
    for master, _ in _NETWORKS:
        held = node.addresses(master)
        if ranges:
            pod_range = ipaddress.ip_network(ranges[master])
            held |= {a for a in node.ipv6_addresses(master) if ipaddress.ip_address(a) in pod_range}
        mine = [pod for pod in wanted if pod.master == master]
        expected = {pod.ip for pod in mine} | {pod.ipv6 for pod in mine if pod.ipv6}
        if held != (expected if present else set()):
            raise SystemExit(f"{master}: EC2 holds {sorted(held)}")


def table(pod_count: int, rows: Mapping[str, list[Burst]]) -> list[str]:
    """The result table: one row per address mode (its runs' medians and maximum calls), with
    the target's verdict when the burst is the target's size."""
    lines = [
        "addresses   | runs | median s to all assigned | EC2 calls (max) | "
        "median s to all released | EC2 calls (max)"
    ]
    for mode, results in rows.items():
        median = statistics.median(r.seconds for r in results)
        calls = max(r.ec2_calls for r in results)
        verdict = ""
        if pod_count == TARGET_PODS:
            met = median <= TARGET_MEDIAN_SECONDS and calls <= TARGET_EC2_CALLS
            verdict = " | target met" if met else " | target NOT met"
        lines.append(
            f"{mode:<11} | {len(results):>4} | {median:>24.2f} | {calls:>15} | "
            f"{statistics.median(r.delete_seconds for r in results):>24.2f} | "
            f"{max(r.delete_ec2_calls for r in results):>15}{verdict}"
        )
    return lines


MODES = {"IPv4": False, "IPv4 + IPv6": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pods", type=int, default=TARGET_PODS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    rows = {
        mode: measure(args.pods, args.runs, args.latency_ms, dual_stack)
        for mode, dual_stack in MODES.items()
    }
    print(
        f"Multus pod IPs: {args.pods} pods at once on one {INSTANCE_TYPE} node, "
        f"{len(_NETWORKS)} networks, EC2 latency {args.latency_ms:.0f} ms per call"
    )
    print("\n".join(table(args.pods, rows)))
    for mode, results in rows.items():
        runs = ", ".join(f"{r.seconds:.2f}/{r.ec2_calls}" for r in results)
        print(f"{mode} per run (assign s / calls): {runs}")
    print(
        f"target ({TARGET_PODS} pods: median <= {TARGET_MEDIAN_SECONDS} s, <= "
        f"{TARGET_EC2_CALLS} EC2 calls)"
    )


if __name__ == "__main__":
    main()
