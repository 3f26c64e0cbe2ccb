"""The dual-stack and the routed NAD's chains from ipvlan on, in a real kernel: what a pod's
tables hold after ipvlan, sbr and multus-pod-ip, and where its packets leave.

The NADs are the chart's (charts/network_attachments.py, cni_config) with Whereabouts swapped
for static IPAM at addresses of the same ranges, gateway and routes kept
(testing_support/kernel_pods.with_static_ipam). Sources of the rules asserted:

- ipvlan adds the IPAM result's addresses, then each of its routes on net1 in the pod's main
  table with RouteAddEcmp, next to eth0's default route; it waits for duplicate address
  detection only when an IPv6 address has a gateway (containernetworking/plugins
  pkg/ipam/ipam_linux.go, ConfigureIface: the NADs here have none).
- sbr adds a rule "from <address>" per address of the result, each to a table of its own, and
  moves into that table every route of net1 whose source or gateway lies in the address's
  prefix, and every route with neither; then deletes them all from the main table
  (containernetworking/plugins plugins/meta/sbr/main.go, doRoutes; the same in v1.1.1, Debian's
  package that runs here, and v1.7.1).
- multus-pod-ip puts back the subnets (mainTableSubnet, mainTableSubnetIpv6) and the routes
  beyond the VPC (mainTableRoutes) into the main table (multus_pod_ips/cni_plugin.py).
- The VPC router of a subnet is its IPv4 network + 1 and, for IPv6, the /64's ::1 (VPC user
  guide, "Subnet CIDR blocks"); the VPC CNI gives eth0 a /32 and a default route via the on-link
  169.254.1.1 (amazon-vpc-cni-k8s docs/cni-proposal.md, testing_support/kernel_pods.py).

Each segment is a node namespace holding the ENI's stand-in (a veth, ipvlan's master) whose
other end is a namespace playing the VPC router and what lies behind it; the pod IP agent is
the chain's stand-in (testing_support/cni_chain.StandInAgent). The VPC fabric
(testing_support/vpc_fabric.py) models IPv4 only and is not used here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charts.network_attachments import (
    Ipv6Range,
    NetworkAttachment,
    cni_config,
    whereabouts_range_and_gateway,
)
from testing_support.cni_chain import ChainRun, StandInAgent
from testing_support.kernel_pods import ping_from, vpc_cni_eth0, with_static_ipam
from testing_support.kernel_vpc import in_netns, ip
from testing_support.vpc_cni_stand_in import VPC_CNI_GATEWAY

# multus2 of examples/dual-stack.json in the first AZ, with docs/network.md's /64 and its
# default pod range (pod_range_offset 1 of /112).
DUAL_STACK_SUBNET, DUAL_STACK_RESERVATION = "10.0.6.0/24", "10.0.6.32/27"
SUBNET_IPV6 = "2600:1f14:a:b06::/64"
IPV6_ROUTER = "2600:1f14:a:b06::1"
POD_RANGE_IPV6 = Ipv6Range(
    SUBNET_IPV6, "2600:1f14:a:b06::1:0", "2600:1f14:a:b06::1:ffff", IPV6_ROUTER
)
POD_A, POD_A_IPV6 = "10.0.6.40", "2600:1f14:a:b06::1:20"
POD_B, POD_B_IPV6 = "10.0.6.41", "2600:1f14:a:b06::1:21"
# Another dual-stack subnet's /64 of the VPC's block: beyond the VPC router.
OUTSIDE_THE_64 = "2600:1f14:a:b07::10"

# multus1 with a route to the RAN (multus.networks[].routes).
ROUTED_SUBNET, ROUTED_RESERVATION = "10.0.4.0/24", "10.0.4.32/27"
RAN_RANGE, GNB = "10.200.0.0/16", "10.200.0.10"
ROUTED_POD = "10.0.4.40"

INTERNET_ADDRESS = "203.0.113.10"  # TEST-NET-3: neither the VPC nor a route's destination


def dual_stack_network(routes: tuple[str, ...] = ()) -> dict[str, Any]:
    whereabouts_range, gateway = whereabouts_range_and_gateway(
        DUAL_STACK_SUBNET, DUAL_STACK_RESERVATION
    )
    return cni_config(
        NetworkAttachment(
            "multus2-us-west-2a", "multus2", "l2", whereabouts_range, gateway, routes=routes,
            ipv6=POD_RANGE_IPV6,
        )
    )  # fmt: skip


def routed_network() -> dict[str, Any]:
    whereabouts_range, gateway = whereabouts_range_and_gateway(ROUTED_SUBNET, ROUTED_RESERVATION)
    return cni_config(
        NetworkAttachment(
            "multus1-us-west-2a", "multus1", "l2", whereabouts_range, gateway, routes=(RAN_RANGE,)
        )
    )


@dataclass
class Segment:
    """A node's namespace with the network's ENI stand-in, the router's namespace behind it,
    the pods started on it and the stand-in agent their chains ask."""

    tag: str
    network: dict[str, Any]
    agent: StandInAgent
    pods: list[str]

    @property
    def node(self) -> str:
        return f"{self.tag}-node"

    @property
    def router(self) -> str:
        return f"{self.tag}-router"

    def start_pod(self, name: str, eth0_address: str, *addresses: str) -> dict[str, Any]:
        """A pod with the VPC CNI's eth0, then net1 by the NAD's chain from ipvlan: its result."""
        pod = f"{self.tag}-{name}"
        vpc_cni_eth0(pod, self.node, eth0_address)
        self.pods.append(pod)
        network = with_static_ipam(self.network, *addresses)
        chain = ChainRun(
            netns=f"/var/run/netns/{pod}",
            ifname="net1",
            agent_socket=self.agent.path,
            node_netns=self.node,
            container_id=pod,
            pod_name=pod,
        )
        return chain.add(network, network["plugins"])

    def pod(self, name: str) -> str:
        return f"{self.tag}-{name}"


def segment(tag: str, network: dict[str, Any], work: Path, router_addresses: list[str]) -> Segment:
    """The node's ENI stand-in (named as ipvlan's master) and its other end in the router's
    namespace, which holds `router_addresses` (address/prefix on the link; /32 and /128 on lo:
    hosts beyond the router)."""
    master = network["plugins"][0]["master"]
    made = Segment(tag, network, StandInAgent(work / f"{tag}-agent.sock"), [])
    for namespace in (made.node, made.router):
        ip("netns", "add", namespace)
        ip("-n", namespace, "link", "set", "lo", "up")
    # The ENI has its network's MTU, as the node's .link gives it; ipvlan takes the NAD's.
    mtu = str(network["plugins"][0]["mtu"])
    ip("-n", made.node, "link", "add", master, "mtu", mtu, "type", "veth", "peer", "name",
       "lan0", "mtu", mtu, "netns", made.router)  # fmt: skip
    ip("-n", made.node, "link", "set", master, "up")
    ip("-n", made.router, "link", "set", "lan0", "up")
    for address in router_addresses:
        on_lo = address.endswith(("/32", "/128"))
        ip("-n", made.router, "address", "add", address, "dev", "lo" if on_lo else "lan0",
           *(() if on_lo else ("nodad",)))  # fmt: skip
    return made


def remove(made: Segment) -> None:
    made.agent.close()
    for namespace in (*made.pods, made.node, made.router):
        ip("netns", "del", namespace, check=False)


@pytest.fixture
def dual_stack(tmp_path: Path) -> Iterator[Segment]:
    made = segment(
        "ds",
        dual_stack_network(),
        tmp_path,
        ["10.0.6.1/24", f"{IPV6_ROUTER}/64", f"{OUTSIDE_THE_64}/128"],
    )
    try:
        yield made
    finally:
        remove(made)


@pytest.fixture
def dual_stack_routed(tmp_path: Path) -> Iterator[Segment]:
    made = segment(
        "dr",
        dual_stack_network(routes=(RAN_RANGE,)),
        tmp_path,
        ["10.0.6.1/24", f"{IPV6_ROUTER}/64", f"{OUTSIDE_THE_64}/128", f"{GNB}/32"],
    )
    try:
        yield made
    finally:
        remove(made)


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[Segment]:
    made = segment("rt", routed_network(), tmp_path, ["10.0.4.1/24", f"{GNB}/32"])
    try:
        yield made
    finally:
        remove(made)


def routes(pod: str, *selector: str, family: str = "-4") -> list[dict[str, Any]]:
    """`ip -j <family> route show <selector>` in the pod, without IPv6 link-local routes (a
    table that holds no route of the family is empty: the kernel has no FIB table for it)."""
    listed = ip("-n", pod, "-j", family, "route", "show", *selector, check=False)
    if listed.returncode != 0 and "table does not exist" in listed.stderr:
        return []
    if listed.returncode != 0:
        raise RuntimeError(f"{pod}: ip route show {' '.join(selector)}: {listed.stderr.strip()}")
    shown = json.loads(listed.stdout)
    return [route for route in shown if not route["dst"].startswith("fe80::")]


def rules(pod: str, family: str) -> dict[str, str]:
    """The pod's "from <address>" rules: address -> table."""
    shown = json.loads(ip("-n", pod, "-j", family, "rule", "show").stdout)
    return {rule["src"]: str(rule["table"]) for rule in shown if "src" in rule}


def route_get(pod: str, *args: str) -> str:
    """`ip route get` in the pod: the route, or the kernel's refusal."""
    got = ip("-n", pod, "route", "get", *args, check=False)
    return (got.stdout or got.stderr).strip()


def unbound_source(pod: str, address: str) -> str:
    """The source address the pod's kernel gives an unbound UDP socket connected to `address`."""
    connect = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "s.connect((sys.argv[1], 7))\n"
        "print(s.getsockname()[0])\n"
    )
    return in_netns(pod, "python3", "-I", "-S", "-c", connect, address).stdout.strip()


def wait_for_dad(pod: str, timeout: float = 30) -> None:
    """Until no address of net1 is tentative: a bound socket cannot use one before."""
    deadline = time.monotonic() + timeout
    while ip("-n", pod, "-6", "address", "show", "dev", "net1", "tentative").stdout.strip():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{pod}: net1's IPv6 address stays tentative")
        time.sleep(0.2)


def test_the_dual_stack_chain_keeps_eth0s_default_and_gives_each_family_its_router(
    dual_stack: Segment,
) -> None:
    result = dual_stack.start_pod("pod-a", "10.0.2.201", POD_A, POD_A_IPV6)
    pod = dual_stack.pod("pod-a")

    assert [ip_config["address"] for ip_config in result["ips"]] == [
        f"{POD_A}/24",
        f"{POD_A_IPV6}/64",
    ]
    assert [request["ips"] for request in dual_stack.agent.requests] == [[POD_A, POD_A_IPV6]]
    # Main table: eth0's default is the only IPv4 default; net1 keeps only its subnets.
    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (DUAL_STACK_SUBNET, None, POD_A)
    ]
    ipv6_main = routes(pod, "table", "main", "dev", "net1", family="-6")
    assert [(r["dst"], r.get("gateway")) for r in ipv6_main] == [(SUBNET_IPV6, None)]
    # sbr: a rule per address, each table with its family's default via its family's router.
    ipv4_table, ipv6_table = rules(pod, "-4")[POD_A], rules(pod, "-6")[POD_A_IPV6]
    assert ipv4_table != ipv6_table
    ipv4_defaults = routes(pod, "table", ipv4_table, "default")
    assert [(r.get("gateway"), r["dev"]) for r in ipv4_defaults] == [("10.0.6.1", "net1")]
    ipv6_defaults = routes(pod, "table", ipv6_table, "default", family="-6")
    assert [(r.get("gateway"), r["dev"]) for r in ipv6_defaults] == [(IPV6_ROUTER, "net1")]
    # ... and not the other family's: sbr copies a route with a gateway only into the table of
    # the address whose prefix holds that gateway.
    assert routes(pod, "table", ipv4_table, "default", family="-6") == []
    assert routes(pod, "table", ipv6_table, "default") == []
    # Where packets leave.
    assert "dev net1" in route_get(pod, POD_B_IPV6)
    bound = route_get(pod, OUTSIDE_THE_64, "from", POD_A_IPV6)
    assert f"via {IPV6_ROUTER} dev net1" in bound, bound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    assert "via 10.0.6.1 dev net1" in route_get(pod, INTERNET_ADDRESS, "from", POD_A)


def test_dual_stack_pods_exchange_ipv6_with_each_other_and_beyond_the_router(
    dual_stack: Segment,
) -> None:
    """Two pods on the same ipvlan master (ipvlan l2 switches between its slaves) and a host
    behind the VPC router's stand-in, which owns an address of another /64."""
    dual_stack.start_pod("pod-a", "10.0.2.201", POD_A, POD_A_IPV6)
    dual_stack.start_pod("pod-b", "10.0.2.202", POD_B, POD_B_IPV6)
    pod_a, pod_b = dual_stack.pod("pod-a"), dual_stack.pod("pod-b")
    for pod in (pod_a, pod_b):
        wait_for_dad(pod)

    assert ping_from(pod_a, POD_B_IPV6)
    assert ping_from(pod_b, POD_A_IPV6)
    assert ping_from(pod_a, IPV6_ROUTER)
    assert ping_from(pod_a, OUTSIDE_THE_64, source=POD_A_IPV6)
    # Unbound beyond the /64: the main table has no IPv6 route there (`ip route get` without
    # a source answers "Network is unreachable"), but a socket's lookup then selects a source
    # address and looks up again with it (Linux net/ipv6/ip6_output.c, ip6_dst_lookup_tail),
    # which sbr's rule of net1's address matches: the only global one once DAD is done.
    assert unbound_source(pod_a, OUTSIDE_THE_64) == POD_A_IPV6
    assert ping_from(pod_a, OUTSIDE_THE_64)
    assert ping_from(pod_a, "10.0.6.1")
    # The router's stand-in knows no way to eth0's address: an IPv4 packet that left over
    # net1 from eth0's address would get no answer; one bound to net1's does.
    assert ping_from(pod_a, POD_B, source=POD_A)


def test_the_routed_chain_reaches_the_destination_over_net1_bound_or_not(routed: Segment) -> None:
    result = routed.start_pod("pod", "10.0.2.203", ROUTED_POD)
    pod = routed.pod("pod")

    assert [ip_config["address"] for ip_config in result["ips"]] == [f"{ROUTED_POD}/24"]
    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (ROUTED_SUBNET, None, ROUTED_POD),
        (RAN_RANGE, "10.0.4.1", ROUTED_POD),
    ]
    table = rules(pod, "-4")[ROUTED_POD]
    sbr_table = {(r["dst"], r.get("gateway"), r["dev"]) for r in routes(pod, "table", table)}
    assert {("default", "10.0.4.1", "net1"), (RAN_RANGE, "10.0.4.1", "net1")} <= sbr_table
    unbound = route_get(pod, GNB)
    assert f"via 10.0.4.1 dev net1 src {ROUTED_POD}" in unbound, unbound
    bound = route_get(pod, GNB, "from", ROUTED_POD)
    assert "via 10.0.4.1 dev net1" in bound, bound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    # The router's stand-in owns the gNB's address and answers on-link to the pod's.
    assert ping_from(pod, GNB)
    assert ping_from(pod, GNB, source=ROUTED_POD)


def test_a_dual_stack_network_with_routes_keeps_the_routes_in_the_ipv4_table_only(
    dual_stack_routed: Segment,
) -> None:
    """Both at once (the config allows routes on a dual-stack network): the IPAM's routes are
    both defaults and the RAN's range; sbr puts the range, whose gateway is the IPv4 router,
    into the IPv4 address's table only, and mainTableRoutes back into the main table."""
    dual_stack_routed.start_pod("pod-a", "10.0.2.204", POD_A, POD_A_IPV6)
    pod = dual_stack_routed.pod("pod-a")

    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (DUAL_STACK_SUBNET, None, POD_A),
        (RAN_RANGE, "10.0.6.1", POD_A),
    ]
    ipv6_main = routes(pod, "table", "main", "dev", "net1", family="-6")
    assert [(r["dst"], r.get("gateway")) for r in ipv6_main] == [(SUBNET_IPV6, None)]
    ipv4_table, ipv6_table = rules(pod, "-4")[POD_A], rules(pod, "-6")[POD_A_IPV6]
    ipv4_routes = {(r["dst"], r.get("gateway")) for r in routes(pod, "table", ipv4_table)}
    assert {("default", "10.0.6.1"), (RAN_RANGE, "10.0.6.1")} <= ipv4_routes
    assert routes(pod, "table", ipv6_table) == []  # no IPv4 route at all
    ipv6_defaults = routes(pod, "table", ipv6_table, "default", family="-6")
    assert [(r.get("gateway"), r["dev"]) for r in ipv6_defaults] == [(IPV6_ROUTER, "net1")]
    unbound = route_get(pod, GNB)
    assert f"via 10.0.6.1 dev net1 src {POD_A}" in unbound, unbound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    wait_for_dad(pod)
    assert ping_from(pod, GNB)
    assert ping_from(pod, OUTSIDE_THE_64)
