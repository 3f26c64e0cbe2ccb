"""A minimal Kubernetes API server on 127.0.0.1 for the teardown handler's tests.

Serves list and delete of cluster-scoped custom objects (NodePools, NodeClaims, EC2NodeClasses)
over plain HTTP, or over HTTPS under a CA of its own as an EKS cluster does. Refuses requests
without an EKS-style bearer token, and (406, like the API server) requests that accept no JSON.
Accepts the PUT of a CloudFormation response, so a test can read what the handler answered and
with which Content-Type. `on_delete` lets a test play the Karpenter controller: it runs after an
object is deleted. `failing` answers chosen requests with an error status instead (429 as the
API server's priority and fairness throttles, 5xx), as long as the entry stays.

What it does not model: watches, RBAC beyond the token's shape, admission, finalizers and the
garbage collector (a deleted object is gone at once, unless `on_delete` plays Karpenter's
finalizer). The teardown handler's tests keep it rather than the cluster box's real API server
(testing_support/cluster_box) because they answer chosen requests with throttling or server
errors and read the CloudFormation response the handler PUTs, which a real API server cannot be
made to do, and because they run in the unit tier, where no Go build is at hand.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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
    certificate_authority: str = ""
    #: (method, path) -> HTTP status to answer instead.
    failing: dict[tuple[str, str], int] = field(default_factory=dict)

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

        def _admitted(self) -> bool:
            status = state.failing.get((self.command, self.path))
            if status:
                self._answer(status, {"kind": "Status", "code": status})
                return False
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if not is_eks_token(token):
                self._answer(401, {"kind": "Status", "code": 401})
                return False
            accepted = {t.split(";")[0].strip() for t in self.headers.get("Accept", "").split(",")}
            if accepted != {""} and not accepted & {"application/json", "*/*"}:
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
            if not self._admitted():
                return
            if self.path in state.missing_collections:
                self._answer(404, {"kind": "Status", "code": 404})
                return
            items = list(state.objects.get(self.path, {}).values())
            self._answer(200, {"kind": "List", "items": items})

        def do_DELETE(self) -> None:
            if not self._admitted():
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


def self_signed_authority(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A CA like an EKS cluster's own: self-signed, trusted by nobody else."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def pem_base64(certificate: x509.Certificate) -> str:
    """A CA certificate the way DescribeCluster returns it: base64 of the PEM."""
    return base64.b64encode(certificate.public_bytes(serialization.Encoding.PEM)).decode()


def _server_context(directory: Path) -> tuple[ssl.SSLContext, str]:
    """A TLS context serving 127.0.0.1 under a fresh CA; the CA as base64 PEM."""
    authority, authority_key = self_signed_authority("kubernetes")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(authority.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(authority_key, hashes.SHA256())
    )
    chain = directory / "server.pem"
    chain.write_bytes(
        certificate.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    return context, pem_base64(authority)


@contextmanager
def running_fake_kubernetes(*, tls: bool = False) -> Iterator[FakeKubernetes]:
    """The fake on a free port; with `tls` over HTTPS under its own CA (certificate_authority)."""
    state = FakeKubernetes()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    port = server.server_address[1]
    with tempfile.TemporaryDirectory() as directory:
        if tls:
            context, state.certificate_authority = _server_context(Path(directory))
            server.socket = context.wrap_socket(server.socket, server_side=True)
        state.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        # shutdown() waits for the loop's next poll: the default 0.5 s per test adds up.
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        try:
            yield state
        finally:
            server.shutdown()
            server.server_close()
