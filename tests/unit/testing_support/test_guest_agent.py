"""The node box's guest agent channel while the guest reads nothing (a reboot under a slow,
emulated CPU): QEMU stops reading the socket while the guest's port is closed, so every request
stays queued in the host's socket buffer, which holds only some dozens of small writes."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing_support.node_box import guest_agent
from testing_support.node_box.guest_agent import GuestAgent, GuestAgentError


@pytest.fixture
def silent_guest(tmp_path: Path) -> Iterator[tuple[GuestAgent, socket.socket]]:
    """An agent connected to a listener that accepts and never reads (QEMU with a closed port)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "qga.sock"))
    listener.listen(1)
    agent = GuestAgent(tmp_path / "qga.sock")
    peer, _ = listener.accept()
    yield agent, peer
    agent.close()
    peer.close()
    listener.close()


def test_a_sync_that_gets_no_answer_backs_off_instead_of_filling_the_socket(
    silent_guest: tuple[GuestAgent, socket.socket],
) -> None:
    agent, peer = silent_guest
    with pytest.raises(GuestAgentError, match="did not answer within 3 s"):
        agent.sync(timeout=3.0, attempt_seconds=0.05)
    peer.setblocking(False)
    syncs = [line for line in peer.recv(1 << 20).split(b"\n") if b"guest-sync-delimited" in line]
    # 0.05 + 0.1 + ... + 1.6 s: 6 attempts in 3 s, where one every 0.05 s would be 60 (a new id
    # every 3 s through a 300 s boot is 100, more than the socket holds: 70 here).
    assert 5 <= len(syncs) <= 7, len(syncs)


def test_a_request_the_socket_cannot_take_is_a_guest_agent_error(
    silent_guest: tuple[GuestAgent, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, _peer = silent_guest
    monkeypatch.setattr(guest_agent, "SEND_TIMEOUT", 0.2)
    request = {"execute": "guest-exec", "arguments": {"path": "/bin/true", "padding": "x" * 4096}}
    with pytest.raises(GuestAgentError, match="guest-exec: the agent's socket took nothing"):
        for _ in range(10_000):
            agent._send(request)


def test_an_answer_to_the_current_sync_id_ends_the_sync(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "qga.sock"))
    listener.listen(1)
    agent = GuestAgent(tmp_path / "qga.sock")
    peer, _ = listener.accept()

    def answer() -> None:
        line = peer.makefile("rb").readline()
        request = json.loads(line.lstrip(b"\xff"))
        # an answer to an older id first, which the sync must skip
        peer.sendall(b'\xff{"return": 1}\n')
        peer.sendall(b"\xff" + json.dumps({"return": request["arguments"]["id"]}).encode() + b"\n")

    thread = threading.Thread(target=answer)
    thread.start()
    agent.sync(timeout=10.0)
    thread.join()
    agent.close()
    peer.close()
    listener.close()
