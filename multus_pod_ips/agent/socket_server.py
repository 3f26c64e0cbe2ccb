"""The unix socket the CNI plugin asks: one JSON request line, one JSON answer line."""

from __future__ import annotations

import json
import socketserver
from typing import Any

from ..cni_plugin import INVALID_CONFIG
from .config import AgentError
from .node_agent import Agent


class _RequestHandler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline()
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not a JSON object")
            self.server.agent.handle(request)
            reply: dict[str, Any] = {"ok": True}
        except AgentError as error:
            reply = {"ok": False, "code": error.code, "msg": error.message}
        except (KeyError, ValueError, TypeError) as error:
            reply = {"ok": False, "code": INVALID_CONFIG, "msg": f"bad request: {error}"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of pods connects at once; the default backlog is 5

    def __init__(self, path: str, agent: Agent) -> None:
        self.agent = agent
        super().__init__(path, _RequestHandler)
