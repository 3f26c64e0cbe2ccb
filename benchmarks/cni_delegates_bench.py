"""Memory and CPU of the CNI delegates that Multus thick runs in its own container (not a test).

Multus thick (v4.1.4, pkg/server/exec_chroot.go, ChrootExec.ExecPlugin) starts every delegate
plugin as a child process of multus-daemon, one request per pod and no limit on how many at
once, so every delegate counts against the kube-multus container's memory and CPU limits
(docs/node-capacity.md, "Sizing the Multus daemon"). Measured here for a burst of pods:

- multus-pod-ip, our Python plugin, for each pod of a burst on one node running the agent
  against the EC2 emulator (the same burst as benchmarks/multus_pod_ips_bench.py: every
  process is started, then all are handed their configuration at once). It waits for the
  agent's EC2 assignment, so the whole burst is alive at the same time.
- host-local from containernetworking-plugins (Debian, `make cni-plugins`), the same burst
  size: a Go CNI plugin of the same code base as ipvlan and sbr, the other delegates of our
  NADs. Whereabouts is not packaged and cannot be built here (docs/node-capacity.md gives its
  estimate, its sources and how to measure the whole container on a node).

Peak RSS: the largest sum over live plugin processes of /proc/<pid>/status VmRSS (counts pages
the processes share once per process: an upper bound of what the container's cgroup is charged)
and of RssAnon (private memory only), sampled every few milliseconds. CPU: user + system seconds
of the finished plugins (getrusage(RUSAGE_CHILDREN)).
Usage: python benchmarks/cni_delegates_bench.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.multus_pod_ips_bench import INSTANCE_TYPE, TARGET_PODS, benchmark_node, burst, pods
from multus_pod_ips import CNI_PLUGIN_SCRIPT
from testing_support.pod_ip_node import PendingCni, outcome

CNI_PLUGIN_DIR = Path("/usr/lib/cni")
SAMPLE_SECONDS = 0.005
KIB_PER_MIB = 1024


@dataclass(frozen=True)
class Footprint:
    """What one burst of plugin processes took."""

    processes: int
    peak_rss_mib: float  # sum of VmRSS over the processes alive at the same moment
    peak_anon_mib: float  # sum of RssAnon at that sampling moment
    peak_concurrent: int
    cpu_seconds: float

    def row(self, name: str) -> str:
        per_process = self.peak_rss_mib / max(self.peak_concurrent, 1)
        return (
            f"{name:<26} | {self.processes:>9} | {self.peak_concurrent:>10} | "
            f"{self.peak_rss_mib:>13.1f} | {self.peak_anon_mib:>14.1f} | {per_process:>15.1f} | "
            f"{self.cpu_seconds:>7.2f} | {1000 * self.cpu_seconds / self.processes:>13.1f}"
        )


def _children_matching(marker: str) -> list[int]:
    parent = str(os.getpid())
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            command_line = Path(entry.path, "cmdline").read_bytes()
        except OSError:  # gone between the listing and the read
            continue
        # The command name may hold spaces and parentheses: the parent PID follows the last ")".
        if stat.rsplit(")", 1)[1].split()[1] == parent and marker.encode() in command_line:
            found.append(int(entry.name))
    return found


def _memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of a live process, 0 once it has exited."""
    values = {"VmRSS": 0, "RssAnon": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in values:
                values[key] = int(rest.split()[0])
    except OSError:
        pass
    return values["VmRSS"], values["RssAnon"]


@contextmanager
def footprint(marker: str, processes: int) -> Iterator[Callable[[], Footprint]]:
    """Samples this process's children whose command line holds `marker` while the block runs;
    the yielded function returns their footprint once the block is done."""
    peak = {"rss": 0, "anon": 0, "count": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            memory = [_memory_kib(pid) for pid in _children_matching(marker)]
            rss = sum(m[0] for m in memory)
            if rss > peak["rss"]:
                peak.update(rss=rss, anon=sum(m[1] for m in memory))
            peak["count"] = max(peak["count"], sum(1 for m in memory if m[0]))
            time.sleep(SAMPLE_SECONDS)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result: list[Footprint] = []
    try:
        yield lambda: result[0]
    finally:
        done.set()
        sampler.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        result.append(
            Footprint(
                processes=processes,
                peak_rss_mib=peak["rss"] / KIB_PER_MIB,
                peak_anon_mib=peak["anon"] / KIB_PER_MIB,
                peak_concurrent=peak["count"],
                cpu_seconds=cpu,
            )
        )


def multus_pod_ip_bursts(pod_count: int, runs: int, latency_ms: float) -> list[Footprint]:
    """ADD then DEL bursts of our plugin against the agent on one emulated node."""
    wanted = pods(pod_count)
    measured = []
    with benchmark_node(latency_ms) as node:
        for run in range(runs):
            for command in ("ADD", "DEL"):
                with footprint(CNI_PLUGIN_SCRIPT.name, pod_count) as result:
                    burst(node, command, run, wanted)
                measured.append(result())
    return measured


def go_plugin_burst(plugin: Path, pod_count: int) -> Footprint:
    """`pod_count` concurrent ADDs of an IPAM plugin on one shared range (host-local takes a
    file lock per range, as Whereabouts takes its lease, so the burst queues)."""
    with tempfile.TemporaryDirectory(prefix="cni-delegates-bench-") as data_dir:
        config = json.dumps(
            {
                "cniVersion": "0.3.1",
                "name": "bench",
                "ipam": {
                    "type": plugin.name,
                    "ranges": [[{"subnet": "10.99.0.0/24"}]],
                    "dataDir": data_dir,
                },
            }
        )
        with footprint(str(plugin), pod_count) as result:
            started = [
                PendingCni(
                    subprocess.Popen(
                        [str(plugin)],
                        env={
                            "CNI_COMMAND": "ADD",
                            "CNI_CONTAINERID": f"bench-{index}",
                            "CNI_NETNS": f"/var/run/netns/bench-{index}",
                            "CNI_IFNAME": "net1",
                            "CNI_PATH": str(plugin.parent),
                        },
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    ),
                    config,
                )
                for index in range(pod_count)
            ]
            time.sleep(0.5)  # every process started before the burst, as for our plugin
            for pending in started:
                pending.release()
            failed = [
                result.stdout + result.stderr
                for result in map(outcome, started)
                if result.status != 0
            ]
        if failed:
            raise SystemExit(f"{len(failed)} {plugin.name} ADDs failed, e.g. {failed[0]}")
    return result()


def _worst(footprints: list[Footprint]) -> Footprint:
    return max(footprints, key=lambda f: (f.peak_rss_mib, f.cpu_seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--pods", type=int, default=TARGET_PODS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=150.0)
    args = parser.parse_args()

    ours = multus_pod_ip_bursts(args.pods, args.runs, args.latency_ms)
    rows = [
        ("multus-pod-ip ADD (worst)", _worst(ours[0::2])),
        ("multus-pod-ip DEL (worst)", _worst(ours[1::2])),
    ]
    host_local = CNI_PLUGIN_DIR / "host-local"
    if shutil.which(str(host_local)):
        rows.append(("host-local ADD", go_plugin_burst(host_local, args.pods)))
    else:
        print(f"{host_local} not found: skipped (make cni-plugins installs it)")
    print(
        f"CNI delegates: bursts of {args.pods} pods on one {INSTANCE_TYPE} node, {args.runs} "
        f"runs of multus-pod-ip, EC2 latency {args.latency_ms:.0f} ms per call"
    )
    print(
        "plugin                     | processes | concurrent | peak RSS MiB | peak anon MiB | "
        "RSS MiB/process | CPU s   | CPU ms/process"
    )
    for name, measured in rows:
        print(measured.row(name))


if __name__ == "__main__":
    main()
