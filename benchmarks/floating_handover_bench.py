"""Benchmark of a floating address's handover on the local EC2 emulator (not a test).

Two nodes in one subnet run the pod IP agent, each Multus ENI stood in for by a veth end
(testing_support/gratuitous_arp.py); the pods of an active/standby pair take turns announcing
the floating address with a gratuitous ARP, as keepalived does on becoming master. Measured per
handover: from the gratuitous ARP until EC2 (moto) shows the address on the announcing node's
ENI, and until that node's IMDS lists it there (network/interfaces/macs/<mac>/local-ipv4s). The
emulator's IMDS shows a move as soon as EC2 made it (EniAddressModel.remap_seconds 0): on AWS the
VPC's remapping adds its own time to the second column. Every EC2 call gets a fixed latency in
the proxy. Needs root (veth links, packet sockets). Usage: python
benchmarks/floating_handover_bench.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from multus_pod_ips.agent.floating import CLAIM_REPEAT_SECONDS
from testing_support.gratuitous_arp import VethPod, floating_node, root_can_make_links
from testing_support.multus_emulator import AVAILABILITY_ZONES, running_emulator
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc

FLOATING = "10.0.4.60"  # in the emulator's static range 10.0.4.48/28
POLL_SECONDS = 0.005


@dataclass(frozen=True)
class Handover:
    """Seconds from the gratuitous ARP until EC2, and until IMDS, showed the address moved."""

    to_ec2: float
    to_imds: float


@contextmanager
def pair(latency_ms: float) -> Iterator[list[tuple[PodIpNode, VethPod]]]:
    """Two nodes of one subnet with FLOATING as floating address of their (veth) ENI."""
    links = [VethPod.create("fb"), VethPod.create("fb")]
    nodes: list[PodIpNode] = []
    try:
        with running_emulator() as emulator:
            vpc = pod_ip_vpc(emulator)
            for link in links:
                node = floating_node(
                    emulator,
                    vpc,
                    AVAILABILITY_ZONES[0],
                    "bench-cluster",
                    link,
                    FLOATING,
                    reconcile_seconds=3600,  # no reconcile inside the measured handovers
                )
                node.start_agent()
                nodes.append(node)
            time.sleep(1.0)  # the agents' packet sockets are open
            emulator.proxy.latency_seconds = latency_ms / 1000
            yield list(zip(nodes, links, strict=True))
    finally:
        for node in nodes:
            node.stop_agent()
        for link in links:
            link.delete()


def _until(condition: Callable[[], bool], timeout: float = 30) -> float:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("the floating address did not move in time")
        time.sleep(POLL_SECONDS)
    return time.monotonic()


def measure(runs: int, latency_ms: float) -> list[Handover]:
    results = []
    with pair(latency_ms) as nodes:
        for run in range(runs):
            node, link = nodes[run % 2]
            eni = link.eni_end
            sent = link.announce(FLOATING)
            in_ec2 = _until(lambda: FLOATING in node.addresses(eni))  # noqa: B023
            in_imds = _until(lambda: FLOATING in node.imds_local_ipv4s(eni))  # noqa: B023
            results.append(Handover(in_ec2 - sent, in_imds - sent))
            time.sleep(CLAIM_REPEAT_SECONDS)  # the next announcement is a new claim
    return results


def p95(values: Sequence[float]) -> float:
    """The 95th percentile (statistics.quantiles' exclusive method; the maximum below 20)."""
    if len(values) < 20:
        return max(values)
    return statistics.quantiles(values, n=20)[18]


def table(results: Sequence[Handover]) -> list[str]:
    to_ec2 = [r.to_ec2 for r in results]
    to_imds = [r.to_imds for r in results]
    return [
        "handover                  | runs | median s to EC2 | p95 s | median s to IMDS | p95 s",
        f"gratuitous ARP -> new ENI | {len(results):>4} | {statistics.median(to_ec2):>15.3f} | "
        f"{p95(to_ec2):>5.3f} | {statistics.median(to_imds):>16.3f} | {p95(to_imds):>5.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()
    reason = "needs root" if os.geteuid() != 0 else root_can_make_links()
    if reason:
        print(f"Floating address handover: not measured here ({reason})")
        return
    results = measure(args.runs, args.latency_ms)
    print(
        f"Floating address handover between two nodes' agents, EC2 latency "
        f"{args.latency_ms:.0f} ms per call (IMDS: the emulator's, no remapping delay)"
    )
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
