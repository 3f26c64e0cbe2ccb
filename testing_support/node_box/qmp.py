"""A QEMU Machine Protocol client: the runner's hands on the virtual hardware (hot-plug and
unplug a NIC, reset, quit), over the unix socket QEMU opens with `-qmp unix:PATH,server=on`.

QMP is one JSON object per line: a greeting, then a reply ({"return": ...} or {"error": ...})
per command in order, with asynchronous events ({"event": ...}) in between, which are kept so a
caller can wait for one (DEVICE_DELETED once the guest released an unplugged device).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class QmpError(RuntimeError):
    """QEMU refused a command (its error class and description), or did not answer."""


class QmpTimeout(QmpError):
    """Nothing arrived on the session within the time given."""


class Qmp:
    """One QMP session; `execute` sends a command and returns its reply's "return". One
    command or wait at a time: a lock lets a thread plug NICs while a test uses the session."""

    def __init__(self, path: Path, *, connect_timeout: float = 30.0) -> None:
        deadline = time.monotonic() + connect_timeout
        while True:  # QEMU creates the socket a moment after it starts
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self._socket.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                self._socket.close()
                if time.monotonic() > deadline:
                    raise QmpError(f"no QMP socket at {path} after {connect_timeout} s") from None
                time.sleep(0.05)
        self._buffer = b""
        self._lock = threading.RLock()
        self.events: list[dict[str, Any]] = []
        greeting = self._read(timeout=connect_timeout)
        if "QMP" not in greeting:
            raise QmpError(f"not a QMP greeting: {greeting}")
        self.execute("qmp_capabilities")

    def execute(
        self, command: str, arguments: dict[str, Any] | None = None, *, timeout: float = 30.0
    ) -> Any:
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        with self._lock:
            self._socket.sendall(json.dumps(request).encode() + b"\n")
            deadline = time.monotonic() + timeout
            while True:
                message = self._read(timeout=max(0.0, deadline - time.monotonic()))
                if "event" in message:
                    self.events.append(message)
                elif "error" in message:
                    error = message["error"]
                    raise QmpError(f"{command}: {error.get('class')}: {error.get('desc')}")
                else:
                    return message.get("return")

    def wait_event(
        self,
        name: str,
        *,
        timeout: float,
        match: Callable[[dict[str, Any]], bool] = lambda _data: True,
    ) -> dict[str, Any]:
        """The first event `name` whose data `match`es, already received or arriving within
        `timeout` seconds; it is taken off `events`."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                for event in self.events:
                    if event.get("event") == name and match(event.get("data", {})):
                        self.events.remove(event)
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QmpError(f"no {name} event within {timeout} s")
                # a short read at a time: another thread may need the session meanwhile
                with contextlib.suppress(QmpTimeout):
                    self.events.append(self._read(timeout=min(remaining, 1.0)))

    def close(self) -> None:
        self._socket.close()

    def _read(self, *, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise QmpTimeout(f"QEMU sent nothing on QMP within {timeout:.0f} s")
            self._socket.settimeout(remaining)
            try:
                chunk = self._socket.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                raise QmpError("QEMU closed the QMP socket")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message
