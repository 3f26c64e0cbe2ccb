"""Benchmark of the Multus pod IP agent against the local EC2 emulator (not a test).

One node (m5.24xlarge: 50 IPv4 addresses per ENI, the most any ENI takes, so one network's ENI
fits 49 pods) runs the agent; a burst of pods, alternating between the node's Multus networks,
reaches the CNI plugin at the same moment: every plugin process is started first and they are
then handed their configuration together, as Multus would when the kubelet starts many pods.
Measured per run: wall time from the burst until every plugin returned (each returns only once
its address is assigned, checked again against EC2 afterwards) and the EC2 calls made. Every
EC2 call gets a fixed latency in the proxy. Usage: python benchmarks/multus_pod_ips_bench.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing_support.multus_emulator import AVAILABILITY_ZONES, running_emulator
from testing_support.pod_ip_node import PodIpNode, outcome, pod_ip_vpc

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


def pods(count: int) -> list[tuple[str, str]]:
    """(master interface, address) per pod, alternating networks."""
    return [
        (_NETWORKS[n % 2][0], f"{_NETWORKS[n % 2][1]}.{_FIRST_HOST + n // 2}") for n in range(count)
    ]


def burst(node: PodIpNode, command: str, run: int, wanted: list[tuple[str, str]]) -> float:
    pending = []
    for index, (master, ip) in enumerate(wanted):
        container = f"run{run}-pod{index}"
        if command == "ADD":
            node.netns(container)
        pending.append(node.cni_command(command, container, master=master, ip=ip))
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
def benchmark_node(latency_ms: float) -> Iterator[PodIpNode]:
    """One emulated node with a running agent, every EC2 call delayed by `latency_ms`."""
    with running_emulator() as emulator:
        node = PodIpNode.bootstrap(
            emulator,
            pod_ip_vpc(emulator),
            AVAILABILITY_ZONES[0],
            "bench-cluster",
            instance_type=INSTANCE_TYPE,
            reconcile_seconds=3600,  # no reconcile calls inside the measured bursts
        )
        node.start_agent()
        emulator.proxy.latency_seconds = latency_ms / 1000
        try:
            yield node
        finally:
            node.stop_agent()


def measure(pod_count: int, runs: int, latency_ms: float) -> list[Burst]:
    wanted = pods(pod_count)
    results = []
    with benchmark_node(latency_ms) as node:
        proxy = node.emulator.proxy
        for run in range(runs):
            seconds = burst(node, "ADD", run, wanted)
            calls = len(proxy.calls)
            for master, _ in _NETWORKS:
                expected = {ip for m, ip in wanted if m == master}
                if node.addresses(master) != expected:
                    raise SystemExit(f"{master}: EC2 holds {node.addresses(master)}")
            delete_seconds = burst(node, "DEL", run, wanted)
            results.append(Burst(seconds, calls, delete_seconds, len(proxy.calls)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=TARGET_PODS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    results = measure(args.pods, args.runs, args.latency_ms)
    median = statistics.median(r.seconds for r in results)
    calls = max(r.ec2_calls for r in results)
    print(
        f"Multus pod IPs: {args.pods} pods at once on one {INSTANCE_TYPE} node, "
        f"{len(_NETWORKS)} networks, EC2 latency {args.latency_ms:.0f} ms per call"
    )
    print(
        "runs | median s to all assigned | EC2 calls (max) | median s to all released | "
        "EC2 calls (max)"
    )
    print(
        f"{len(results):>4} | {median:>24.2f} | {calls:>15} | "
        f"{statistics.median(r.delete_seconds for r in results):>24.2f} | "
        f"{max(r.delete_ec2_calls for r in results):>15}"
    )
    print(
        "per run (assign s / calls):", ", ".join(f"{r.seconds:.2f}/{r.ec2_calls}" for r in results)
    )
    if args.pods == TARGET_PODS:
        met = median <= TARGET_MEDIAN_SECONDS and calls <= TARGET_EC2_CALLS
        print(
            f"target ({TARGET_PODS} pods: median <= {TARGET_MEDIAN_SECONDS} s, <= "
            f"{TARGET_EC2_CALLS} EC2 calls): {'met' if met else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
