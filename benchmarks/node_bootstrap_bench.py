"""Benchmark of the Multus ENI bootstrap against the local EC2 emulator (not a test).

Each run is a fresh instance; every EC2 call gets a fixed latency in the proxy, standing in
for the round trip to the regional endpoint. Usage: python benchmarks/node_bootstrap_bench.py
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node_bootstrap import render_user_data
from testing_support.multus_emulator import Ec2Emulator, running_emulator
from testing_support.node_prefix_pods import NodePrefixCost, measure_node_prefix

TARGET_NETWORKS = 2
TARGET_MEDIAN_SECONDS = 3.0
TARGET_CALLS_PER_NETWORK = 4


@dataclass(frozen=True)
class Result:
    """Median bootstrap time and EC2 calls of `runs` runs with `networks` Multus networks."""

    networks: int
    runs: int
    median_seconds: float
    ec2_calls: float
    ec2_client_processes: float
    aws_cli_processes: float
    median_cpu_seconds: float


def measure(emulator: Ec2Emulator, networks: int, runs: int) -> Result:
    vpc = emulator.create_multus_vpc(network_count=networks)
    user_data = render_user_data(vpc.bootstrap_props("bench-cluster"))
    seconds, calls, clients, aws_clis, cpu = [], [], [], [], []
    for _ in range(runs):
        instance_id = emulator.launch_instance(vpc, "us-west-2a", "bench-cluster")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = emulator.run_bootstrap(user_data, instance_id)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if run.returncode != 0:
            raise SystemExit(f"bootstrap failed with {networks} networks:\n{run.output}")
        seconds.append(run.seconds)
        calls.append(len(run.ec2_calls))
        clients.append(run.ec2_client_processes)
        aws_clis.append(run.aws_cli_processes)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return Result(
        networks=networks,
        runs=runs,
        median_seconds=statistics.median(seconds),
        ec2_calls=statistics.mean(calls),
        ec2_client_processes=statistics.mean(clients),
        aws_cli_processes=statistics.mean(aws_clis),
        median_cpu_seconds=statistics.median(cpu),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    with running_emulator() as emulator:
        emulator.proxy.latency_seconds = args.latency_ms / 1000
        results = [measure(emulator, networks, args.runs) for networks in args.networks]
        node_prefix = measure_node_prefix(emulator)

    print(f"EC2 latency injected per call: {args.latency_ms:.0f} ms")
    header = (
        "networks",
        "runs",
        "median wall s",
        "EC2 calls/run",
        "EC2 curl processes/run",
        "aws CLI processes/run",
        "median CPU s/run",
    )
    print(" | ".join(header))
    for result in results:
        row = (
            f"{result.networks:>8}",
            f"{result.runs:>4}",
            f"{result.median_seconds:>13.2f}",
            f"{result.ec2_calls:>13.1f}",
            f"{result.ec2_client_processes:>22.1f}",
            f"{result.aws_cli_processes:>21.1f}",
            f"{result.median_cpu_seconds:>16.2f}",
        )
        print(" | ".join(row))
    print_ip_management(results, node_prefix)
    for result in results:
        if result.networks == TARGET_NETWORKS:
            met = (
                result.median_seconds <= TARGET_MEDIAN_SECONDS
                and result.ec2_calls <= TARGET_CALLS_PER_NETWORK * result.networks
            )
            print(
                f"target ({TARGET_NETWORKS} networks: median <= {TARGET_MEDIAN_SECONDS} s, "
                f"<= {TARGET_CALLS_PER_NETWORK} EC2 calls per network): "
                f"{'met' if met else 'NOT met'}"
            )


def print_ip_management(results: list[Result], node_prefix: NodePrefixCost) -> None:
    """EC2 calls per node and per pod of both IP management modes (2 networks)."""
    whereabouts = next(r for r in results if r.networks == node_prefix.networks)
    print()
    print("IP management (2 networks) | EC2 calls/node | EC2 calls/pod")
    print(
        f"whereabouts x2              | {whereabouts.ec2_calls:>14.1f} | "
        ">= 1 (each pod's address is assigned to the ENI; not run here)"
    )
    print(
        f"whereabouts + node_prefix   | {node_prefix.ec2_calls_per_node:>14.1f} | "
        f"{node_prefix.ec2_calls_per_pod:.1f} (measured: {node_prefix.pods} pods through the "
        "real host-local)"
    )


if __name__ == "__main__":
    main()
