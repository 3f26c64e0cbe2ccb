"""A Multus pod's routes after its NAD's chain, run with the real plugins in network namespaces.

Source of the rule: containernetworking/plugins plugins/meta/sbr/main.go, doRoutes (the same
in v1.1.1, Debian's package that runs here, and in v1.7.1/v1.9.1, which the VPC CNI add-on
installs into /opt/cni/bin: amazon-vpc-cni-k8s Makefile target `plugins`,
scripts/dockerfiles/Dockerfile.init): sbr copies every main-table route of the container
interface into a table that only the rule "from <pod address>" selects, then deletes them
from the main table. A socket that does not bind its source routes by the main table, which
then holds only the pod network's (VPC CNI's) default route via eth0. The NAD's last plugin,
multus-pod-ip, puts the subnet back: `<subnet> dev net1 src <pod address> scope link`.

The pod gets a VPC-CNI-like eth0 (a /32 address, 169.254.1.1 as its on-link gateway, as the
VPC CNI sets up pods) into a namespace that routes nothing else, and net1 on the Multus
subnet, where another Multus pod (10.0.4.50) and the VPC router (10.0.4.1) live. net1 is an
ipvlan slave when the kernel has ipvlan (the chain then runs from ipvlan, with static IPAM in
place of Whereabouts, which needs the Kubernetes API); otherwise a veth with the address
ipvlan and the IPAM would give it, and the chain runs from sbr on. The kernels of these build
machines have no ipvlan: tests/integration/multus_pod_ips/pod_routes_in_kernel_vm.sh runs
this module in a Debian kernel that has it (KERNEL_VM_REQUIRE_IPVLAN=1).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charts.nad_cni_configs import (
    NetworkAttachment,
    cni_config,
    static_cni_config,
    whereabouts_range_and_gateway,
)
from testing_support.cni_chain import DEBIAN_CNI_PLUGIN_DIR, ChainRun, CniChainError, StandInAgent

pytestmark = pytest.mark.integration

# The seed's first Multus network in its first AZ (DESIGN.md defaults).
SUBNET, RESERVATION = "10.0.4.0/24", "10.0.4.32/27"
POD_ADDRESS = "10.0.4.32"  # the first address of the reservation, Whereabouts' first lease
OTHER_MULTUS_POD = "10.0.4.50"
POD_NETWORK_ADDRESS = "10.0.2.77"  # eth0: an address of the node subnet, as the VPC CNI gives
VPC_CNI_GATEWAY = "169.254.1.1"
OUTSIDE_ADDRESS = "192.0.2.10"  # TEST-NET-1: neither the Multus subnet nor the pod network


def rendered_network(routes: tuple[str, ...] = ()) -> dict[str, Any]:
    whereabouts_range, gateway = whereabouts_range_and_gateway(SUBNET, RESERVATION)
    return cni_config(
        NetworkAttachment(
            "multus1-us-west-2a", "multus1", "l2", whereabouts_range, gateway, routes=routes
        )
    )


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def in_netns(name: str, *command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", name, *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


@dataclass(frozen=True)
class Namespaces:
    """pod: the pod; node: where the plugins run (and net1's ipvlan master lives); vpc: behind
    eth0, routes nothing but the pod's address; subnet: the Multus subnet's other hosts."""

    pod: str
    node: str
    vpc: str
    subnet: str

    @property
    def pod_path(self) -> str:
        return f"/var/run/netns/{self.pod}"


def kernel_has_ipvlan(node: str) -> bool:
    """Whether an ipvlan link can be made (on a throw-away veth: ipvlan needs a parent)."""
    ip("-n", node, "link", "add", "probe-parent", "type", "veth", "peer", "name", "probe-peer")
    made = ip(
        "-n",
        node,
        "link",
        "add",
        "link",
        "probe-parent",
        "name",
        "probe",
        "type",
        "ipvlan",
        check=False,
    )
    ip("-n", node, "link", "del", "probe-parent")  # takes its peer and ipvlan slave along
    return made.returncode == 0


@pytest.fixture
def namespaces() -> Iterator[Namespaces]:
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and veth links")
    if not (DEBIAN_CNI_PLUGIN_DIR / "sbr").exists():
        message = f"no sbr in {DEBIAN_CNI_PLUGIN_DIR}: run `make cni-plugins` (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    tag = uuid.uuid4().hex[:6]
    names = Namespaces(f"pr-pod-{tag}", f"pr-node-{tag}", f"pr-vpc-{tag}", f"pr-subnet-{tag}")
    created = []
    try:
        for name in (names.pod, names.node, names.vpc, names.subnet):
            made = ip("netns", "add", name, check=False)
            if made.returncode != 0:
                pytest.skip(f"cannot create network namespaces here: {made.stderr.strip()}")
            created.append(name)
            ip("-n", name, "link", "set", "lo", "up")
        yield names
    finally:
        for name in created:
            ip("netns", "del", name, check=False)


def veth(left_ns: str, left: str, right_ns: str, right: str) -> None:
    ip("-n", left_ns, "link", "add", left, "type", "veth", "peer", "name", right, "netns", right_ns)
    ip("-n", left_ns, "link", "set", left, "up")
    ip("-n", right_ns, "link", "set", right, "up")


def vpc_cni_eth0(ns: Namespaces) -> None:
    """eth0 as the VPC CNI configures it in a pod, towards a side that only knows the pod."""
    veth(ns.pod, "eth0", ns.vpc, "host-eth0")
    ip("-n", ns.pod, "addr", "add", f"{POD_NETWORK_ADDRESS}/32", "dev", "eth0")
    ip("-n", ns.pod, "route", "add", VPC_CNI_GATEWAY, "dev", "eth0", "scope", "link")
    ip("-n", ns.pod, "route", "add", "default", "via", VPC_CNI_GATEWAY, "dev", "eth0")
    ip("-n", ns.vpc, "addr", "add", f"{VPC_CNI_GATEWAY}/32", "dev", "host-eth0")
    ip("-n", ns.vpc, "route", "add", f"{POD_NETWORK_ADDRESS}/32", "dev", "host-eth0")


def multus_subnet(ns: Namespaces, link: str) -> None:
    """The other end of the Multus subnet: another Multus pod and the VPC router."""
    for address in (OTHER_MULTUS_POD, "10.0.4.1"):
        ip("-n", ns.subnet, "addr", "add", f"{address}/24", "dev", link)


def run_chain(
    ns: Namespaces, agent_socket: Path, network: dict[str, Any] | None = None
) -> dict[str, Any]:
    """ADD through the rendered chain (by default the seed's NAD); returns the chain's result."""
    network = network or rendered_network()
    ipvlan, *after_ipvlan = network["plugins"]
    routes = ipvlan["ipam"].get("routes", [])
    chain = ChainRun(
        netns=ns.pod_path, ifname="net1", agent_socket=agent_socket, node_netns=ns.node
    )
    if kernel_has_ipvlan(ns.node):
        veth(ns.node, ipvlan["master"], ns.subnet, "lan0")
        static = {
            "type": "static",
            "addresses": [{"address": f"{POD_ADDRESS}/24", "gateway": ipvlan["ipam"]["gateway"]}],
            **({"routes": routes} if routes else {}),
        }
        multus_subnet(ns, "lan0")
        return chain.add(network, [{**ipvlan, "ipam": static}, *after_ipvlan])
    if os.environ.get("KERNEL_VM_REQUIRE_IPVLAN"):
        pytest.fail("KERNEL_VM_REQUIRE_IPVLAN is set but this kernel cannot create ipvlan links")
    veth(ns.pod, "net1", ns.subnet, "lan0")
    ip("-n", ns.pod, "addr", "add", f"{POD_ADDRESS}/24", "dev", "net1")
    multus_subnet(ns, "lan0")
    # What ipvlan does with the IPAM result's routes (see run_static_chain).
    for route in routes:
        ip("-n", ns.pod, "route", "prepend", route["dst"], "via", route["gw"], "dev", "net1")
    ipvlan_result = {
        "cniVersion": network["cniVersion"],
        "interfaces": [{"name": "net1", "sandbox": ns.pod_path}],
        "ips": [
            {
                "version": "4",
                "address": f"{POD_ADDRESS}/24",
                "gateway": ipvlan["ipam"]["gateway"],
                "interface": 0,
            }
        ],
        **({"routes": routes} if routes else {}),
        "dns": {},
    }
    return chain.add(network, after_ipvlan, ipvlan_result)


def route_get(ns: Namespaces, *args: str) -> str:
    return ip("-n", ns.pod, "route", "get", *args).stdout


def unbound_connection_source(ns: Namespaces, address: str = OTHER_MULTUS_POD) -> str:
    """Connects from the pod to `address` (by default the other Multus pod, on the subnet's
    side) without binding; the address the other side saw the connection come from."""
    server = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            ns.subnet,
            sys.executable,
            "-c",
            "import socket\n"
            f"s = socket.create_server(('{address}', 8080))\n"
            "print('listening', flush=True)\n"
            "c, peer = s.accept()\n"
            "c.sendall(peer[0].encode())\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "listening"
        client = in_netns(
            ns.pod,
            sys.executable,
            "-c",
            "import socket\n"
            f"c = socket.create_connection(('{address}', 8080), timeout=5)\n"
            "print(c.recv(64).decode())\n",
        )
        assert client.returncode == 0, f"connection failed: {client.stderr}"
        return client.stdout.strip()
    finally:
        server.kill()
        server.wait(timeout=10)


def test_unbound_traffic_to_the_multus_subnet_leaves_over_net1_from_the_multus_address(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    vpc_cni_eth0(namespaces)  # the VPC CNI's ADD runs before Multus' delegates
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        result = run_chain(namespaces, agent.path)
    finally:
        agent.close()

    assert [r["ips"] for r in agent.requests] == [[POD_ADDRESS]]
    assert [ip_config["address"] for ip_config in result["ips"]] == [f"{POD_ADDRESS}/24"]
    # Without a source: the main table's subnet route, with the Multus address as source.
    unbound = route_get(namespaces, OTHER_MULTUS_POD)
    assert "dev net1" in unbound and f"src {POD_ADDRESS}" in unbound, unbound
    assert unbound_connection_source(namespaces) == POD_ADDRESS
    # sbr's part stays: the Multus address goes out over net1 to any destination ...
    from_multus = route_get(namespaces, OUTSIDE_ADDRESS, "from", POD_ADDRESS)
    assert "via 10.0.4.1 dev net1" in from_multus, from_multus
    # ... and everything else keeps the pod network's default route.
    elsewhere = route_get(namespaces, OUTSIDE_ADDRESS)
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in elsewhere, elsewhere


def test_the_subnet_route_is_the_only_net1_route_in_the_main_table(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    # sbr's default route via the VPC router must stay out of the main table: there it would
    # compete with eth0's default route for every destination.
    vpc_cni_eth0(namespaces)
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        run_chain(namespaces, agent.path)
    finally:
        agent.close()

    main_table = json.loads(ip("-n", namespaces.pod, "-j", "route", "show", "dev", "net1").stdout)
    assert [(r["dst"], r.get("prefsrc"), r.get("scope")) for r in main_table] == [
        (SUBNET, POD_ADDRESS, "link")
    ]


def test_a_route_the_kernel_refuses_fails_the_add_with_ips_reason(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    # The pod has no net1 (ipvlan's part is missing): multus-pod-ip alone, after "sbr".
    network = rendered_network()
    *_, pod_ip = network["plugins"]
    chain = ChainRun(namespaces.pod_path, "net1", tmp_path / "agent.sock", namespaces.node)
    previous = {
        "cniVersion": network["cniVersion"],
        "interfaces": [{"name": "net1", "sandbox": namespaces.pod_path}],
        "ips": [{"version": "4", "address": f"{POD_ADDRESS}/24", "interface": 0}],
    }

    with pytest.raises(CniChainError) as failed:
        chain.add(network, [pod_ip], previous)

    error = json.loads(failed.value.stdout)
    assert error["code"] == 104
    assert error["msg"].startswith(f"route replace {SUBNET} dev net1 src {POD_ADDRESS} scope link")
    assert "Cannot find device" in error["details"]


# multus.networks[].routes: the RAN beyond the VPC router (10.0.4.1), here a host of the
# subnet's side that owns an address of the RAN's range.
RAN_RANGE, GNB = "10.200.0.0/16", "10.200.0.10"


def test_a_routes_destination_is_reached_over_net1_with_and_without_a_bound_source(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    """containernetworking/plugins plugins/meta/sbr/main.go, doRoutes: sbr moves every route
    of net1, the IPAM's routes included, into the table of the pod's address; multus-pod-ip's
    mainTableRoutes put the destination back into the main table via the VPC router."""
    vpc_cni_eth0(namespaces)
    ip("-n", namespaces.subnet, "addr", "add", f"{GNB}/32", "dev", "lo")
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        run_chain(namespaces, agent.path, rendered_network(routes=(RAN_RANGE,)))
    finally:
        agent.close()

    unbound = route_get(namespaces, GNB)
    assert f"via 10.0.4.1 dev net1 src {POD_ADDRESS}" in unbound, unbound
    from_multus = route_get(namespaces, GNB, "from", POD_ADDRESS)
    assert "via 10.0.4.1 dev net1" in from_multus, from_multus
    assert unbound_connection_source(namespaces, GNB) == POD_ADDRESS
    # Only the routes' destinations leave eth0's default route.
    elsewhere = route_get(namespaces, OUTSIDE_ADDRESS)
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in elsewhere, elsewhere
    main_table = json.loads(ip("-n", namespaces.pod, "-j", "route", "show", "dev", "net1").stdout)
    assert [(r["dst"], r.get("gateway"), r.get("prefsrc")) for r in main_table] == [
        (SUBNET, None, POD_ADDRESS),
        (RAN_RANGE, "10.0.4.1", POD_ADDRESS),
    ]


# A static NAD (multus.networks[].subnets[].static_range): the pod's address from its annotation.
STATIC_RANGE, FIXED_ADDRESS = "10.0.4.48/28", "10.0.4.52"


def static_network() -> dict[str, Any]:
    whereabouts_range, gateway = whereabouts_range_and_gateway(SUBNET, RESERVATION)
    attachment = NetworkAttachment(
        "multus1-us-west-2a",
        "multus1",
        "l2",
        whereabouts_range,
        gateway,
        static_range=STATIC_RANGE,
        static_name="multus1-us-west-2a-static",
    )
    return static_cni_config(attachment)


def with_runtime_ips(plugin: dict[str, Any], ips: list[str]) -> dict[str, Any]:
    """The plugin object as libcni hands it over for a network selection element with `ips`:
    multus-cni (pkg/types/conf.go, CreateCNIRuntimeConf) passes them as the "ips" capability
    argument, and libcni adds runtimeConfig {"ips": [...]} to a plugin that declares it."""
    assert plugin["capabilities"] == {"ips": True}
    return {**plugin, "runtimeConfig": {"ips": ips}}


def run_static_ipam(network: dict[str, Any], ipvlan: dict[str, Any], ns: Namespaces) -> Any:
    """Debian's static IPAM plugin, run as ipvlan runs its IPAM: with ipvlan's own stdin."""
    stdin = {"cniVersion": network["cniVersion"], "name": network["name"], **ipvlan}
    done = subprocess.run(
        [str(DEBIAN_CNI_PLUGIN_DIR / ipvlan["ipam"]["type"])],
        input=json.dumps(stdin),
        env={
            "CNI_COMMAND": "ADD",
            "CNI_CONTAINERID": "static-ipam",
            "CNI_NETNS": ns.pod_path,
            "CNI_IFNAME": "net1",
            "CNI_PATH": str(DEBIAN_CNI_PLUGIN_DIR),
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def run_static_chain(ns: Namespaces, agent_socket: Path) -> dict[str, Any]:
    """ADD through the static NAD's chain for a pod asking for FIXED_ADDRESS/24."""
    network = static_network()
    ipvlan, *after_ipvlan = network["plugins"]
    ipvlan = with_runtime_ips(ipvlan, [f"{FIXED_ADDRESS}/24"])
    chain = ChainRun(
        netns=ns.pod_path, ifname="net1", agent_socket=agent_socket, node_netns=ns.node
    )
    if kernel_has_ipvlan(ns.node):
        veth(ns.node, ipvlan["master"], ns.subnet, "lan0")
        multus_subnet(ns, "lan0")
        return chain.add(network, [ipvlan, *after_ipvlan])
    if os.environ.get("KERNEL_VM_REQUIRE_IPVLAN"):
        pytest.fail("KERNEL_VM_REQUIRE_IPVLAN is set but this kernel cannot create ipvlan links")
    ipam = run_static_ipam(network, ipvlan, ns)
    veth(ns.pod, "net1", ns.subnet, "lan0")
    multus_subnet(ns, "lan0")
    # What ipvlan does with the IPAM result (containernetworking/plugins pkg/ipam,
    # ConfigureIface): the addresses, then each route with netlink's RouteAddEcmp, i.e.
    # NLM_F_CREATE without NLM_F_EXCL, which `ip route prepend` sends as well.
    for ip_config in ipam["ips"]:
        ip("-n", ns.pod, "addr", "add", ip_config["address"], "dev", "net1")
    for route in ipam["routes"]:
        ip("-n", ns.pod, "route", "prepend", route["dst"], "via", route["gw"], "dev", "net1")
    ipvlan_result = {
        "cniVersion": network["cniVersion"],
        "interfaces": [{"name": "net1", "sandbox": ns.pod_path}],
        "ips": [{**ip_config, "interface": 0} for ip_config in ipam["ips"]],
        "routes": ipam["routes"],
        "dns": {},
    }
    return chain.add(network, after_ipvlan, ipvlan_result)


def test_static_ipam_takes_the_annotations_address_and_the_vpc_router_as_a_route(
    namespaces: Namespaces,
) -> None:
    network = static_network()
    ipvlan = with_runtime_ips(network["plugins"][0], [f"{FIXED_ADDRESS}/24"])

    result = run_static_ipam(network, ipvlan, namespaces)

    assert [ip_config["address"] for ip_config in result["ips"]] == [f"{FIXED_ADDRESS}/24"]
    assert all("gateway" not in ip_config for ip_config in result["ips"])  # none from ips
    assert result["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.0.4.1"}]


def test_a_fixed_address_routes_like_a_whereabouts_one(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    # With no gateway in the IPAM result sbr adds no default route of its own; the one static
    # IPAM hands ipvlan must end in sbr's table, and only there.
    vpc_cni_eth0(namespaces)
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        run_static_chain(namespaces, agent.path)
    finally:
        agent.close()

    assert [(r["ips"], r["fixed"]) for r in agent.requests] == [([FIXED_ADDRESS], True)]
    from_fixed = route_get(namespaces, OUTSIDE_ADDRESS, "from", FIXED_ADDRESS)
    assert "via 10.0.4.1 dev net1" in from_fixed, from_fixed
    elsewhere = route_get(namespaces, OUTSIDE_ADDRESS)
    assert f"via {VPC_CNI_GATEWAY} dev eth0" in elsewhere, elsewhere
    main_table = json.loads(ip("-n", namespaces.pod, "-j", "route", "show", "dev", "net1").stdout)
    assert [(r["dst"], r.get("prefsrc"), r.get("scope")) for r in main_table] == [
        (SUBNET, FIXED_ADDRESS, "link")
    ]


# A dual-stack network: net1 has an IPv6 address of the subnet's /64 too, and the plugin's
# "mainTableSubnetIpv6" puts the /64 back into the main table after sbr.
SUBNET_IPV6, POD_IPV6, OTHER_MULTUS_POD_IPV6 = (
    "2600:1f14:0:4::/64",
    "2600:1f14:0:4::1:20",
    "2600:1f14:0:4::1:50",
)
# The network's IPv6 route beyond the VPC, via the subnet's VPC router (its first address).
IPV6_ROUTE = {"dst": "2001:db8:45::/48", "gw": "2600:1f14:0:4::1"}


def test_a_dual_stack_pods_ipv6_subnet_and_route_are_on_net1_in_the_main_table_without_a_source(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    """sbr moves IPv6 routes as it moves IPv4 ones (containernetworking/plugins
    plugins/meta/sbr/main.go, doRoutes: netlink.FAMILY_ALL). The route carries no source:
    the kernel refuses one that is still tentative (duplicate address detection: here the
    address is added as ipvlan's IPAM adds it, DAD running), and RFC 6724's rule 5 picks net1's
    address for an unbound socket. The network's IPv6 route beyond the VPC goes back the same
    way, via the subnet's IPv6 router."""
    vpc_cni_eth0(namespaces)
    veth(namespaces.pod, "net1", namespaces.subnet, "lan0")
    ip("-n", namespaces.pod, "addr", "add", f"{POD_ADDRESS}/24", "dev", "net1")
    ip("-n", namespaces.pod, "addr", "add", f"{POD_IPV6}/64", "dev", "net1")
    multus_subnet(namespaces, "lan0")
    ip(
        "-n",
        namespaces.subnet,
        "addr",
        "add",
        f"{OTHER_MULTUS_POD_IPV6}/64",
        "dev",
        "lan0",
        "nodad",
    )
    network = rendered_network()
    _, *after_ipvlan = network["plugins"]
    *others, pod_ip = after_ipvlan
    chain = ChainRun(namespaces.pod_path, "net1", tmp_path / "agent.sock", namespaces.node)
    previous = {
        "cniVersion": network["cniVersion"],
        "interfaces": [{"name": "net1", "sandbox": namespaces.pod_path}],
        "ips": [
            {"version": "4", "address": f"{POD_ADDRESS}/24", "gateway": "10.0.4.1", "interface": 0},
            {"version": "6", "address": f"{POD_IPV6}/64", "interface": 0},
        ],
        "dns": {},
    }
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        routes = [*pod_ip.get("mainTableRoutes", []), IPV6_ROUTE]
        dual_stack = {**pod_ip, "mainTableSubnetIpv6": SUBNET_IPV6, "mainTableRoutes": routes}
        chain.add(network, [*others, dual_stack], previous)
    finally:
        agent.close()

    assert [r["ips"] for r in agent.requests] == [[POD_ADDRESS, POD_IPV6]]
    main_table = json.loads(
        ip("-n", namespaces.pod, "-j", "-6", "route", "show", "table", "main", "dev", "net1").stdout
    )
    assert {
        (r["dst"], r.get("gateway"), r.get("prefsrc"))
        for r in main_table
        if r["dst"] != "fe80::/64"
    } == {(SUBNET_IPV6, None, None), (IPV6_ROUTE["dst"], IPV6_ROUTE["gw"], None)}
    unbound = route_get(namespaces, OTHER_MULTUS_POD_IPV6)
    assert "dev net1" in unbound, unbound
