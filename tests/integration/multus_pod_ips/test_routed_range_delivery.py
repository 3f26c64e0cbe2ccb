"""A pod-routed range (a UPF's UE pool) delivered on the node, in network namespaces.

The VPC sends the range to the node's ENI (the agent points the route there:
test_pod_routed_ranges.py). On the node, ipvlan hands a packet to the slave that holds its
exact destination address and every other packet to the host (Linux drivers/net/ipvlan/
ipvlan_core.c, ipvlan_handle_mode_l2 -> ipvlan_addr_lookup), and the host cannot send into a
slave over the master; a UPF keeps its UE pool on a tun device, never on net1. So the plugin
routes the range in the node's namespace via the pod's eth0 address, which the VPC CNI's /32
host route makes on-link through the pod's host veth (multus_pod_ips/cni_plugin.py). Here the
ENI is a veth whose far side, the subnet's, sends the range to the ENI's MAC as the VPC would;
the host-side hand-over is the kernel's own (no ipvlan in this machine's kernel; the data-plane
tier runs the same through a real ipvlan: tests/dataplane/test_routes_that_follow_a_pod.py).
The UPF's tun device (no process behind it) holds one UE address, which the pod answers from
over net1 (the NAD's subnet route in its main table).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from charts.nad_cni_configs import NetworkAttachment, cni_config, whereabouts_range_and_gateway
from testing_support.cni_chain import ChainRun, StandInAgent
from testing_support.vpc_cni_stand_in import set_up_eth0

pytestmark = pytest.mark.integration

SUBNET, RESERVATION, ROUTER = "10.0.4.0/24", "10.0.4.32/27", "10.0.4.1"
POD_ADDRESS, ENI_ADDRESS = "10.0.4.32", "10.0.4.10"
POD_NETWORK_ADDRESS = "10.0.2.77"
STANDBY_POD_NETWORK_ADDRESS = "10.0.2.78"
UE_POOL, UE = "10.45.0.0/16", "10.45.0.7"
#: Seconds for the kernel's cleanup of a deleted namespace (net/core/net_namespace.c,
#: cleanup_net: a work item; it unregisters the namespace's devices, veths with their peers).
NAMESPACE_CLEANUP_TIMEOUT = 20.0


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


@dataclass(frozen=True)
class Namespaces:
    """pod: the UPF; node: where the plugin runs and the ENI (multus1) ends; subnet: the VPC
    side of both the ENI and the pod's net1, with the VPC router's address."""

    pod: str
    node: str
    subnet: str

    @property
    def pod_path(self) -> str:
        return f"/var/run/netns/{self.pod}"


@pytest.fixture
def namespaces() -> Iterator[Namespaces]:
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and veth links")
    tag = uuid.uuid4().hex[:6]
    names = Namespaces(f"rr-pod-{tag}", f"rr-node-{tag}", f"rr-subnet-{tag}")
    created = []
    try:
        for name in (names.pod, names.node, names.subnet):
            ip("netns", "add", name)
            created.append(name)
            ip("-n", name, "link", "set", "lo", "up")
        yield names
    finally:
        for name in created:
            ip("netns", "del", name, check=False)


def sysctl(namespace: str, setting: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", namespace, "sysctl", "-qw", setting], check=True, timeout=30
    )


def veth(left_ns: str, left: str, right_ns: str, right: str) -> None:
    ip("-n", left_ns, "link", "add", left, "type", "veth", "peer", "name", right, "netns", right_ns)
    ip("-n", left_ns, "link", "set", left, "up")
    ip("-n", right_ns, "link", "set", right, "up")


def upf_network() -> dict[str, Any]:
    """The chart's NAD of a network with the UE pool as a pod-routed range, its last plugin
    given the pod's cni-args as Multus merges them (args.cni)."""
    whereabouts_range, gateway = whereabouts_range_and_gateway(SUBNET, RESERVATION)
    network = cni_config(
        NetworkAttachment(
            "n6-us-west-2a", "multus1", "l2", whereabouts_range, gateway,
            pod_routed_ranges=(UE_POOL,),
        )
    )  # fmt: skip
    network["plugins"][-1]["args"] = {"cni": {"podRoutedRanges": [UE_POOL]}}
    return network


def a_upf_on_its_node(ns: Namespaces) -> None:
    """eth0 from the VPC CNI's stand-in (its host veth in the node), net1 on the subnet (what
    ipvlan and the IPAM give), the UE address on the UPF's tun device, and the
    node's ENI, to whose MAC the subnet's side sends the UE pool as a VPC route would."""
    set_up_eth0(ns.pod, ns.node, POD_NETWORK_ADDRESS)
    # AL2023 keeps systemd's loose reverse-path filter for new interfaces (default.rp_filter 2),
    # which a pod's namespace inherits: a packet from the subnet arriving on eth0 passes it.
    sysctl(ns.pod, "net.ipv4.conf.eth0.rp_filter=2")
    veth(ns.pod, "net1", ns.subnet, "lan0")
    ip("-n", ns.pod, "address", "add", f"{POD_ADDRESS}/24", "dev", "net1")
    ip("-n", ns.pod, "tuntap", "add", "upf-tun", "mode", "tun")
    ip("-n", ns.pod, "address", "add", f"{UE}/32", "dev", "upf-tun")
    ip("-n", ns.pod, "link", "set", "upf-tun", "up")
    veth(ns.node, "multus1", ns.subnet, "eni0")
    ip("-n", ns.subnet, "address", "add", f"{ROUTER}/24", "dev", "lan0")
    eni_mac = json.loads(ip("-n", ns.node, "-j", "link", "show", "multus1").stdout)[0]["address"]
    ip("-n", ns.subnet, "neigh", "add", ENI_ADDRESS, "lladdr", eni_mac, "dev", "eni0",
       "nud", "permanent")  # fmt: skip
    ip("-n", ns.subnet, "route", "add", UE_POOL, "via", ENI_ADDRESS, "dev", "eni0", "onlink")


def add(ns: Namespaces, agent: StandInAgent, network: dict[str, Any]) -> dict[str, Any]:
    """ADD of the NAD's plugins after ipvlan (sbr, multus-pod-ip), from ipvlan's result."""
    chain = ChainRun(ns.pod_path, "net1", agent.path, ns.node)
    ipvlan_result = {
        "cniVersion": network["cniVersion"],
        "interfaces": [{"name": "net1", "sandbox": ns.pod_path}],
        "ips": [{"version": "4", "address": f"{POD_ADDRESS}/24", "gateway": ROUTER,
                 "interface": 0}],
    }  # fmt: skip
    return chain.add(network, network["plugins"][1:], ipvlan_result)


def node_routes(ns: Namespaces) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(
        ip("-n", ns.node, "-j", "route", "show", UE_POOL).stdout
    )
    return found


def reaches_the_ue(ns: Namespaces) -> bool:
    """One ping from the VPC router's address to the UE address, answered."""
    done = subprocess.run(
        ["ip", "netns", "exec", ns.subnet, "ping", "-c", "1", "-W", "3", "-I", ROUTER, UE],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


def test_the_ue_pool_reaches_the_upf_over_its_eth0_until_the_pod_is_deleted(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    a_upf_on_its_node(namespaces)
    assert not reaches_the_ue(namespaces)  # the ENI's host side knows no way to the pool
    agent = StandInAgent(tmp_path / "agent.sock")
    network = upf_network()
    try:
        result = add(namespaces, agent, network)
        assert [request["routed_ranges"] for request in agent.requests] == [[UE_POOL]]

        # the pod's ARP requests on net1 name its own address, not a range's (ipvlan gives an
        # ARP reply only to the slave holding its target: see the plugin)
        arp_announce = subprocess.run(
            ["ip", "netns", "exec", namespaces.pod, "sysctl", "-n",
             "net.ipv4.conf.net1.arp_announce"],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        assert arp_announce.stdout.strip() == "2"
        (route,) = node_routes(namespaces)
        assert route["gateway"] == POD_NETWORK_ADDRESS
        assert route["dev"] == f"v-{namespaces.pod}"[:15]  # the VPC CNI's host veth
        assert reaches_the_ue(namespaces)

        ChainRun(namespaces.pod_path, "net1", agent.path, namespaces.node).delete(
            network, network["plugins"][1:], result
        )
    finally:
        agent.close()
    assert node_routes(namespaces) == []
    assert not reaches_the_ue(namespaces)


def test_the_kernel_drops_the_node_route_with_the_pods_namespace(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    """A DEL that never came (the agent's socket gone, the node busy): deleting the pod's
    namespace takes its veth, and the kernel the routes through it (fib_sync_down_dev)."""
    a_upf_on_its_node(namespaces)
    agent = StandInAgent(tmp_path / "agent.sock")
    try:
        add(namespaces, agent, upf_network())
    finally:
        agent.close()
    assert len(node_routes(namespaces)) == 1

    ip("netns", "del", namespaces.pod)

    # The kernel tears a namespace down in its cleanup work, after `ip netns del` returned.
    deadline = time.monotonic() + NAMESPACE_CLEANUP_TIMEOUT
    while node_routes(namespaces) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert node_routes(namespaces) == []


def test_a_del_leaves_the_range_to_the_pod_of_the_node_that_took_it_since(
    namespaces: Namespaces, tmp_path: Path
) -> None:
    """Two pods of one node asking for one range: the last ADD's route stands (as in the VPC's
    route tables), and the first pod's DEL deletes only a route via its own eth0."""
    a_upf_on_its_node(namespaces)
    agent = StandInAgent(tmp_path / "agent.sock")
    network = upf_network()
    standby = f"rr-standby-{uuid.uuid4().hex[:6]}"
    ip("netns", "add", standby)
    try:
        result = add(namespaces, agent, network)
        set_up_eth0(standby, namespaces.node, STANDBY_POD_NETWORK_ADDRESS)
        # what the standby pod's ADD does on the node
        ip("-n", namespaces.node, "route", "replace", UE_POOL, "via", STANDBY_POD_NETWORK_ADDRESS)

        ChainRun(namespaces.pod_path, "net1", agent.path, namespaces.node).delete(
            network, network["plugins"][1:], result
        )

        (route,) = node_routes(namespaces)
        assert route["gateway"] == STANDBY_POD_NETWORK_ADDRESS
    finally:
        agent.close()
        ip("netns", "del", standby, check=False)
