"""A minimal Kubernetes API server on 127.0.0.1 for the teardown handler's tests.

Serves list and delete of cluster-scoped custom objects (NodePools, NodeClaims, EC2NodeClasses)
over plain HTTP, refuses requests without an EKS-style bearer token and (406, like the API server)
requests that accept no JSON, and accepts the PUT of a CloudFormation response (so a test can read
what the handler answered, and with which Content-Type). `on_delete` lets a test
play the Karpenter controller: it runs after an object is deleted.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RESPONSE_PATH = "/cloudformation-response"
TOKEN_PREFIX = "k8s-aws-v1."


@dataclass
class FakeKubernetes:
    """Objects by collection path (e.g. /apis/karpenter.sh/v1/nodepools) and name."""

    url: str = ""
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    on_delete: Callable[[str, str], None] = lambda collection, name: None
    deleted: list[tuple[str, str]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)
    response_content_types: list[str | None] = field(default_factory=list)
    missing_collections: set[str] = field(default_factory=set)

    def add(self, collection: str, name: str, **metadata: Any) -> None:
        self.objects.setdefault(collection, {})[name] = {"metadata": {"name": name, **metadata}}

    def names(self, collection: str) -> list[str]:
        return sorted(self.objects.get(collection, {}))


def is_eks_token(token: str) -> bool:
    """An EKS bearer token: a presigned STS GetCallerIdentity URL that signs x-k8s-aws-id."""
    if not token.startswith(TOKEN_PREFIX):
        return False
    encoded = token.removeprefix(TOKEN_PREFIX)
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    signed_headers = query.get("X-Amz-SignedHeaders", [""])[0].split(";")
    return query.get("Action") == ["GetCallerIdentity"] and "x-k8s-aws-id" in signed_headers


def _handler(state: FakeKubernetes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _authorized(self) -> bool:
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if not is_eks_token(token):
                self._answer(401, {"kind": "Status", "code": 401})
                return False
            accept = self.headers.get("Accept")
            if accept and not any(t in accept for t in ("application/json", "*/*")):
                self._answer(406, {"kind": "Status", "code": 406})
                return False
            return True

        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            if self.path == RESPONSE_PATH:
                state.responses.append(json.loads(self.rfile.read(length)))
                state.response_content_types.append(self.headers.get("Content-Type"))
                self._answer(200, {})
            else:
                self._answer(404, {})

        def do_GET(self) -> None:
            if not self._authorized():
                return
            if self.path in state.missing_collections:
                self._answer(404, {"kind": "Status", "code": 404})
                return
            items = list(state.objects.get(self.path, {}).values())
            self._answer(200, {"kind": "List", "items": items})

        def do_DELETE(self) -> None:
            if not self._authorized():
                return
            collection, _, name = self.path.rpartition("/")
            if name not in state.objects.get(collection, {}):
                self._answer(404, {"kind": "Status", "code": 404})
                return
            del state.objects[collection][name]
            state.deleted.append((collection, name))
            state.on_delete(collection, name)
            self._answer(200, {"kind": "Status", "status": "Success"})

    return Handler


@contextmanager
def running_fake_kubernetes() -> Iterator[FakeKubernetes]:
    state = FakeKubernetes()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
