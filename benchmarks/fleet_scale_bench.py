"""Fleet model: EC2 API calls per second of the Multus node bootstrap and the pod IP agent, per
API, for fleets of 10 to 1000 nodes and pod churn of 1 to 100 pods/s (not a test).

One node per IP management mode runs on the emulator with the real code: the bootstrap script
(user-data), then, in Whereabouts mode, the agent process with the CNI plugin. The EC2 requests
the proxy sees are counted per API and phase (bootstrap and agent start per node launch, the
agent at rest per node-hour, per pod started and stopped, per node drained at termination, per
burst of 50 pods on a new node), then extrapolated to the fleet and set beside each API's
documented token bucket. Usage: python benchmarks/fleet_scale_bench.py
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.multus_pod_ips_bench import burst, pods
from node_bootstrap import render_user_data
from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    Ec2Emulator,
    RecordedCall,
    running_emulator,
)
from testing_support.node_prefix_pods import CLUSTER, measure_node_prefix, node_prefix_user_data
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc

THROTTLING_SOURCE = (
    'EC2 developer guide, "Request throttling for the Amazon EC2 API" '
    "(https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html), "
    'table "Request token bucket sizes and refill rates"'
)
FLEET_SIZES = (10, 100, 1000)
CHURN_PODS_PER_SECOND = (1, 10, 100)
MODES = ("whereabouts", "node_prefix")
#: Assumptions of the extrapolation (printed with the tables).
NODE_LIFETIME_HOURS = 24.0  # every node is replaced once a day (expiry, drift, consolidation)
PODS_PER_NODE = 10  # Multus pods resident on a node, half on each of its two networks
RECONCILE_PERIOD_SECONDS = 60.0  # the chart's default
SCALE_OUT = (100, 60.0, 50)  # nodes, within seconds, Multus pods on each
#: Share of an API's refill rate the agent may use before node_prefix mode is recommended: the
#: rest is for the VPC CNI, Karpenter and the account's other clients of the same buckets.
AGENT_SHARE_OF_REFILL = 0.5
INSTANCE_TYPE = "m5.24xlarge"  # 50 IPv4 addresses per ENI: room for the 50-pod burst
MEASURE_RECONCILE_SECONDS = 0.5
STEADY_WINDOW_SECONDS = 8.0
QUIET_RECONCILE_SECONDS = 3600.0  # while churn is measured: no reconcile in the counts


@dataclass(frozen=True)
class Bucket:
    """A request token bucket: maximum capacity, refill rate per second, the table's row."""

    capacity: float
    refill: float
    row: str


#: Rows of the "Uncategorized actions" table for the actions the bootstrap and agent call.
UNCATEGORIZED = {
    action: Bucket(capacity, refill, f"uncategorized: {action}")
    for action, capacity, refill in (
        ("AssignIpv6Addresses", 100, 5),
        ("AssignPrivateIpAddresses", 100, 5),
        ("CreateNetworkInterface", 100, 5),
        ("CreateTags", 100, 10),
        ("DeleteNetworkInterface", 100, 5),
        ("ModifyNetworkInterfaceAttribute", 100, 5),
        ("TerminateInstances", 100, 5),
        ("UnassignPrivateIpAddresses", 100, 5),
    )
}
#: "Unfiltered and unpaginated non-mutating actions": without a filter or pagination these
#: take tokens from a smaller bucket.
UNFILTERED_SUBSET = frozenset(
    {
        "DescribeInstances",
        "DescribeInstanceStatus",
        "DescribeNetworkInterfaces",
        "DescribeSecurityGroups",
        "DescribeSnapshots",
        "DescribeSpotInstanceRequests",
        "DescribeVolumes",
    }
)
UNFILTERED = Bucket(50, 10, "unfiltered and unpaginated non-mutating actions")
NON_MUTATING = Bucket(100, 20, "non-mutating actions")
MUTATING = Bucket(50, 5, "mutating actions")
_UNFILTERED_SUFFIX = " (unfiltered)"


def api_of(action: str, params: Mapping[str, str]) -> str:
    """The bucket a request takes its token from, named by its action ("... (unfiltered)" for
    the unfiltered and unpaginated subset asked without a filter or pagination)."""
    paged_or_filtered = any(
        key.startswith("Filter.") or key in ("MaxResults", "NextToken") for key in params
    )
    if action in UNFILTERED_SUBSET and not paged_or_filtered:
        return action + _UNFILTERED_SUFFIX
    return action


def bucket_of(api: str) -> Bucket:
    """The documented bucket of an api_of name. Every action is in one of the page's categories:
    non-mutating (Describe*, List*, Search*, Get*), its unfiltered subset, uncategorized, or
    else mutating (our actions are none of the resource-intensive ones)."""
    if api.endswith(_UNFILTERED_SUFFIX):
        return UNFILTERED
    if api in UNCATEGORIZED:
        return UNCATEGORIZED[api]
    if api.startswith(("Describe", "List", "Search", "Get")):
        return NON_MUTATING
    return MUTATING


def count(calls: Iterable[RecordedCall]) -> Counter[str]:
    return Counter(api_of(call.action, call.params) for call in calls)


@dataclass(frozen=True)
class NodeCost:
    """EC2 requests per API of one node, measured: per launch (bootstrap, agent start), per
    node-hour at rest, per pod started and stopped, per node drained, per burst of pods."""

    bootstrap: Mapping[str, float]
    agent_start: Mapping[str, float]
    steady_per_hour: Mapping[str, float]
    per_pod: Mapping[str, float]
    teardown: Mapping[str, float]
    burst: Mapping[str, float]

    def apis(self) -> list[str]:
        phases = (self.bootstrap, self.agent_start, self.steady_per_hour, self.per_pod)
        return sorted({api for phase in (*phases, self.teardown, self.burst) for api in phase})


PHASES = ("launch", "steady", "churn", "teardown")


def fleet_rates(cost: NodeCost, nodes: int, churn: float) -> dict[str, dict[str, float]]:
    """Calls per second per phase and API: launches and terminations at nodes / lifetime each,
    the agent at rest on every node, `churn` pods started (and as many stopped) per second
    across the cluster, each pod costing per_pod (no batching across pods: conservative)."""
    turnover = nodes / (NODE_LIFETIME_HOURS * 3600)
    launch = Counter(cost.bootstrap) + Counter(cost.agent_start)
    return {
        "launch": {api: calls * turnover for api, calls in launch.items()},
        "steady": {api: calls * nodes / 3600 for api, calls in cost.steady_per_hour.items()},
        "churn": {api: calls * churn for api, calls in cost.per_pod.items()},
        "teardown": {api: calls * turnover for api, calls in cost.teardown.items()},
    }


def seconds_until_empty(bucket: Bucket, demand: float) -> float | None:
    """How long a full bucket lasts at `demand` requests/s (None: the refill keeps up)."""
    if demand <= bucket.refill:
        return None
    return bucket.capacity / (demand - bucket.refill)


def scale_out(cost: NodeCost, nodes: int, seconds: float) -> dict[str, float]:
    """Requests/s per API while `nodes` launch evenly within `seconds`, each bootstrapping,
    starting its agent and taking a burst of pods."""
    per_node = Counter(cost.bootstrap) + Counter(cost.agent_start) + Counter(cost.burst)
    return {api: calls * nodes / seconds for api, calls in per_node.items()}


def churn_limit(cost: NodeCost, share: float) -> tuple[float, str] | None:
    """The cluster-wide pod churn (pods/s) at which per-pod calls use `share` of the tightest
    API's refill rate, and that API (None: pods cost no EC2 call)."""
    limits = [
        (share * bucket_of(api).refill / calls, api) for api, calls in cost.per_pod.items() if calls
    ]
    return min(limits) if limits else None


def nodes_within(per_node: Mapping[str, float], seconds: float) -> tuple[float, str]:
    """How many nodes, each making `per_node` requests, a full bucket plus its refill carries
    within `seconds`, and the API that limits it."""
    return min(
        ((bucket_of(api).capacity + bucket_of(api).refill * seconds) / calls, api)
        for api, calls in per_node.items()
        if calls
    )


# --- measurement --------------------------------------------------------------------------------


def restart(node: PodIpNode, reconcile_seconds: float) -> None:
    node.stop_agent()
    node.reconcile_seconds = reconcile_seconds
    node.start_agent()


def measure_whereabouts(emulator: Ec2Emulator) -> NodeCost:
    proxy = emulator.proxy
    vpc = pod_ip_vpc(emulator)
    instance_id = emulator.launch_instance(vpc, AVAILABILITY_ZONES[0], CLUSTER, INSTANCE_TYPE)
    run = emulator.run_bootstrap(render_user_data(vpc.bootstrap_props(CLUSTER)), instance_id)
    node = PodIpNode.bootstrapped(
        emulator,
        instance_id,
        run,
        reconcile_seconds=QUIET_RECONCILE_SECONDS,
        settle_seconds=0.2,
        metrics_port=0,
    )
    proxy.reset()
    node.start_agent()
    agent_start = count(proxy.calls)
    resident = pods(PODS_PER_NODE)
    try:
        proxy.reset()
        for index, pod in enumerate(resident):
            if node.add_pod(f"pod{index}", pod.ip, pod.master).status != 0:
                raise SystemExit(f"ADD failed:\n{node.agent_log()}")
        added = count(proxy.calls)
        restart(node, MEASURE_RECONCILE_SECONDS)
        time.sleep(1.0)  # past the settle time and the agent's first reconcile
        proxy.reset()
        started = time.monotonic()
        time.sleep(STEADY_WINDOW_SECONDS)
        reconciles = (time.monotonic() - started) / MEASURE_RECONCILE_SECONDS
        per_reconcile = count(proxy.calls)
        restart(node, QUIET_RECONCILE_SECONDS)
        proxy.reset()
        for index, pod in enumerate(resident):
            node.delete_pod(f"pod{index}", pod.ip, pod.master)
        per_pod = count(proxy.calls) + added
        burst(node, "ADD", 1, resident)
        burst(node, "DEL", 1, resident)  # a drain: every pod of the node goes at once
        teardown = count(proxy.calls)
        burst(node, "ADD", 2, pods(SCALE_OUT[2]))
        new_node_burst = count(proxy.calls)
    finally:
        node.stop_agent()
    per_hour = 3600 / RECONCILE_PERIOD_SECONDS / reconciles
    return NodeCost(
        bootstrap=count(run.ec2_calls),
        agent_start=agent_start,
        steady_per_hour={api: calls * per_hour for api, calls in per_reconcile.items()},
        per_pod={api: calls / PODS_PER_NODE for api, calls in per_pod.items()},
        teardown=teardown,
        burst=new_node_burst,
    )


def measure_node_prefix_mode(emulator: Ec2Emulator) -> NodeCost:
    """Both networks in node_prefix mode: no agent runs (the chart is not deployed), pods get
    addresses from host-local (measured per pod by measure_node_prefix)."""
    vpc = emulator.create_multus_vpc(network_count=2)
    user_data = node_prefix_user_data(emulator, vpc, list(vpc.networks))
    instance_id = emulator.launch_instance(vpc, AVAILABILITY_ZONES[0], CLUSTER, INSTANCE_TYPE)
    run = emulator.run_bootstrap(user_data, instance_id)
    if run.returncode != 0:
        raise SystemExit(f"node_prefix bootstrap failed:\n{run.output}")
    pod_calls = measure_node_prefix(emulator).ec2_calls_per_pod
    if pod_calls:
        raise SystemExit(f"node_prefix pods made {pod_calls} EC2 calls each")
    return NodeCost(count(run.ec2_calls), {}, {}, {}, {}, {})


# --- output -------------------------------------------------------------------------------------


def steady_line(cost: NodeCost) -> str:
    return f"steady-state EC2 calls per node-hour: {sum(cost.steady_per_hour.values()):g}"


def print_measured(costs: Mapping[str, NodeCost]) -> None:
    print("Measured on one node (emulator, real bootstrap and agent), EC2 requests per API:")
    print(
        "mode        | API                                   | bootstrap/launch | "
        "agent start/launch | at rest/node-hour | churn/pod | teardown/node | 50-pod burst"
    )
    for mode, cost in costs.items():
        for api in cost.apis():
            cells = (
                cost.bootstrap,
                cost.agent_start,
                cost.steady_per_hour,
                cost.per_pod,
                cost.teardown,
                cost.burst,
            )
            values = [f"{cell.get(api, 0):g}" for cell in cells]
            print(
                f"{mode:<11} | {api:<37} | {values[0]:>16} | {values[1]:>18} | "
                f"{values[2]:>17} | {values[3]:>9} | {values[4]:>13} | {values[5]:>12}"
            )
    for mode, cost in costs.items():
        print(f"[{mode}] {steady_line(cost)}")


def percent(rate: float, bucket: Bucket) -> str:
    share = 100 * rate / bucket.refill
    return f"{rate:.3g} ({share:.0f}%)" if share >= 10 else f"{rate:.3g} ({share:.2g}%)"


def print_fleet(mode: str, cost: NodeCost) -> None:
    print(f"\nFleet, {mode}: EC2 requests/s per API (share of the API's refill rate)")
    header = ["API", "bucket", "refill/s"]
    header += [f"launch N={n}" for n in FLEET_SIZES] + [f"at rest N={n}" for n in FLEET_SIZES]
    header += [f"churn {c}/s" for c in CHURN_PODS_PER_SECOND]
    header += [f"teardown N={n}" for n in FLEET_SIZES]
    print(" | ".join(header))
    for api in cost.apis():
        bucket = bucket_of(api)
        cells = [api, f"{bucket.capacity:g}", f"{bucket.refill:g}"]
        by_size = [fleet_rates(cost, n, 0) for n in FLEET_SIZES]
        by_churn = [fleet_rates(cost, 0, c) for c in CHURN_PODS_PER_SECOND]
        for phase, rates in (("launch", by_size), ("steady", by_size), ("churn", by_churn)):
            cells += [percent(r[phase].get(api, 0.0), bucket) for r in rates]
        cells += [percent(r["teardown"].get(api, 0.0), bucket) for r in by_size]
        print(" | ".join(cells))
    largest = fleet_rates(cost, FLEET_SIZES[-1], 0)["steady"]
    share, api = max(
        ((100 * largest.get(api, 0.0) / bucket_of(api).refill, api) for api in cost.apis()),
        default=(0.0, ""),
    )
    print(
        f"[{mode}] {FLEET_SIZES[-1]} nodes at rest: at most {share:.3g}% of an API's refill "
        f"rate ({api if share else 'no EC2 call at all'})"
    )


def print_scale_out(cost: NodeCost) -> None:
    nodes, seconds, pods_each = SCALE_OUT
    print(
        f"\nScale-out, whereabouts: {nodes} nodes within {seconds:g} s, {pods_each} Multus pods "
        "each (every node bootstraps, starts its agent, takes its pods in one burst)"
    )
    print("API | requests | requests/s | bucket | refill/s | result")
    for api, demand in sorted(scale_out(cost, nodes, seconds).items()):
        bucket = bucket_of(api)
        empty = seconds_until_empty(bucket, demand)
        result = (
            "within the bucket"
            if empty is None or empty >= seconds
            else f"bucket empties after {empty:.0f} s"
        )
        print(
            f"{api} | {demand * seconds:g} | {demand:.3g} | {bucket.capacity:g} | "
            f"{bucket.refill:g} | {result}"
        )


def print_assumptions() -> None:
    print(f"Buckets: {THROTTLING_SOURCE}; one bucket per API and account and Region, shared")
    print("with every other client (VPC CNI, Karpenter, ...): the shares below assume the whole")
    print("bucket is this cluster's. Resource token buckets (RunInstances, ...) are not ours.")
    print("Assumptions:")
    for line in (
        f"each node lives {NODE_LIFETIME_HOURS:g} h: launches and drains at N / "
        f"{NODE_LIFETIME_HOURS:g} h each",
        f"{PODS_PER_NODE} Multus pods per node (half per network), drained at once at termination",
        "churn: pods/s started cluster-wide, as many stopped; one pod's cost as measured one "
        "at a time (no batching across pods: an upper bound)",
        f"at rest: the agent's reconcile every {RECONCILE_PERIOD_SECONDS:g} s on average "
        f"(measured every {MEASURE_RECONCILE_SECONDS:g} s for {STEADY_WINDOW_SECONDS:g} s, "
        "scaled by the number of periods)",
        "DescribeNetworkInterfaces by ID (no filter, no pagination) takes from the unfiltered "
        "bucket",
        "node_prefix mode: both networks; no agent, pods take addresses from host-local",
    ):
        print(f"  - {line}")


def print_recommendation(costs: Mapping[str, NodeCost]) -> None:
    whereabouts = costs["whereabouts"]
    limit = churn_limit(whereabouts, AGENT_SHARE_OF_REFILL)
    if limit is None:
        return
    churn, api = limit
    _, seconds, pods_each = SCALE_OUT
    # What node_prefix saves on a new node: the agent's start and the pods' assigns.
    agent_part = Counter(whereabouts.agent_start) + Counter(whereabouts.burst)
    agent_nodes, agent_api = nodes_within(agent_part, seconds)
    bootstrap_nodes, bootstrap_api = nodes_within(whereabouts.bootstrap, seconds)
    print(
        f"\nnode_prefix mode is the recommended one from {churn:.3g} pods/s of sustained "
        f"churn (per-pod {api} calls then use {AGENT_SHARE_OF_REFILL:.0%} of its refill "
        f"rate), whatever the cluster size, or from scale-outs of {agent_nodes:.0f} nodes "
        f"within {seconds:g} s with {pods_each} pods each ({agent_api}); node_prefix costs no "
        f"EC2 call per pod. The bootstrap alone, the same in both modes, carries "
        f"{bootstrap_nodes:.0f} nodes within {seconds:g} s ({bootstrap_api})."
    )


def main() -> None:
    costs: dict[str, NodeCost] = {}
    with running_emulator() as emulator:
        costs["whereabouts"] = measure_whereabouts(emulator)
    with running_emulator() as emulator:
        costs["node_prefix"] = measure_node_prefix_mode(emulator)
    print("Fleet model: EC2 API calls of the Multus node bootstrap and pod IP agent")
    print_assumptions()
    print()
    print_measured(costs)
    for mode in MODES:
        print_fleet(mode, costs[mode])
    print_scale_out(costs["whereabouts"])
    print_recommendation(costs)


if __name__ == "__main__":
    main()
