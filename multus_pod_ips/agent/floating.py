"""Floating addresses: a fixed address that moves to the node whose pod announces it.

The active pod of an active/standby pair (keepalived, or any VRRP implementation) puts the
floating address on its Multus interface and announces it with a gratuitous ARP, as on
premises. In ipvlan's l2 mode every frame a pod sends leaves through the master, the node's
Multus ENI (Linux drivers/net/ipvlan/ipvlan_core.c: ipvlan_xmit_mode_l2 hands a broadcast to
ipvlan_multicast_enqueue, whose ipvlan_process_multicast sends it out with `skb->dev =
port->dev; dev_queue_xmit(skb)`, and a unicast frame with `skb->dev = ipvlan->phy_dev`), where
dev_queue_xmit shows it to the packet sockets bound to the master. So the agent, which has no
Kubernetes API access, sees the announcement on the node: a packet socket per Multus interface
with floating addresses (CAP_NET_RAW) receives its ARP frames, and an announcement of one of
that interface's floating addresses is a claim: the address is assigned to this node's ENI with
AllowReassignment=true, which takes it from the ENI of the node of the previous active pod
(EC2 API reference, AssignPrivateIpAddresses).

The reconcile keeps a floating address the ENI holds while a pod of that network lives on the
node (it is no pod's record, so it would otherwise be released as stale), and never restores
one that has gone: an address missing from the ENI was taken by another node's claim.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from .config import AgentConfig
from .eni_worker import EniWorker, Operation

LOG = logging.getLogger("multus-pod-ips")

#: EtherType of ARP (IEEE 802 numbers; Linux include/uapi/linux/if_ether.h ETH_P_ARP).
ETH_P_ARP = 0x0806
_ETHERNET_HEADER = 14
_ARP_ETHERNET_IPV4 = bytes.fromhex("000108000604")  # htype 1, ptype IPv4, 6, 4
_ARP_REQUEST, _ARP_REPLY = 1, 2
#: An announcement repeated within this time is the same claim: keepalived sends
#: garp_master_repeat (default 5) gratuitous ARPs at once after becoming master and as many
#: again garp_master_delay (default 5 s) later (keepalived.conf(5)); the second burst claims
#: again, which also catches a claim made while IMDS still showed an older move.
CLAIM_REPEAT_SECONDS = 1.0
#: Wait before a packet socket is opened again after its interface was missing or failed.
REOPEN_SECONDS = 2.0


def announced_address(frame: bytes) -> str | None:
    """The IPv4 address a gratuitous ARP in this Ethernet frame announces, else None.

    An announcement carries the address as both sender and target protocol address, in an ARP
    request (RFC 5227 section 2.3, "ARP Announcement"; what keepalived's vrrp_arp.c
    send_gratuitous_arp_immediate sends) or an ARP reply (RFC 5944 section 4.6, "gratuitous
    ARP"; `arping -A`). Probes (sender 0.0.0.0) and ordinary requests (sender another address)
    are not."""
    if len(frame) < _ETHERNET_HEADER + 28 or frame[12:14] != ETH_P_ARP.to_bytes(2, "big"):
        return None
    arp = frame[_ETHERNET_HEADER:]
    if arp[:6] != _ARP_ETHERNET_IPV4 or int.from_bytes(arp[6:8], "big") not in (
        _ARP_REQUEST,
        _ARP_REPLY,
    ):
        return None
    sender, target = arp[14:18], arp[24:28]
    if sender != target or sender == bytes(4):
        return None
    return str(ipaddress.IPv4Address(sender))


class FloatingHost(Protocol):
    """What the floating addresses need of the node agent (node_agent.Agent)."""

    config: AgentConfig
    workers: dict[str, EniWorker]


class FloatingAddresses:
    """The floating addresses of each Multus interface, their claims and what the reconcile
    keeps of them."""

    def __init__(self, agent: FloatingHost, addresses: Mapping[str, Sequence[str]]) -> None:
        self.agent = agent
        self.addresses = {interface: set(ips) for interface, ips in addresses.items() if ips}
        self._lock = threading.Lock()
        self._claimed_at: dict[tuple[str, str], float] = {}

    def is_floating(self, interface: str, ip: str) -> bool:
        return ip in self.addresses.get(interface, set())

    def claim(self, interface: str, ip: str) -> Operation | None:
        """Assigns a floating address a pod of this node announced to the interface's ENI,
        taking it from another ENI; None when it is not one of the interface's floating
        addresses, its ENI is not known yet, or it was claimed within CLAIM_REPEAT_SECONDS."""
        worker = self.agent.workers.get(interface)
        if not self.is_floating(interface, ip) or worker is None:
            return None
        now = time.monotonic()
        with self._lock:
            if now - self._claimed_at.get((interface, ip), -CLAIM_REPEAT_SECONDS) < (
                CLAIM_REPEAT_SECONDS
            ):
                return None
            self._claimed_at[interface, ip] = now
        LOG.info("%s: a pod announces floating address %s; moving it here", interface, ip)
        worker.touch((ip,))
        deadline = now + self.agent.config.add_timeout_seconds
        operation = worker.submit(Operation("assign", ip, deadline, reassign=True))
        threading.Thread(
            target=_report, args=(worker, operation, now), name=f"claim-{ip}", daemon=True
        ).start()
        return operation

    def kept(self, interface: str, held: set[str], live: set[str]) -> set[str]:
        """The floating addresses the reconcile keeps on the interface's ENI: those it holds,
        while a pod of the network lives on the node (`live`: the live pods' addresses; the
        agent cannot tell which of them announced it). None is restored: one that is gone
        was claimed by another node."""
        if not live:
            return set()
        return self.addresses.get(interface, set()) & held


def _report(worker: EniWorker, operation: Operation, started: float) -> None:
    if not operation.done.wait(max(0.0, operation.deadline - time.monotonic()) + 5):
        LOG.warning("%s: floating address %s: no answer from EC2", worker.eni_id, operation.ip)
    elif operation.error:
        LOG.warning(
            "%s: floating address %s not moved: %s",
            worker.eni_id,
            operation.ip,
            operation.error.message,
        )
    else:
        LOG.info(
            "%s: floating address %s assigned after %.2f s",
            worker.eni_id,
            operation.ip,
            time.monotonic() - started,
        )


def open_arp_socket(interface: str) -> socket.socket:
    """A packet socket receiving the ARP frames the interface sends and receives (packet(7))."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP))
    try:
        sock.bind((interface, ETH_P_ARP))
    except OSError:
        sock.close()
        raise
    return sock


class ArpWatcher(threading.Thread):
    """Watches one Multus interface for announcements of its floating addresses and claims
    them. A missing interface or a failed socket is retried every REOPEN_SECONDS."""

    def __init__(
        self,
        interface: str,
        floating: FloatingAddresses,
        open_socket: Callable[[str], socket.socket] = open_arp_socket,
    ) -> None:
        super().__init__(name=f"arp-{interface}", daemon=True)
        self.interface = interface
        self.floating = floating
        self._open_socket = open_socket
        self.listening = threading.Event()

    def run(self) -> None:
        while True:
            try:
                with self._open_socket(self.interface) as sock:
                    self.listening.set()
                    LOG.info("%s: watching for floating address announcements", self.interface)
                    while True:
                        self.handle(sock.recv(65535))
            except OSError as error:
                self.listening.clear()
                LOG.warning(
                    "%s: ARP socket: %s; again in %.0f s", self.interface, error, REOPEN_SECONDS
                )
                time.sleep(REOPEN_SECONDS)

    def handle(self, frame: bytes) -> Operation | None:
        ip = announced_address(frame)
        return None if ip is None else self.floating.claim(self.interface, ip)
