"""Floating addresses (multus_pod_ips/agent/floating.py): which ARP frames claim one, the claim
(AllowReassignment=true, repeats folded), the reconcile keeping it and never restoring it, and a
static NAD's pod that asks for one.

Sources: RFC 5227 section 2.3 (an ARP Announcement is an ARP request whose sender and target
protocol addresses are both the announced address) and RFC 5944 section 4.6 (a gratuitous ARP may
be a request or a reply, with both addresses the announced one); keepalived
keepalived/vrrp/vrrp_arp.c, send_gratuitous_arp_immediate (ARPOP_REQUEST, broadcast, sender and
target IP the virtual address); EC2 API reference, AssignPrivateIpAddresses (AllowReassignment:
"Indicates whether to allow an IP address that is already assigned to another network interface
or instance to be reassigned to the specified network interface").
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from multus_pod_ips.agent.config import AgentError
from multus_pod_ips.agent.floating import (
    CLAIM_REPEAT_SECONDS,
    ArpWatcher,
    announced_address,
)
from multus_pod_ips.agent.node_agent import Agent
from multus_pod_ips.agent.records import PodAttachment
from multus_pod_ips.cni_plugin import INVALID_CONFIG
from tests.unit.multus_pod_ips.fakes import ScriptedEc2, settle, worker_for

FLOATING = "10.0.4.60"
POD_MAC = bytes.fromhex("020000000001")


def arp_frame(
    sender_ip: str,
    target_ip: str,
    operation: int = 1,
    ethertype: int = 0x0806,
    hardware: bytes = bytes.fromhex("000108000604"),  # Ethernet, IPv4, 6, 4
) -> bytes:
    """An Ethernet frame (broadcast) carrying an ARP packet (RFC 826 layout: htype, ptype,
    hlen, plen, op, sha, spa, tha, tpa)."""
    return (
        b"\xff" * 6
        + POD_MAC
        + ethertype.to_bytes(2, "big")
        + hardware
        + operation.to_bytes(2, "big")
        + POD_MAC
        + ipaddress.IPv4Address(sender_ip).packed
        + b"\xff" * 6
        + ipaddress.IPv4Address(target_ip).packed
    )


def test_a_gratuitous_request_or_reply_announces_its_address() -> None:
    assert announced_address(arp_frame(FLOATING, FLOATING, operation=1)) == FLOATING
    assert announced_address(arp_frame(FLOATING, FLOATING, operation=2)) == FLOATING


@pytest.mark.parametrize(
    "frame",
    [
        arp_frame("10.0.4.33", FLOATING),  # who has the floating address: a question
        arp_frame(FLOATING, "10.0.4.1"),  # the holder resolving its gateway
        arp_frame("0.0.0.0", FLOATING),  # RFC 5227 probe
        arp_frame("0.0.0.0", "0.0.0.0"),
        arp_frame(FLOATING, FLOATING, operation=3),  # RARP request
        arp_frame(FLOATING, FLOATING, ethertype=0x0800),
        arp_frame(FLOATING, FLOATING, hardware=bytes.fromhex("000686dd0610")),
        arp_frame(FLOATING, FLOATING)[:41],  # truncated
    ],
    ids=["question", "resolution", "probe", "zero", "rarp", "ipv4", "not-ether-ipv4", "short"],
)
def test_other_arp_frames_announce_nothing(frame: bytes) -> None:
    assert announced_address(frame) is None


def floating_agent(tmp_path: Path, ec2: ScriptedEc2, **overrides: Any) -> Agent:
    """An agent whose multus1 (eni-1) has FLOATING as floating address, first reconcile done,
    the EC2 call log cleared."""
    agent = worker_for(
        tmp_path,
        ec2,
        settle_seconds=0.0,
        static_ranges={"multus1": ["10.0.4.48/28"]},
        floating_addresses={"multus1": [FLOATING]},
        **overrides,
    ).agent
    (tmp_path / "run/netns").mkdir(parents=True)
    assert agent.reconcile_all(timeout=10) is True
    ec2.calls.clear()
    return agent


def live_pod(agent: Agent, tmp_path: Path, name: str, ip: str) -> None:
    (tmp_path / f"run/netns/cni-{name}").touch()
    agent.records.put(
        PodAttachment(name, "net1", f"/var/run/netns/cni-{name}", "multus1", (ip,), name)
    )


def claim(agent: Agent, frame: bytes) -> AgentError | None:
    operation = ArpWatcher("multus1", agent.floating).handle(frame)
    assert operation is not None
    (error,) = settle([operation])
    return error


def test_an_announcement_assigns_the_floating_address_taking_it_from_another_eni(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)

    assert claim(agent, arp_frame(FLOATING, FLOATING)) is None

    assert ec2.calls == [
        (
            "AssignPrivateIpAddresses",
            {
                "NetworkInterfaceId": "eni-1",
                "AllowReassignment": "true",
                "PrivateIpAddress.1": FLOATING,
            },
        )
    ]
    assert FLOATING in ec2.secondaries


def test_an_announcement_repeated_at_once_is_one_claim_and_a_later_one_claims_again(
    tmp_path: Path,
) -> None:
    agent = floating_agent(tmp_path, ScriptedEc2())
    watcher = ArpWatcher("multus1", agent.floating)
    first = watcher.handle(arp_frame(FLOATING, FLOATING))
    assert first is not None
    # keepalived's garp_master_repeat: several announcements back to back.
    assert [watcher.handle(arp_frame(FLOATING, FLOATING)) for _ in range(4)] == [None] * 4
    time.sleep(CLAIM_REPEAT_SECONDS)
    assert watcher.handle(arp_frame(FLOATING, FLOATING)) is not None  # garp_master_delay later


@pytest.mark.parametrize(
    ("interface", "ip"), [("multus1", "10.0.4.61"), ("multus1", "10.0.4.33"), ("multus2", FLOATING)]
)
def test_an_announcement_of_an_address_not_floating_on_that_interface_claims_nothing(
    tmp_path: Path, interface: str, ip: str
) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    assert ArpWatcher(interface, agent.floating).handle(arp_frame(ip, ip)) is None
    assert ec2.calls == []


def test_the_reconcile_keeps_a_claimed_floating_address_while_a_pod_of_the_network_lives(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    live_pod(agent, tmp_path, "active", "10.0.4.50")
    assert agent.reconcile_all(timeout=10) is True  # the pod's own address restored
    assert claim(agent, arp_frame(FLOATING, FLOATING)) is None
    ec2.calls.clear()

    for _ in range(2):
        assert agent.reconcile_all(timeout=10) is True

    assert ec2.actions() == []
    assert ec2.secondaries == {"10.0.4.50", FLOATING}


def test_the_reconcile_releases_a_floating_address_once_no_pod_of_the_network_lives(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    live_pod(agent, tmp_path, "active", "10.0.4.50")
    assert agent.reconcile_all(timeout=10) is True
    assert claim(agent, arp_frame(FLOATING, FLOATING)) is None

    (tmp_path / "run/netns/cni-active").unlink()
    assert agent.reconcile_all(timeout=10) is True

    assert ec2.secondaries == set()


def test_a_floating_address_claimed_by_another_node_is_not_taken_back(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    live_pod(agent, tmp_path, "standby", "10.0.4.50")
    assert agent.reconcile_all(timeout=10) is True
    assert claim(agent, arp_frame(FLOATING, FLOATING)) is None
    ec2.secondaries.discard(FLOATING)  # another node's claim moved it (EC2 and IMDS agree)
    ec2.calls.clear()

    for _ in range(2):
        assert agent.reconcile_all(timeout=10) is True

    # IMDS contradicts the record once: EC2 is asked, and nothing is assigned again.
    assert ec2.actions() == ["DescribeNetworkInterfaces"]
    assert FLOATING not in ec2.secondaries


def test_a_second_claim_after_the_address_moved_away_moves_it_back(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    watcher = ArpWatcher("multus1", agent.floating)
    assert claim(agent, arp_frame(FLOATING, FLOATING)) is None
    ec2.secondaries.discard(FLOATING)  # the other node's pod became active
    time.sleep(CLAIM_REPEAT_SECONDS)

    back = watcher.handle(arp_frame(FLOATING, FLOATING, operation=2))  # failback, as a reply

    assert back is not None and settle([back]) == [None]
    assert ec2.addresses_sent("AssignPrivateIpAddresses") == [[FLOATING], [FLOATING]]
    assert {params["AllowReassignment"] for _, params in ec2.calls} == {"true"}
    assert FLOATING in ec2.secondaries


def test_a_static_nads_pod_cannot_ask_for_a_floating_address(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    (tmp_path / "run/netns/cni-upf").touch()
    with pytest.raises(AgentError) as refused:
        agent.handle(
            {
                "command": "ADD",
                "container_id": "upf",
                "ifname": "net1",
                "interface": "multus1",
                "netns": "/var/run/netns/cni-upf",
                "ips": [FLOATING],
                "fixed": True,
            }
        )
    assert refused.value.code == INVALID_CONFIG
    assert "is a floating address of multus1" in refused.value.message
    assert "floating_addresses" in refused.value.message
    assert ec2.calls == []


class ScriptedSocket:
    """A packet socket that hands over `frames`, then blocks until `closed`."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = list(frames)
        self.closed = threading.Event()

    def __enter__(self) -> ScriptedSocket:
        return self

    def __exit__(self, *_: object) -> None:
        self.closed.set()

    def recv(self, size: int) -> bytes:
        if self.frames:
            return self.frames.pop(0)
        self.closed.wait(30)
        raise OSError("closed")


def test_the_watcher_opens_its_interfaces_socket_again_until_the_interface_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ec2 = ScriptedEc2()
    agent = floating_agent(tmp_path, ec2)
    monkeypatch.setattr("multus_pod_ips.agent.floating.REOPEN_SECONDS", 0.01)
    opened: list[str] = []
    scripted = ScriptedSocket([arp_frame("10.0.4.33", "10.0.4.1"), arp_frame(FLOATING, FLOATING)])

    def open_socket(interface: str) -> socket.socket:
        opened.append(interface)
        if len(opened) < 3:
            raise OSError(19, "No such device")
        if scripted.closed.is_set():  # the test is over: park the daemon thread
            threading.Event().wait()
        return scripted  # type: ignore[return-value]

    watcher = ArpWatcher("multus1", agent.floating, open_socket)
    watcher.start()
    try:
        assert watcher.listening.wait(5)
        deadline = time.monotonic() + 5
        while FLOATING not in ec2.secondaries and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        scripted.closed.set()
    assert opened[:3] == ["multus1"] * 3
    assert ec2.addresses_sent("AssignPrivateIpAddresses") == [[FLOATING]]
