"""The dual-stack and the routed NAD's chains on the real Multus chain, in a real kernel: what a
pod's tables hold after ipvlan, sbr and multus-pod-ip, and where its packets leave.

The NADs are the chart's (charts/nad_cni_configs.py, cni_config) in the cluster box's API;
Multus thick runs their chains for pods of a node of their own, Whereabouts leases each pod's
addresses from its IPPools and the pod IP agent assigns them to the node's ENIs in the emulated
EC2 (tests/dataplane/router_segment.py: the node's ENIs lead straight to a namespace playing
the VPC router, as the VPC fabric models IPv4 only). Sources of the rules asserted:

- Whereabouts leases an address of the range, and one of each ipRanges range, and hands its
  config's routes on in the result (whereabouts cmd/whereabouts.go, cmdAdd); the addresses
  carry the range's prefix, the subnet's (charts/nad_cni_configs.py).
- ipvlan adds the IPAM result's addresses, then each of its routes on net1 in the pod's main
  table with RouteAddEcmp, next to eth0's default route; it waits for duplicate address
  detection only when an IPv6 address has a gateway (containernetworking/plugins
  pkg/ipam/ipam_linux.go, ConfigureIface: the NADs here have none).
- sbr adds a rule "from <address>" per address of the result, each to a table of its own, and
  moves into that table every route of net1 whose source or gateway lies in the address's
  prefix, and every route with neither; then deletes them all from the main table
  (containernetworking/plugins plugins/meta/sbr/main.go, doRoutes; the same in v1.1.1 and in
  v1.9.1, the VPC CNI's release, which runs here).
- multus-pod-ip puts back the subnets (mainTableSubnet, mainTableSubnetIpv6) and the routes
  beyond the VPC (mainTableRoutes) into the main table (multus_pod_ips/cni_plugin.py), and
  hands the pod's addresses to the agent, which assigns both families to the ENI.
- The VPC router of a subnet is its IPv4 network + 1 and, for IPv6, the /64's ::1 (VPC user
  guide, "Subnet CIDR blocks"); the VPC CNI gives eth0 a /32 and a default route via the on-link
  169.254.1.1 (amazon-vpc-cni-k8s docs/cni-proposal.md, testing_support/vpc_cni_stand_in.py).
"""

from __future__ import annotations

import ipaddress
import json
import time
from typing import Any

from testing_support.kernel_pods import ping_from
from testing_support.kernel_vpc import in_netns, ip
from testing_support.vpc_cni_stand_in import VPC_CNI_GATEWAY
from tests.dataplane.real_multus import MultusPod
from tests.dataplane.router_segment import (
    DUAL_STACK,
    DUAL_STACK_NETWORK,
    DUAL_STACK_RESERVATION,
    DUAL_STACK_ROUTED,
    DUAL_STACK_ROUTER,
    DUAL_STACK_SUBNET,
    GNB,
    RAN_RANGE,
    ROUTED,
    ROUTED_RESERVATION,
    ROUTED_ROUTER,
    ROUTED_SUBNET,
    Segment,
)

INTERNET_ADDRESS = "203.0.113.10"  # TEST-NET-3: neither the VPC nor a route's destination


def leased(pod: MultusPod) -> tuple[str, str]:
    """net1's IPv4 and IPv6 address, as Multus reported what Whereabouts leased."""
    addresses = pod.net1_addresses()
    (ipv4,) = [a for a in addresses if ipaddress.ip_address(a).version == 4]
    (ipv6,) = [a for a in addresses if ipaddress.ip_address(a).version == 6]
    return ipv4, ipv6


def net1_addresses(pod: str) -> set[str]:
    """net1's global addresses in the pod's kernel, with their prefix lengths."""
    (link,) = json.loads(ip("-n", pod, "-j", "address", "show", "dev", "net1").stdout)
    return {
        f"{info['local']}/{info['prefixlen']}"
        for info in link["addr_info"]
        if info.get("scope") == "global"
    }


def in_range(address: str, first: str, last: str) -> bool:
    as_int = int(ipaddress.ip_address(address))
    return int(ipaddress.ip_address(first)) <= as_int <= int(ipaddress.ip_address(last))


def in_reservation(address: str, reservation: str) -> bool:
    return ipaddress.ip_address(address) in ipaddress.ip_network(reservation)


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
    segment: Segment,
) -> None:
    """ADD succeeds although ipvlan adds ::/0 via the router right after the address, while
    duplicate address detection still runs."""
    started = segment.pod("dual-stack-a", DUAL_STACK)
    pod = started.name
    address, address_ipv6 = leased(started)
    ipv6 = segment.ipv6

    assert in_reservation(address, DUAL_STACK_RESERVATION)
    assert in_range(address_ipv6, ipv6.first_address, ipv6.last_address)
    assert net1_addresses(pod) == {f"{address}/24", f"{address_ipv6}/64"}
    # multus-pod-ip handed both addresses to the agent, which assigned them to the ENI.
    assert address in segment.agent.addresses(DUAL_STACK_NETWORK)
    assert address_ipv6 in segment.agent.ipv6_addresses(DUAL_STACK_NETWORK)
    # Main table: eth0's default is the only IPv4 default; net1 keeps only its subnets.
    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (DUAL_STACK_SUBNET, None, address)
    ]
    ipv6_main = routes(pod, "table", "main", "dev", "net1", family="-6")
    assert [(r["dst"], r.get("gateway")) for r in ipv6_main] == [(ipv6.subnet_cidr, None)]
    # sbr: a rule per address, each table with its family's default via its family's router.
    ipv4_table, ipv6_table = rules(pod, "-4")[address], rules(pod, "-6")[address_ipv6]
    assert ipv4_table != ipv6_table
    ipv4_defaults = routes(pod, "table", ipv4_table, "default")
    assert [(r.get("gateway"), r["dev"]) for r in ipv4_defaults] == [(DUAL_STACK_ROUTER, "net1")]
    ipv6_defaults = routes(pod, "table", ipv6_table, "default", family="-6")
    assert [(r.get("gateway"), r["dev"]) for r in ipv6_defaults] == [(ipv6.gateway, "net1")]
    # ... and not the other family's: sbr copies a route with a gateway only into the table of
    # the address whose prefix holds that gateway.
    assert routes(pod, "table", ipv4_table, "default", family="-6") == []
    assert routes(pod, "table", ipv6_table, "default") == []
    # Where packets leave: another address of the /64 (the pod range's last, no pod's)...
    assert "dev net1" in route_get(pod, ipv6.last_address)
    bound = route_get(pod, segment.outside_the_64, "from", address_ipv6)
    assert f"via {ipv6.gateway} dev net1" in bound, bound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    assert f"via {DUAL_STACK_ROUTER} dev net1" in route_get(pod, INTERNET_ADDRESS, "from", address)


def test_dual_stack_pods_exchange_ipv6_with_each_other_and_beyond_the_router(
    segment: Segment,
) -> None:
    """Two pods on the same ipvlan master (ipvlan l2 switches between its slaves) and a host
    behind the VPC router's stand-in, which owns an address of another /64."""
    # Names of their own: a deleted Pod bound to a node stays until a kubelet confirms it.
    pod_a, pod_b = segment.pod("peer-a", DUAL_STACK), segment.pod("peer-b", DUAL_STACK)
    (a, a_ipv6), (b, b_ipv6) = leased(pod_a), leased(pod_b)
    assert a != b and a_ipv6 != b_ipv6
    for pod in (pod_a, pod_b):
        wait_for_dad(pod.name)
    outside = segment.outside_the_64

    assert ping_from(pod_a.name, b_ipv6)
    assert ping_from(pod_b.name, a_ipv6)
    assert ping_from(pod_a.name, segment.ipv6.gateway)
    assert ping_from(pod_a.name, outside, source=a_ipv6)
    # Unbound beyond the /64: the main table has no IPv6 route there (`ip route get` without
    # a source answers "Network is unreachable"), but a socket's lookup then selects a source
    # address and looks up again with it (Linux net/ipv6/ip6_output.c, ip6_dst_lookup_tail),
    # which sbr's rule of net1's address matches: the only global one once DAD is done.
    assert unbound_source(pod_a.name, outside) == a_ipv6
    assert ping_from(pod_a.name, outside)
    assert ping_from(pod_a.name, DUAL_STACK_ROUTER)
    # The router's stand-in knows no way to eth0's address: an IPv4 packet that left over
    # net1 from eth0's address would get no answer; one bound to net1's does.
    assert ping_from(pod_a.name, b, source=a)


def test_the_routed_chain_reaches_the_destination_over_net1_bound_or_not(
    segment: Segment,
) -> None:
    started = segment.pod("routed", ROUTED)
    pod = started.name
    (address,) = started.net1_addresses()

    assert in_reservation(address, ROUTED_RESERVATION)
    assert net1_addresses(pod) == {f"{address}/24"}
    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (ROUTED_SUBNET, None, address),
        (RAN_RANGE, ROUTED_ROUTER, address),
    ]
    table = rules(pod, "-4")[address]
    sbr_table = {(r["dst"], r.get("gateway"), r["dev"]) for r in routes(pod, "table", table)}
    assert {("default", ROUTED_ROUTER, "net1"), (RAN_RANGE, ROUTED_ROUTER, "net1")} <= sbr_table
    unbound = route_get(pod, GNB)
    assert f"via {ROUTED_ROUTER} dev net1 src {address}" in unbound, unbound
    bound = route_get(pod, GNB, "from", address)
    assert f"via {ROUTED_ROUTER} dev net1" in bound, bound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    # The router's stand-in owns the gNB's address and answers on-link to the pod's.
    assert ping_from(pod, GNB)
    assert ping_from(pod, GNB, source=address)


def test_a_dual_stack_network_with_routes_keeps_the_routes_in_the_ipv4_table_only(
    segment: Segment,
) -> None:
    """Both at once (the config allows routes on a dual-stack network): the IPAM's routes are
    both defaults and the RAN's range; sbr puts the range, whose gateway is the IPv4 router,
    into the IPv4 address's table only, and mainTableRoutes back into the main table."""
    started = segment.pod("dual-routed", DUAL_STACK_ROUTED)
    pod = started.name
    address, address_ipv6 = leased(started)
    ipv6 = segment.ipv6

    defaults = [(r.get("gateway"), r["dev"]) for r in routes(pod, "table", "main", "default")]
    assert defaults == [(VPC_CNI_GATEWAY, "eth0")]
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in routes(pod, "dev", "net1")] == [
        (DUAL_STACK_SUBNET, None, address),
        (RAN_RANGE, DUAL_STACK_ROUTER, address),
    ]
    ipv6_main = routes(pod, "table", "main", "dev", "net1", family="-6")
    assert [(r["dst"], r.get("gateway")) for r in ipv6_main] == [(ipv6.subnet_cidr, None)]
    ipv4_table, ipv6_table = rules(pod, "-4")[address], rules(pod, "-6")[address_ipv6]
    ipv4_routes = {(r["dst"], r.get("gateway")) for r in routes(pod, "table", ipv4_table)}
    assert {("default", DUAL_STACK_ROUTER), (RAN_RANGE, DUAL_STACK_ROUTER)} <= ipv4_routes
    assert routes(pod, "table", ipv6_table) == []  # no IPv4 route at all
    ipv6_defaults = routes(pod, "table", ipv6_table, "default", family="-6")
    assert [(r.get("gateway"), r["dev"]) for r in ipv6_defaults] == [(ipv6.gateway, "net1")]
    unbound = route_get(pod, GNB)
    assert f"via {DUAL_STACK_ROUTER} dev net1 src {address}" in unbound, unbound
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in route_get(pod, INTERNET_ADDRESS)
    wait_for_dad(pod)
    assert ping_from(pod, GNB)
    assert ping_from(pod, segment.outside_the_64)
