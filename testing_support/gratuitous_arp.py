"""A veth pair standing in for a node's Multus ENI and the pod interface behind it, and the
gratuitous ARP a pod sends when it takes a floating address (what keepalived sends on becoming
master: keepalived/vrrp/vrrp_arp.c, send_gratuitous_arp_immediate: an ARP request to the
broadcast address whose sender and target protocol address are the virtual address).

The hosts that run the tests have veth but no ipvlan (tests/integration/multus_pod_ips/
test_pod_routes.py probes for it): the frame sent on the pod end arrives on the ENI end, where
the agent's packet socket sees it as it would see an ipvlan slave's frame leaving through its
master. Both ends stay in the host's network namespace (the agent talks to the emulator on its
loopback) and carry no address. Needs root (CAP_NET_ADMIN for the links, CAP_NET_RAW to send).
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any

from multus_pod_ips.agent.floating import ETH_P_ARP
from testing_support.multus_emulator import Ec2Emulator, EmulatedVpc
from testing_support.pod_ip_node import EMULATOR_RANGES, EMULATOR_STATIC_RANGES, PodIpNode

_BROADCAST = b"\xff" * 6
# htype 1 (Ethernet), ptype IPv4, hlen 6, plen 4, op 1 (request)
_ARP_ETHERNET_IPV4_REQUEST = bytes.fromhex("0001080006040001")


def gratuitous_arp(mac: bytes, ip: str) -> bytes:
    """The Ethernet frame of a gratuitous ARP request announcing `ip` from `mac`."""
    address = ipaddress.IPv4Address(ip).packed
    return (
        _BROADCAST
        + mac
        + ETH_P_ARP.to_bytes(2, "big")
        + _ARP_ETHERNET_IPV4_REQUEST
        + mac
        + address
        + _BROADCAST
        + address
    )


@dataclass(frozen=True)
class VethPod:
    """eni_end: the node's Multus interface (name it in the agent's config); pod_end: where
    the pod's frames come from."""

    eni_end: str
    pod_end: str

    @classmethod
    def create(cls, prefix: str) -> VethPod:
        """A new pair with unique names (prefix: at most 5 characters; Linux allows 15)."""
        tag = uuid.uuid4().hex[:6]
        pair = cls(f"{prefix}e{tag}", f"{prefix}p{tag}")
        _ip("link", "add", pair.eni_end, "type", "veth", "peer", "name", pair.pod_end)
        for end in (pair.eni_end, pair.pod_end):
            _ip("link", "set", end, "up")
        return pair

    def delete(self) -> None:
        _ip("link", "del", self.eni_end, check=False)  # takes its peer along

    def announce(self, ip: str) -> float:
        """Sends one gratuitous ARP for `ip` from the pod end; time.monotonic() right after."""
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
            sock.bind((self.pod_end, 0))
            mac = bytes.fromhex(_link_address(self.pod_end).replace(":", ""))
            sock.send(gratuitous_arp(mac, ip))
            return time.monotonic()


def floating_node(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    az: str,
    cluster: str,
    link: VethPod,
    floating: str,
    **settings: Any,
) -> PodIpNode:
    """A bootstrapped node (its agent not started) whose multus1 ENI `link.eni_end` stands in
    for, with `floating` among that interface's floating addresses; `settings`: more of
    PodIpNode's fields."""
    node = PodIpNode.bootstrap(
        emulator,
        vpc,
        az,
        cluster,
        interfaces={link.eni_end: EMULATOR_RANGES["multus1"]},
        static_ranges={link.eni_end: EMULATOR_STATIC_RANGES["multus1"]},
        floating_addresses={link.eni_end: [floating]},
        **settings,
    )
    # The agent finds its ENI by the interface's name in the bootstrap's state directory.
    state = node.root / "var/lib/multus-eni"
    shutil.copy(state / "multus1.eni", state / f"{link.eni_end}.eni")
    node.enis[link.eni_end] = node.enis["multus1"]
    return node


def root_can_make_links() -> str | None:
    """Why veth pairs cannot be made here, or None when they can."""
    try:
        pair = VethPod.create("probe")
    except (OSError, subprocess.CalledProcessError) as error:
        return f"cannot create a veth pair: {error}"
    pair.delete()
    return None


def _link_address(link: str) -> str:
    with open(f"/sys/class/net/{link}/address", encoding="ascii") as handle:
        return handle.read().strip()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)
