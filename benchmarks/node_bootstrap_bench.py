"""Benchmark of the Multus ENI bootstrap against the local EC2 emulator (not a test).

Each run is a fresh instance; every EC2 call gets a fixed latency in the proxy, standing in
for the round trip to the regional endpoint. The first table has a row per network count (one
pool with every network); the second a row per node pool of a multi-pool config (--pools,
default examples/5g-core.json), each node running its own pool's user-data.
Usage: python benchmarks/node_bootstrap_bench.py
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config import AppConfig, parse_config
from config.network_plan import network_plan, networks_in_order
from node_bootstrap import render_user_data
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, running_emulator
from testing_support.node_prefix_pods import NodePrefixCost, measure_node_prefix

TARGET_NETWORKS = 2
TARGET_MEDIAN_SECONDS = 3.0
TARGET_CALLS_PER_NETWORK = 4
REPO = Path(__file__).resolve().parents[1]
POOLS_CONFIG = REPO / "examples" / "5g-core.json"


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
    return measured_runs(
        networks,
        [
            timed_run(
                emulator, user_data, emulator.launch_instance(vpc, "us-west-2a", "bench-cluster")
            )
            for _ in range(runs)
        ],
    )


def measure_pools(emulator: Ec2Emulator, config: AppConfig, runs: int) -> dict[str, Result]:
    """Per pool of `config`: runs of its own user-data on fresh nodes in the first AZ."""
    az = config.availability_zones[0]
    planned = emulator.create_planned_vpc(
        config.vpc.cidr,
        dict(zip(config.availability_zones, config.vpc.node_subnet_cidrs, strict=True)),
        network_plan(config),
    )
    results = {}
    for pool in config.node_pools:
        plan = config.pool_plan(pool)
        if not plan:
            continue  # a plain Karpenter pool has no Multus bootstrap
        user_data = planned.user_data("bench-cluster", plan)
        results[pool.name] = measured_runs(
            len(networks_in_order(plan)),
            [
                timed_run(
                    emulator, user_data, emulator.launch_instance(planned.vpc, az, "bench-cluster")
                )
                for _ in range(runs)
            ],
        )
    return results


def timed_run(
    emulator: Ec2Emulator, user_data: str, instance_id: str
) -> tuple[BootstrapRun, float]:
    """A bootstrap run and the CPU seconds its processes took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = emulator.run_bootstrap(user_data, instance_id)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"bootstrap failed:\n{run.output}")
    return run, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def measured_runs(networks: int, runs: list[tuple[BootstrapRun, float]]) -> Result:
    seconds = [run.seconds for run, _ in runs]
    calls = [len(run.ec2_calls) for run, _ in runs]
    clients = [run.ec2_client_processes for run, _ in runs]
    aws_clis = [run.aws_cli_processes for run, _ in runs]
    cpu = [cpu_seconds for _, cpu_seconds in runs]
    return Result(
        networks=networks,
        runs=len(runs),
        median_seconds=statistics.median(seconds),
        ec2_calls=statistics.mean(calls),
        ec2_client_processes=statistics.mean(clients),
        aws_cli_processes=statistics.mean(aws_clis),
        median_cpu_seconds=statistics.median(cpu),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--networks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    parser.add_argument("--pools", type=Path, default=POOLS_CONFIG)
    args = parser.parse_args()
    pools_config = parse_config(json.loads(args.pools.read_text()))

    with running_emulator() as emulator:
        emulator.proxy.latency_seconds = args.latency_ms / 1000
        results = [measure(emulator, networks, args.runs) for networks in args.networks]
        pools = measure_pools(emulator, pools_config, args.runs)
        node_prefix = measure_node_prefix(emulator)

    print(f"EC2 latency injected per call: {args.latency_ms:.0f} ms")
    print_results("networks", {str(result.networks): result for result in results})
    print()
    print(f"Per node pool of {args.pools.name} (each node runs its own pool's user-data):")
    print_results("pool (networks)", {f"{name} ({r.networks})": r for name, r in pools.items()})
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


def print_results(first_column: str, results: dict[str, Result]) -> None:
    header = (
        first_column,
        "runs",
        "median wall s",
        "EC2 calls/run",
        "EC2 curl processes/run",
        "aws CLI processes/run",
        "median CPU s/run",
    )
    print(" | ".join(header))
    for label, result in results.items():
        row = (
            f"{label:>{len(first_column)}}",
            f"{result.runs:>4}",
            f"{result.median_seconds:>13.2f}",
            f"{result.ec2_calls:>13.1f}",
            f"{result.ec2_client_processes:>22.1f}",
            f"{result.aws_cli_processes:>21.1f}",
            f"{result.median_cpu_seconds:>16.2f}",
        )
        print(" | ".join(row))


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
