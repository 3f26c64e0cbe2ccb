"""The start-up wait: a server that binds late, or answers its first requests slowly or with an
error, is still waited for; one that never answers fails at the deadline naming the URL; a
process that exits ends the wait at once."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from testing_support import startup
from testing_support.startup import wait_until_answering


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Handler(BaseHTTPRequestHandler):
    """The first `slow` answers take longer than one attempt; the next `failing` are 503."""

    slow = 0
    failing = 0

    def do_GET(self) -> None:
        if Handler.slow:
            Handler.slow -= 1
            time.sleep(startup.ATTEMPT_SECONDS * 1.5)
        if Handler.failing:
            Handler.failing -= 1
            self.send_error(503)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_server_that_binds_late_and_answers_slowly_and_503_first_is_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(startup, "ATTEMPT_SECONDS", 0.5)
    Handler.slow, Handler.failing = 1, 2
    port = free_port()
    thread_server: list[ThreadingHTTPServer] = []

    def late() -> None:
        time.sleep(0.7)
        thread_server.append(ThreadingHTTPServer(("127.0.0.1", port), Handler))
        thread_server[0].serve_forever()

    threading.Thread(target=late, daemon=True).start()
    try:
        wait_until_answering(
            f"http://127.0.0.1:{port}/", timeout_seconds=10, exit_reason=lambda: None
        )
        assert (Handler.slow, Handler.failing) == (0, 0)
    finally:
        thread_server[0].shutdown()


def test_nothing_answering_fails_at_the_deadline_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/ready"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=f"{url} did not answer within 1 s"):
        wait_until_answering(url, timeout_seconds=1, exit_reason=lambda: None)
    assert time.monotonic() - started < 3


def test_an_exited_process_ends_the_wait_at_once() -> None:
    with pytest.raises(RuntimeError, match="exited with 1"):
        wait_until_answering(
            f"http://127.0.0.1:{free_port()}/",
            timeout_seconds=60,
            exit_reason=lambda: "moto_server exited with 1",
        )
