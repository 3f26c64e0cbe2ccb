"""Commands in the guest through QEMU's guest agent (Debian's qemu-guest-agent in the image),
over a virtio-serial port that QEMU connects to a unix socket on the host.

Why this channel: it needs no network path between host and guest (the box's NICs belong to
the tests), no login and no hand-written agent, and it returns each command's exit status,
stdout and stderr apart (guest-exec with capture-output, then guest-exec-status).

The agent's protocol is QMP's JSON without a greeting. While the guest boots or reboots,
requests wait in the socket and old answers may still arrive, so every exchange starts with
guest-sync-delimited: a fresh random id, answered after a 0xFF byte once the agent has read
everything before it; answers to anything older are dropped.
"""

from __future__ import annotations

import base64
import json
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# How long a request may wait for room in the socket before the guest counts as gone.
SEND_TIMEOUT = 30.0


class GuestAgentError(RuntimeError):
    """The agent did not answer in time, or refused a command."""


@dataclass(frozen=True)
class GuestResult:
    """A finished guest command: exit status (None when a signal ended it), output, signal."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    signal: int | None = None

    def describe(self) -> str:
        return (
            f"{' '.join(self.argv)!r} exited {self.returncode} (signal {self.signal})\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )


class GuestAgent:
    """A connection to the guest agent's chardev socket (`-chardev socket,...,server=on`)."""

    def __init__(self, path: Path) -> None:
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.connect(str(path))
        self._buffer = b""

    def close(self) -> None:
        self._socket.close()

    def sync(self, *, timeout: float, attempt_seconds: float = 3.0) -> None:
        """Returns once the agent answers; each attempt that gets no answer sends a new id and
        waits twice as long (up to 30 s). Why the backoff: while the guest's port is closed (a
        reboot), QEMU reads nothing from the socket, every request stays queued in it, and a
        new one every 3 s through a slow boot would fill its send buffer."""
        deadline = time.monotonic() + timeout
        while True:
            token = random.randrange(1, 2**31)
            # 0xFF first: the agent drops whatever partial request it holds (its reset byte)
            self._send({"execute": "guest-sync-delimited", "arguments": {"id": token}}, b"\xff")
            attempt_end = min(deadline, time.monotonic() + attempt_seconds)
            attempt_seconds = min(attempt_seconds * 2, 30.0)
            while time.monotonic() < attempt_end:
                message = self._read(attempt_end - time.monotonic())
                if message is not None and message.get("return") == token:
                    return
            if time.monotonic() >= deadline:
                raise GuestAgentError(f"the guest agent did not answer within {timeout:.0f} s")

    def execute(
        self, command: str, arguments: dict[str, Any] | None = None, *, timeout: float = 30.0
    ) -> Any:
        self.sync(timeout=timeout)
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        self._send(request)
        message = self._read(timeout)
        if message is None:
            raise GuestAgentError(f"{command}: no answer within {timeout:.0f} s")
        if "error" in message:
            raise GuestAgentError(f"{command}: {message['error'].get('desc')}")
        return message.get("return")

    def send_only(self, command: str, arguments: dict[str, Any] | None = None) -> None:
        """For guest-shutdown, which answers nothing when it succeeds (the guest goes away)."""
        self.sync(timeout=30.0)
        self._send({"execute": command, "arguments": arguments or {}})

    def run(
        self, argv: list[str], *, stdin: bytes | None = None, timeout: float = 120.0
    ) -> GuestResult:
        """Runs argv (no shell) as root in the guest, with the agent's environment."""
        arguments: dict[str, Any] = {"path": argv[0], "arg": argv[1:], "capture-output": True}
        if stdin is not None:
            arguments["input-data"] = base64.b64encode(stdin).decode()
        pid = self.execute("guest-exec", arguments, timeout=timeout)["pid"]
        deadline = time.monotonic() + timeout
        pause = 0.05
        while True:
            status = self.execute("guest-exec-status", {"pid": pid}, timeout=timeout)
            if status["exited"]:
                return GuestResult(
                    argv=tuple(argv),
                    returncode=status.get("exitcode"),
                    stdout=_decode(status.get("out-data")),
                    stderr=_decode(status.get("err-data")),
                    signal=status.get("signal"),
                )
            if time.monotonic() > deadline:
                raise GuestAgentError(f"{argv!r} still running after {timeout:.0f} s")
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _send(self, request: dict[str, Any], prefix: bytes = b"") -> None:
        # Its own timeout: _read leaves the socket with whatever remained of its last wait.
        self._socket.settimeout(SEND_TIMEOUT)
        try:
            self._socket.sendall(prefix + json.dumps(request).encode() + b"\n")
        except TimeoutError:
            raise GuestAgentError(
                f"{request['execute']}: the agent's socket took nothing for {SEND_TIMEOUT:.0f} s "
                "(QEMU reads none while the guest's port is closed: is the guest up?)"
            ) from None

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON message, or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            self._buffer = self._buffer.lstrip(b"\xff\n\r ")
            if b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                try:
                    message: dict[str, Any] = json.loads(line.replace(b"\xff", b""))
                except json.JSONDecodeError:
                    continue  # the tail of an answer cut by a reboot
                return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._socket.settimeout(remaining)
            try:
                chunk = self._socket.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                raise GuestAgentError("QEMU closed the guest agent's socket")
            self._buffer += chunk


def _decode(data: str | None) -> str:
    return base64.b64decode(data).decode(errors="replace") if data else ""
