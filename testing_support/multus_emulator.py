"""EC2 + IMDS emulator for running the Multus ENI bootstrap script on 127.0.0.1.

moto_server plays EC2. In front of it an HTTP proxy checks what EC2 checks and moto does not
(each request's SigV4 signature, against the instance profile credentials the fake IMDS hands
out, and its parameter names, against botocore's EC2 model), records every EC2 request the
script makes (moto accepts but does not store DeleteOnTermination, so tests assert on
requests) and can add latency or answer with injected errors. The fake IMDS serves the paths
the script and the pod IP agent read, deriving network/interfaces/macs/ (local-ipv4s, ipv6s,
ipv4-prefix, ...) from moto's view of the instance's attachments, with a configurable lag behind
EC2 for the addresses the agent changes (FakeImds.lag_seconds). IPv4 prefixes on
CreateNetworkInterface, which moto ignores, are modelled beside it
(testing_support/ipv4_prefixes.py): the proxy assigns them, adds them to the answer, serves them
at IMDS's ipv4-prefix path and releases them when the ENI is deleted. So is what EC2 does
to an instance's ENIs when it terminates, which moto leaves attached (Ec2Emulator.terminated):
the primary ENI and those attached with DeleteOnTermination are deleted, the others detached.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import email
import gzip
import ipaddress
import itertools
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from email.message import Message
from functools import cache, partial
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import boto3
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.model import OperationModel, ServiceModel, Shape

from config import AppConfig
from config.network_plan import NetworkPlan, network_plan
from config.node_bootstrap_plan import (
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
    node_bootstrap_props,
)
from config.node_profile import NodeProfile
from node_bootstrap import render_user_data
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    INSTANCE_TAG_KEY,
    PACKED_SCRIPT_COMMENT,
    PACKED_SCRIPT_END,
)
from testing_support import network_cards
from testing_support.ec2_iam_requests import Ec2State, EniPlacement
from testing_support.ipv4_prefixes import Ipv4PrefixDelegation, PrefixRequestError
from testing_support.startup import wait_until_answering

REGION = "us-west-2"
AVAILABILITY_ZONES = ("us-west-2a", "us-west-2b")
# moto_server imports all of moto before it listens: seconds on an idle machine, more under load.
MOTO_START_SECONDS = 60.0
# serve_forever polls for shutdown this often; shutdown() waits for the next poll (the default
# 0.5 s adds up over a test module of emulator starts).
SHUTDOWN_POLL_SECONDS = 0.05
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
#: What the fake IMDS serves as the node role's credentials; '/', '+' and '=' as in real ones.
NODE_ROLE = "multus-test-node-role"
NODE_CREDENTIALS = Credentials(
    access_key="ASIAMULTUSNODETEST01",
    secret_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYMULTUSKEY0",
    token="IQoJb3JpZ2luX2VjEMULTUS+session/token==",
)
_VENV_BIN = Path(sys.executable).parent
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/[^,]+, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def free_port() -> int:
    """A TCP port nothing listens on at the moment, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


DROP_CONNECTION = 0
#: EC2 actions that change nothing.
READ_ACTION_PREFIXES = ("Describe", "Get")
#: The address actions and the query parameter prefix of their addresses (IPv4, IPv6).
_ADDRESS_ACTIONS = {
    "AssignPrivateIpAddresses": "PrivateIpAddress.",
    "UnassignPrivateIpAddresses": "PrivateIpAddress.",
    "AssignIpv6Addresses": "Ipv6Addresses.",
    "UnassignIpv6Addresses": "Ipv6Addresses.",
}


@dataclass(frozen=True)
class Fault:
    """Answers matching EC2 requests with an error, `times` times."""

    code: str  # EC2 error code; ignored with DROP_CONNECTION
    status: int = 503  # HTTP status, or DROP_CONNECTION: close the connection without answer
    action: str | None = None  # None matches every action
    with_param: str | None = None  # only requests carrying this query parameter
    times: int = 1
    # True: EC2 (moto) carries the request out and only its answer is replaced, as when an
    # answer is lost on the way back.
    after_forward: bool = False


@dataclass(frozen=True)
class RecordedCall:
    """One EC2 request the proxy forwarded, with its status and arrival time."""

    action: str
    params: dict[str, str]
    status: int
    received_at: float  # time.time() when the proxy got the request
    observed: Any = None  # what Ec2Proxy.state_probe saw before EC2 acted on the request


def signature_error(url: str, headers: Message, body: bytes, signer: Credentials) -> str:
    """Why EC2 would refuse this request's SigV4 signature ("" if it would not).

    Recomputes the signature with botocore's signer, over the headers the request says it
    signed, and compares. The session token must be sent as well.
    """
    match = _AUTHORIZATION.fullmatch(headers.get("Authorization", ""))
    if not match:
        return "no SigV4 Authorization header"
    if match["key"] != signer.access_key:
        return f"unknown access key {match['key']}"
    if headers.get("X-Amz-Security-Token") != signer.token:
        return "missing or wrong X-Amz-Security-Token"
    signed = match["signed"].split(";")
    request = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={key: value for key, value in headers.items() if key.lower() in signed},
    )
    request.context["timestamp"] = headers.get("X-Amz-Date", "")
    auth = SigV4Auth(signer, "ec2", REGION)
    string_to_sign = auth.string_to_sign(request, auth.canonical_request(request))
    expected = auth.signature(string_to_sign, request)
    return "" if expected == match["signature"] else "signature does not match"


def unknown_parameters(action: str, params: dict[str, str]) -> list[str]:
    """The request parameters EC2 would refuse as UnknownParameter for this action."""
    known = _parameter_pattern(action)
    return [
        name for name in params if name not in ("Action", "Version") and not known.fullmatch(name)
    ]


def ec2_request_error(params: dict[str, str]) -> str:
    """Why EC2 would refuse this request before acting on it ("" if it would not): an action
    or API version EC2 does not have (InvalidAction), a parameter the action does not take
    (UnknownParameter) or a required one missing (MissingParameter), by botocore's EC2 model."""
    action, model = params.get("Action", ""), _ec2_model()
    if action not in model.operation_names or params.get("Version") != model.api_version:
        return f"InvalidAction {action} (version {params.get('Version')})"
    unknown = unknown_parameters(action, params)
    if unknown:
        return f"UnknownParameter {unknown[0]}"
    shape = model.operation_model(action).input_shape
    required = [_query_key(name, shape.members[name]) for name in shape.required_members]
    missing = [
        name
        for name in required
        if not any(key == name or key.startswith(f"{name}.") for key in params)
    ]
    return f"MissingParameter {missing[0]}" if missing else ""


@cache
def _ec2_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("ec2")


@cache
def _parameter_pattern(action: str) -> re.Pattern[str]:
    model = _ec2_model()
    return re.compile("|".join(_query_names(model.operation_model(action).input_shape, "")))


def _query_key(name: str, member: Shape) -> str:
    """The EC2 query parameter name of a structure member (as botocore serializes it)."""
    location = member.serialization.get("name", "")
    return str(member.serialization.get("queryName") or location[:1].upper() + location[1:] or name)


def _query_names(shape: Shape, prefix: str) -> Iterator[str]:
    """Regexes of the EC2 query parameter names a shape serializes to (as botocore does)."""
    if shape.type_name == "structure":
        for name, member in shape.members.items():
            key = re.escape(_query_key(name, member))
            yield from _query_names(member, rf"{prefix}\.{key}" if prefix else key)
    elif shape.type_name == "list":
        yield from _query_names(shape.member, rf"{prefix}\.\d+")
    else:
        yield prefix


class Ec2Proxy:
    """Checking, recording, latency-adding, fault-injecting proxy in front of moto_server."""

    def __init__(
        self, upstream: tuple[str, int], prefixes: Ipv4PrefixDelegation, host: str = "127.0.0.1"
    ) -> None:
        self.latency_seconds = 0.0
        self.prefixes = prefixes
        #: The credentials requests must be signed with (a test may swap them), and others
        #: accepted beside them (callers of several roles at once, such as the Karpenter box's).
        self.signer = NODE_CREDENTIALS
        self.also_accepted: list[Credentials] = []
        #: Called with (action, params) before a request reaches moto; its result is recorded.
        self.state_probe: Callable[[str, dict[str, str]], Any] | None = None
        #: Consulted before forwarding a well-formed request: an (HTTP status, EC2 error code,
        #: message) answer instead of moto's, or None to forward (see EniAddressModel).
        self.model: Callable[[str, dict[str, str]], tuple[int, str, str] | None] | None = None
        #: Attachment IDs a request set to DeleteOnTermination (moto does not keep it).
        self.delete_on_termination: set[str] = set()
        #: Called with the instance IDs of a TerminateInstances that EC2 carried out.
        self.on_terminated: Callable[[list[str]], None] | None = None
        #: Called with (action, ENI ID, addresses) of an Assign/UnassignPrivateIpAddresses
        #: or Assign/UnassignIpv6Addresses that EC2 carried out (FakeImds.addresses_changed:
        #: IMDS shows it after its lag).
        self.on_addresses_changed: Callable[[str, str, list[str]], None] | None = None
        #: Called with the ENI ID of an AttachNetworkInterface that EC2 carried out.
        self.on_attached: Callable[[str], None] | None = None
        #: Called after each request that may have changed EC2's state (FakeImds.ec2_changed).
        self.on_change: Callable[[], None] | None = None
        #: Called with (action, params, answer) of each request EC2 carried out (status 200),
        #: before the answer is sent: a model of what EC2 does beyond moto.
        self.on_answered: Callable[[str, dict[str, str], bytes], None] | None = None
        self._upstream = upstream  # moto_server's (host, port)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._remaining: list[int] = []  # how often each fault still fires
        self._calls: list[RecordedCall] = []
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self.url = f"http://{host}:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), daemon=True
        ).start()

    @property
    def upstream_url(self) -> str:
        """moto_server's URL (for the services the proxy does not front)."""
        return f"http://{self._upstream[0]}:{self._upstream[1]}"

    def reset(self, faults: Sequence[Fault] = ()) -> None:
        with self._lock:
            self._calls = []
            self._faults = list(faults)
            self._remaining = [fault.times for fault in faults]

    @property
    def calls(self) -> list[RecordedCall]:
        with self._lock:
            return list(self._calls)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _injected_fault(self, action: str, params: dict[str, str]) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._faults):
                if (
                    self._remaining[index] > 0
                    and fault.action in (None, action)
                    and (fault.with_param is None or fault.with_param in params)
                ):
                    self._remaining[index] -= 1
                    return fault
        return None

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, message_format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                params = dict(parse_qsl(body.decode()))
                action = params.get("Action", "")
                received_at = time.time()
                time.sleep(proxy.latency_seconds)
                url = f"http://{self.headers.get('Host', '')}{self.path}"
                refused = signature_error(url, self.headers, body, proxy.signer)
                if refused and any(
                    not signature_error(url, self.headers, body, other)
                    for other in proxy.also_accepted
                ):
                    refused = ""
                unknown = unknown_parameters(action, params)
                fault = None if refused or unknown else proxy._injected_fault(action, params)
                observed = proxy.state_probe(action, params) if proxy.state_probe else None
                if refused:
                    status, payload = 403, ec2_error_xml("AuthFailure", refused).encode()
                elif unknown:
                    message = f"The parameter {unknown[0]} is not recognized"
                    status, payload = 400, ec2_error_xml("UnknownParameter", message).encode()
                elif fault:
                    if fault.after_forward:
                        self._act(action, params, body)
                    status, payload = fault.status, ec2_error_xml(fault.code).encode()
                elif proxy.model and (refusal := proxy.model(action, params)):
                    status, payload = refusal[0], ec2_error_xml(refusal[1], refusal[2]).encode()
                else:
                    status, payload = self._act(action, params, body)
                if status == 200 and proxy.on_answered:
                    proxy.on_answered(action, params, payload)
                proxy._record(RecordedCall(action, params, status, received_at, observed))
                if proxy.on_change and not action.startswith(READ_ACTION_PREFIXES):
                    proxy.on_change()
                if status == DROP_CONNECTION:
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                # A client may give up (a controller stopped with its request open).
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

            def _act(self, action: str, params: dict[str, str], body: bytes) -> tuple[int, bytes]:
                """What EC2 does with the request (moto, plus the prefix model)."""
                if action == "CreateNetworkInterface":
                    return self._create_network_interface(params)
                if action == "AttachNetworkInterface":
                    forwarded, card = network_cards.moto_attach_params(params)
                    status, payload = self._forward(urlencode(forwarded).encode())
                    if status == 200 and proxy.on_attached:
                        proxy.on_attached(params.get("NetworkInterfaceId", ""))
                    return status, network_cards.attach_answer(payload, card)
                status, payload = self._forward(body)
                if status != 200:
                    return status, payload
                if action == "DeleteNetworkInterface":
                    proxy.prefixes.release(params.get("NetworkInterfaceId", ""))
                if params.get("Attachment.DeleteOnTermination") == "true":
                    proxy.delete_on_termination.add(params.get("Attachment.AttachmentId", ""))
                if action in _ADDRESS_ACTIONS and proxy.on_addresses_changed:
                    prefix = _ADDRESS_ACTIONS[action]
                    addresses = [v for k, v in params.items() if k.startswith(prefix)]
                    proxy.on_addresses_changed(
                        action, params.get("NetworkInterfaceId", ""), addresses
                    )
                if action == "TerminateInstances" and proxy.on_terminated:
                    proxy.on_terminated(
                        [value for name, value in params.items() if name.startswith("InstanceId.")]
                    )
                return status, payload

            def _create_network_interface(self, params: dict[str, str]) -> tuple[int, bytes]:
                """Forwards without the prefix parameters and with the primary address EC2
                would pick (never inside a reservation), then adds the prefixes to the answer."""
                request, count, explicit = proxy.prefixes.split_request(params)
                with proxy.prefixes.locked:
                    try:
                        planned = proxy.prefixes.plan(request.get("SubnetId", ""), count, explicit)
                    except PrefixRequestError as error:
                        return 400, ec2_error_xml(error.code, error.message).encode()
                    request["PrivateIpAddress"] = planned.private_ip
                    status, payload = self._forward(urlencode(request).encode())
                    created = re.search(
                        rb"<networkInterfaceId>([^<]+)</networkInterfaceId>", payload
                    )
                    if status != 200 or not created:
                        return status, payload
                    proxy.prefixes.record(created[1].decode(), planned.prefixes)
                prefix_set = "".join(
                    f"<item><ipv4Prefix>{prefix}</ipv4Prefix></item>" for prefix in planned.prefixes
                )
                return status, payload.replace(
                    b"</networkInterface>",
                    f"<ipv4PrefixSet>{prefix_set}</ipv4PrefixSet></networkInterface>".encode(),
                    1,
                )

            def _forward(self, body: bytes) -> tuple[int, bytes]:
                upstream = HTTPConnection(*proxy._upstream, timeout=30)
                try:
                    # The body may have been rewritten; http.client sets its length.
                    headers = {
                        key: value
                        for key, value in self.headers.items()
                        if key.lower() not in ("host", "content-length")
                    }
                    upstream.request("POST", self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    return response.status, response.read()
                finally:
                    upstream.close()

        return Handler


def _tags(tag_list: list[dict[str, str]]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in tag_list}


def ec2_error_xml(code: str, message: str = "") -> str:
    """EC2's error answer ("Error codes for the Amazon EC2 API": example error response)."""
    message = message or f"injected {code}"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
        "</Error></Errors><RequestID>injected</RequestID></Response>"
    )


def credentials_document(credentials: Credentials, expiration: str = "2099-01-01T00:00:00Z") -> str:
    """IMDS's answer for iam/security-credentials/<role> (Expiration: ISO 8601, UTC)."""
    return json.dumps(
        {
            "Code": "Success",
            "LastUpdated": "2026-11-29T00:00:00Z",
            "Type": "AWS-HMAC",
            "AccessKeyId": credentials.access_key,
            "SecretAccessKey": credentials.secret_key,
            "Token": credentials.token,
            "Expiration": expiration,
        },
        indent=2,
    )


#: IMDSv2: a session token lives from 1 s to 6 hours (EC2 User Guide, "Use IMDSv2").
IMDS_MAX_TOKEN_TTL = 21600


class ImdsTokens:
    """The IMDSv2 session tokens a fake IMDS handed out, with the TTL each request asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.issued: list[tuple[str, str]] = []  # (token, requested TTL)

    def issue(self, ttl: str) -> str | None:
        """A new token, or None for a TTL IMDS refuses (400)."""
        if not (ttl.isdigit() and 1 <= int(ttl) <= IMDS_MAX_TOKEN_TTL):
            return None
        with self._lock:
            token = f"imds-token-{len(self.issued)}"
            self.issued.append((token, ttl))
        return token

    def valid(self, token: str | None) -> bool:
        with self._lock:
            return any(token == issued for issued, _ in self.issued)

    def clear(self) -> None:
        with self._lock:
            self.issued.clear()


class ImdsV2Handler(BaseHTTPRequestHandler, abc.ABC):
    """IMDSv2 over HTTP, shared by the fakes: PUT .../latest/api/token with
    X-aws-ec2-metadata-token-ttl-seconds returns a session token; a GET carrying one in
    X-aws-ec2-metadata-token is answered with `metadata(path)` (404 when None), any other with
    401. Subclasses name the tokens and the metadata."""

    tokens: ImdsTokens

    @abc.abstractmethod
    def metadata(self, path: str) -> str | None:
        """The answer to a GET of `path`, or None (404)."""

    def log_message(self, message_format: str, *args: Any) -> None:
        pass

    def do_PUT(self) -> None:
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        token = self.tokens.issue(ttl) if self.path.endswith("/latest/api/token") else None
        self.reply(400, "") if token is None else self.reply(200, token)

    def do_GET(self) -> None:
        if not self.tokens.valid(self.headers.get("X-aws-ec2-metadata-token")):
            self.reply(401, "")
            return
        value = self.metadata(self.path)
        self.reply(404, "") if value is None else self.reply(200, value)

    def reply(self, status: int, text: str) -> None:
        payload = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@dataclass(frozen=True)
class _AddressChange:
    at: float  # time.monotonic()
    eni_id: str
    addresses: frozenset[str]
    assigned: bool  # False: unassigned


class FakeImds:
    """IMDSv2 for any moto instance: the base URL for instance i-x is <url>/i-x."""

    def __init__(self, ec2: Any, prefixes: Ipv4PrefixDelegation, host: str = "127.0.0.1") -> None:
        self._ec2 = ec2
        #: How many more credential requests get a 404, as early in an instance's boot.
        self.credentials_missing_for = 0
        #: (ENI ID, the private IPv4 addresses EC2's API shows on it, primary first) -> what
        #: local-ipv4s lists; unset: the same (EniAddressModel.imds_addresses delays moves).
        self.local_ipv4s: Callable[[str, list[str]], list[str]] | None = None
        #: How long local-ipv4s lags EC2: an Assign/UnassignPrivateIpAddresses shows there this
        #: long after EC2 carried it out (EC2 API reference, AssignPrivateIpAddresses: check
        #: local-ipv4s to confirm that a remapping is complete).
        self.lag_seconds = 0.0
        #: How often each (instance ID, metadata path) was read.
        self.reads: Counter[tuple[str, str]] = Counter()
        self.tokens = ImdsTokens()
        self._lock = threading.Lock()
        self._address_changes: list[_AddressChange] = []
        self._prefixes = prefixes
        #: EC2 changes so far (`ec2_changed`), and each instance's ENIs by MAC as moto listed
        #: them at a count: moto is asked again only after a change. (It was asked at every
        #: read; in the data-plane tier's VM the pod IP agents' reads then took a fifth of the
        #: emulated CPU.)
        self._ec2_changes = 0
        self._enis: dict[str, tuple[int, dict[str, dict[str, Any]]]] = {}
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self.url = f"http://{host}:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, args=(SHUTDOWN_POLL_SECONDS,), daemon=True
        ).start()

    def base_url(self, instance_id: str) -> str:
        return f"{self.url}/{instance_id}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def ec2_changed(self) -> None:
        """Told of each EC2 request that may have changed its state, once EC2 carried it out
        (by the proxy, and by the emulator's own client: running_emulator)."""
        with self._lock:
            self._ec2_changes += 1

    def _enis_by_mac(self, instance_id: str) -> dict[str, dict[str, Any]]:
        """The instance's attached ENIs by MAC, as moto shows them since the last change."""
        with self._lock:
            changes = self._ec2_changes
            cached = self._enis.get(instance_id)
        if cached is not None and cached[0] == changes:
            return cached[1]
        enis = {
            eni["MacAddress"]: eni
            for eni in self._ec2.describe_network_interfaces(
                Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
            )["NetworkInterfaces"]
        }
        with self._lock:  # under the count read before asking: a change meanwhile voids it
            self._enis[instance_id] = (changes, enis)
        return enis

    def _credentials_missing(self) -> bool:
        with self._lock:
            if self.credentials_missing_for > 0:
                self.credentials_missing_for -= 1
                return True
            return False

    def addresses_changed(self, action: str, eni_id: str, addresses: list[str]) -> None:
        """An Ec2Proxy.on_addresses_changed: remembers the change for lag_seconds."""
        change = _AddressChange(
            time.monotonic(), eni_id, frozenset(addresses), action.startswith("Assign")
        )
        with self._lock:
            self._address_changes.append(change)

    def _lagging(self, eni_id: str, addresses: list[str]) -> list[str]:
        """EC2's addresses of the ENI as IMDS still shows them: the changes of the last
        lag_seconds undone, newest first."""
        now = time.monotonic()
        with self._lock:
            recent = [c for c in self._address_changes if now - c.at < self.lag_seconds]
            self._address_changes = recent
        shown = list(addresses)
        for change in reversed(recent):
            if change.eni_id != eni_id:
                continue
            if change.assigned:
                shown = [ip for ip in shown if ip not in change.addresses]
            else:
                shown += sorted(change.addresses - set(shown))
        return shown

    def metadata(self, instance_id: str, path: str) -> str | None:
        with self._lock:
            self.reads[instance_id, path] += 1
        if path.startswith("iam/security-credentials/") and self._credentials_missing():
            return None
        if path == "instance-id":
            return instance_id
        if path == "placement/region":
            return REGION
        if path == "iam/security-credentials/":
            return NODE_ROLE
        if path == f"iam/security-credentials/{NODE_ROLE}":
            return credentials_document(NODE_CREDENTIALS)
        if path in ("placement/availability-zone", "instance-type"):
            if path == "instance-type":
                return self._instance_type(instance_id)
            reservations = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
            return str(reservations[0]["Instances"][0]["Placement"]["AvailabilityZone"])
        enis = self._enis_by_mac(instance_id)
        prefix = "network/interfaces/macs/"
        if path == prefix:
            return "".join(f"{mac}/\n" for mac in enis)
        mac, _, leaf = path.removeprefix(prefix).partition("/")
        if not path.startswith(prefix) or mac not in enis:
            return None
        eni_id = enis[mac]["NetworkInterfaceId"]
        prefixes = self._prefixes.of(eni_id)
        moto_device_index = enis[mac]["Attachment"]["DeviceIndex"]
        if leaf == "network-card":
            return network_cards.network_card(moto_device_index, self._instance_type(instance_id))
        values = {
            "device-number": network_cards.device_number(moto_device_index),
            "subnet-id": enis[mac]["SubnetId"],
            "interface-id": eni_id,
            "ipv4-prefix": "\n".join(prefixes) if prefixes else None,
            "local-ipv4s": "\n".join(self._local_ipv4s(enis[mac])),
            # IMDS omits the key of an ENI without IPv6 addresses (404).
            "ipv6s": "\n".join(self._ipv6s(enis[mac])) or None,
        }
        return values.get(leaf)

    def _instance_type(self, instance_id: str) -> str:
        reservations = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return str(reservations[0]["Instances"][0]["InstanceType"])

    def _local_ipv4s(self, eni: dict[str, Any]) -> list[str]:
        held = sorted(eni["PrivateIpAddresses"], key=lambda item: not item["Primary"])
        addresses = self._lagging(
            eni["NetworkInterfaceId"], [item["PrivateIpAddress"] for item in held]
        )
        view = self.local_ipv4s
        return view(eni["NetworkInterfaceId"], addresses) if view else addresses

    def _ipv6s(self, eni: dict[str, Any]) -> list[str]:
        """network/interfaces/macs/<mac>/ipv6s, lagging EC2 as local-ipv4s does."""
        addresses = [item["Ipv6Address"] for item in eni.get("Ipv6Addresses", [])]
        return self._lagging(eni["NetworkInterfaceId"], addresses)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        imds = self

        class Handler(ImdsV2Handler):
            tokens = imds.tokens

            def metadata(self, path: str) -> str | None:
                instance_id, _, rest = path.lstrip("/").partition("/")
                return imds.metadata(instance_id, rest.removeprefix("latest/meta-data/"))

        return Handler


@dataclass(frozen=True)
class EmulatedVpc:
    """The template's layout: private node subnets plus one subnet per (network, AZ)."""

    vpc_id: str
    private_subnets: dict[str, str]
    multus_subnets: dict[tuple[str, str], str]
    security_group_ids: dict[str, str]  # network -> its own group, as the network stack makes
    networks: tuple[str, ...]
    #: (network, AZ) -> the subnet's IPv6 /64, for the dual-stack networks' subnets only.
    ipv6_subnet_cidrs: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def bootstrap_props(
        self, cluster_name: str, azs: Sequence[str] = AVAILABILITY_ZONES
    ) -> NodeBootstrapProps:
        return NodeBootstrapProps(
            cluster_name=cluster_name,
            interfaces=[
                MultusInterface(
                    network=network,
                    interface_name=network,
                    device_index=index,
                    security_group_ids=[self.security_group_ids[network]],
                    ipv6=any(key[0] == network for key in self.ipv6_subnet_cidrs),
                )
                for index, network in enumerate(self.networks, start=1)
            ],
            placements={
                az: AzPlacement(
                    subnet_ids=[self.multus_subnets[network, az] for network in self.networks]
                )
                for az in azs
            },
        )


@dataclass(frozen=True)
class PlannedVpc:
    """A config's network plan in the emulator: a subnet per row, a group per group name."""

    vpc: EmulatedVpc
    security_groups: dict[str, str]

    def user_data(
        self, cluster_name: str, plan: NetworkPlan, node_profile: NodeProfile | None = None
    ) -> str:
        """The user-data of a pool whose view of the plan is `plan` (and whose node profile is
        `node_profile`), with this VPC's IDs."""
        return render_user_data(
            node_bootstrap_props(
                cluster_name,
                plan,
                subnet_id=lambda row: self.vpc.multus_subnets[row.network, row.availability_zone],
                security_group_id=lambda row: self.security_groups[row.security_group],
                node_profile=node_profile,
            )
        )


def expanded_script(user_data: str) -> str:
    """The shell part as the node runs it: the data block, then the packed code unpacked."""
    script = shell_part(user_data)
    header, _, packed_part = script.partition(PACKED_SCRIPT_COMMENT + "\n")
    packed = packed_part.split(f"<<'{PACKED_SCRIPT_END}' | gunzip\n", 1)[1]
    packed = packed.split(f"\n{PACKED_SCRIPT_END}\n", 1)[0]
    return header + gzip.decompress(base64.b64decode(packed)).decode()


def shell_part(user_data: str) -> str:
    """The text/x-shellscript part of a MIME multipart user-data document."""
    message = email.message_from_string(user_data)
    scripts = [
        part.get_payload()
        for part in message.walk()
        if part.get_content_type() == "text/x-shellscript"
    ]
    if len(scripts) != 1:
        raise ValueError(f"expected one text/x-shellscript part, found {len(scripts)}")
    return str(scripts[0])


@dataclass
class BootstrapRun:
    """The outcome of one bootstrap script run against the emulator."""

    returncode: int
    output: str
    ec2_calls: list[RecordedCall]
    ec2_client_processes: int  # curl processes that called EC2, retries included
    aws_cli_processes: int
    process_arguments: str  # every curl and aws command line the run started, one per line
    seconds: float
    root: Path

    def actions(self, name: str) -> list[RecordedCall]:
        return [call for call in self.ec2_calls if call.action == name]

    @property
    def host_commands(self) -> list[str]:
        """What dry-host mode logged instead of running (udevadm, sysctl, ip, poweroff)."""
        path = self.root / "var/lib/multus-eni/host-commands"
        return path.read_text().splitlines() if path.exists() else []

    @property
    def shutdown_requested(self) -> bool:
        return "systemctl --no-block poweroff" in self.host_commands


@dataclass
class Ec2Emulator:
    """moto_server + recording proxy + fake IMDS, all on 127.0.0.1."""

    ec2: Any
    proxy: Ec2Proxy
    imds: FakeImds
    work_dir: Path

    def moto_client(self, service: str) -> Any:
        """A boto3 client of another service of moto_server (IAM, SQS, EKS...)."""
        return boto3.client(
            service, endpoint_url=self.proxy.upstream_url, region_name=REGION, **DUMMY_CREDENTIALS
        )

    def create_multus_vpc(
        self, network_count: int = 2, dual_stack: Sequence[str] = ()
    ) -> EmulatedVpc:
        """VPC 10.0.0.0/16, private 10.0.2-3.0/24, Multus from 10.0.4.0/24 per (network, AZ).

        dual_stack: networks whose subnets also get an IPv6 /64: the VPC then has an
        Amazon-provided /56 (EC2 User Guide, "Add IPv6 support for your VPC") and the subnet
        of 10.0.N.0/24 gets its /64 number N."""
        ec2 = self.ec2
        created_vpc = ec2.create_vpc(
            CidrBlock="10.0.0.0/16", AmazonProvidedIpv6CidrBlock=bool(dual_stack)
        )["Vpc"]
        vpc_id = created_vpc["VpcId"]
        ipv6_subnet_cidrs: dict[tuple[str, str], str] = {}

        def subnet(third_octet: int, az: str, network: str = "") -> str:
            cidr = f"10.0.{third_octet}.0/24"
            created = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)
            subnet_id = str(created["Subnet"]["SubnetId"])
            if network in dual_stack:
                block = ipaddress.ip_network(
                    created_vpc["Ipv6CidrBlockAssociationSet"][0]["Ipv6CidrBlock"]
                )
                ipv6 = str(next(itertools.islice(block.subnets(new_prefix=64), third_octet, None)))
                ec2.associate_subnet_cidr_block(SubnetId=subnet_id, Ipv6CidrBlock=ipv6)
                ipv6_subnet_cidrs[network, az] = ipv6
            return subnet_id

        networks = tuple(f"multus{number}" for number in range(1, network_count + 1))
        private = {az: subnet(2 + index, az) for index, az in enumerate(AVAILABILITY_ZONES)}
        multus = {
            (network, az): subnet(4 + 2 * network_index + az_index, az, network)
            for network_index, network in enumerate(networks)
            for az_index, az in enumerate(AVAILABILITY_ZONES)
        }
        groups = {
            network: ec2.create_security_group(
                GroupName=f"{network}-{vpc_id}", Description="Multus ENIs", VpcId=vpc_id
            )["GroupId"]
            for network in networks
        }
        return EmulatedVpc(vpc_id, private, multus, groups, networks, ipv6_subnet_cidrs)

    def create_planned_vpc(
        self, vpc_cidr: str, node_subnet_cidrs: Mapping[str, str], plan: NetworkPlan
    ) -> PlannedVpc:
        """The VPC, the node subnet per AZ (AZ -> CIDR) and, per plan row, its Multus subnet;
        one security group per group name the rows give, as the network stack builds them."""
        ec2 = self.ec2
        vpc_id = ec2.create_vpc(CidrBlock=vpc_cidr)["Vpc"]["VpcId"]
        private = {
            az: ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)["Subnet"][
                "SubnetId"
            ]
            for az, cidr in node_subnet_cidrs.items()
        }
        return self.plan_in_vpc(vpc_id, private, plan)

    def create_config_vpc(self, config: AppConfig) -> PlannedVpc:
        """create_planned_vpc for a config: its VPC CIDR, node subnets and network plan."""
        return self.create_planned_vpc(
            config.vpc.cidr,
            dict(zip(config.availability_zones, config.vpc.node_subnet_cidrs, strict=True)),
            network_plan(config),
        )

    def create_users_vpc(
        self, vpc_cidr: str, node_subnet_cidrs: Mapping[str, str], tags: Mapping[str, str]
    ) -> tuple[str, dict[str, str]]:
        """A VPC as a network team hands it over: the VPC and a node subnet per AZ (AZ -> CIDR),
        each with the team's `tags`; returns the VPC ID and AZ -> node subnet ID."""
        tag_list = [{"Key": key, "Value": value} for key, value in tags.items()]

        def spec(resource: str) -> list[dict[str, Any]]:
            return [{"ResourceType": resource, "Tags": tag_list}]

        vpc_id = str(
            self.ec2.create_vpc(CidrBlock=vpc_cidr, TagSpecifications=spec("vpc"))["Vpc"]["VpcId"]
        )
        subnets = {
            az: str(
                self.ec2.create_subnet(
                    VpcId=vpc_id,
                    CidrBlock=cidr,
                    AvailabilityZone=az,
                    TagSpecifications=spec("subnet"),
                )["Subnet"]["SubnetId"]
            )
            for az, cidr in node_subnet_cidrs.items()
        }
        return vpc_id, subnets

    def plan_in_vpc(
        self, vpc_id: str, node_subnet_ids: Mapping[str, str], plan: NetworkPlan
    ) -> PlannedVpc:
        """In a VPC that exists (with its node subnet per AZ: AZ -> ID), per plan row its Multus
        subnet and one security group per group name the rows give, as the network stack
        builds them."""
        ec2 = self.ec2

        def subnet(cidr: str, az: str) -> str:
            created = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)
            return str(created["Subnet"]["SubnetId"])

        private = dict(node_subnet_ids)
        multus = {
            (row.network, row.availability_zone): subnet(row.subnet_cidr, row.availability_zone)
            for row in plan
        }
        groups = {
            name: str(
                ec2.create_security_group(
                    GroupName=f"{name}-{vpc_id}", Description=f"Multus {name}", VpcId=vpc_id
                )["GroupId"]
            )
            for name in dict.fromkeys(row.security_group for row in plan)
        }
        networks = tuple(dict.fromkeys(row.network for row in plan))
        return PlannedVpc(EmulatedVpc(vpc_id, private, multus, groups, networks), groups)

    def launch_instance(
        self,
        vpc: EmulatedVpc,
        az: str,
        cluster_name: str,
        instance_type: str = "m5.large",
        tags: Mapping[str, str] | None = None,
    ) -> str:
        """An instance in the AZ's node subnet, tagged with the cluster (and `tags`)."""
        instance_tags = {CLUSTER_TAG_KEY: cluster_name, **(tags or {})}
        reservation = self.ec2.run_instances(
            ImageId="ami-12c6146b",
            InstanceType=instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=vpc.private_subnets[az],
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in instance_tags.items()],
                }
            ],
        )
        return str(reservation["Instances"][0]["InstanceId"])

    def terminate_instances(self, instance_ids: list[str]) -> None:
        """Terminates them as EC2 does (moto, then terminated's ENI model)."""
        self.ec2.terminate_instances(InstanceIds=instance_ids)
        self.terminated(instance_ids)

    def terminated(self, instance_ids: list[str]) -> None:
        """What EC2 does to the ENIs of terminated instances (EC2 user guide, "Elastic network
        interfaces": the primary one and any attached with DeleteOnTermination are deleted,
        the others detached), which moto leaves attached."""
        attached = self.ec2.describe_network_interfaces(
            Filters=[{"Name": "attachment.instance-id", "Values": instance_ids}]
        )["NetworkInterfaces"]
        for eni in attached:
            attachment = eni["Attachment"]
            if (
                attachment["DeviceIndex"] == 0
                or attachment["AttachmentId"] in self.proxy.delete_on_termination
            ):
                self.ec2.delete_network_interface(NetworkInterfaceId=eni["NetworkInterfaceId"])
                self.proxy.prefixes.release(eni["NetworkInterfaceId"])
            else:
                self.ec2.detach_network_interface(AttachmentId=attachment["AttachmentId"])

    def ec2_state(self, _action: str, params: dict[str, str]) -> Ec2State:
        """The state IAM would consult for a call with these parameters (a state_probe)."""
        enis = [
            eni
            for name in ("NetworkInterfaceId", "NetworkInterfaceId.1")
            if name in params
            for eni in self.ec2.describe_network_interfaces(NetworkInterfaceIds=[params[name]])[
                "NetworkInterfaces"
            ]
        ]
        if "AttachmentId" in params:
            enis += self.ec2.describe_network_interfaces(
                Filters=[{"Name": "attachment.attachment-id", "Values": [params["AttachmentId"]]}]
            )["NetworkInterfaces"]
        attached = {e["NetworkInterfaceId"]: e["Attachment"] for e in enis if e.get("Attachment")}
        instance_ids = {a["InstanceId"] for a in attached.values()}
        instance_ids |= {
            value for name, value in params.items() if name in {"InstanceId", "InstanceId.1"}
        }
        instances = (
            self.ec2.describe_instances(InstanceIds=sorted(instance_ids))["Reservations"]
            if instance_ids
            else []
        )
        return Ec2State(
            eni_tags={e["NetworkInterfaceId"]: _tags(e.get("TagSet", [])) for e in enis},
            eni_placement={
                e["NetworkInterfaceId"]: EniPlacement(
                    e["SubnetId"], e["VpcId"], e["AvailabilityZone"]
                )
                for e in enis
            },
            eni_instance={eni: a["InstanceId"] for eni, a in attached.items()},
            attachment_eni={a["AttachmentId"]: eni for eni, a in attached.items()},
            instance_tags={
                i["InstanceId"]: _tags(i.get("Tags", []))
                for reservation in instances
                for i in reservation["Instances"]
            },
        )

    def instance_enis(self, instance_id: str) -> list[dict[str, Any]]:
        """Every ENI attached to the instance or tagged with it (attached or not)."""
        enis = {}
        for filters in (
            [{"Name": "attachment.instance-id", "Values": [instance_id]}],
            [{"Name": f"tag:{INSTANCE_TAG_KEY}", "Values": [instance_id]}],
        ):
            for eni in self.ec2.describe_network_interfaces(Filters=filters)["NetworkInterfaces"]:
                enis[eni["NetworkInterfaceId"]] = eni
        return list(enis.values())

    def run_bootstrap(
        self,
        user_data: str,
        instance_id: str,
        *,
        root: Path | None = None,
        faults: Sequence[Fault] = (),
        env: Mapping[str, str] | None = None,
        netns: str | None = None,
    ) -> BootstrapRun:
        """Runs the user-data's shell part with bash against the emulator; `env` adds or
        overrides the script's environment (MULTUS_* knobs).

        Without `netns`, in dry-host mode. With it, as root inside that network namespace
        with host changes on (sysctl and ip act on the namespace's links; its sysfs shows
        them), as the data-plane tier runs a node: udevadm, networkctl and systemctl, which
        a namespace has no daemons for, are logged to $PROCESS_LOG instead."""
        root = root or Path(tempfile.mkdtemp(prefix="node-root-", dir=self.work_dir))
        script = root / "user-data.sh"
        script.write_text(shell_part(user_data))
        process_log = root / "processes.log"
        process_log.write_text("")
        # No AWS_* variables: the script must take its credentials from IMDS, as on a node.
        wrappers = str(self._counting_wrapper_dir())
        if netns is not None:
            wrappers += f":{self._host_daemon_stub_dir()}"
        script_env = {
            "PATH": f"{wrappers}:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "PROCESS_LOG": str(process_log),
            "MULTUS_IMDS_URL": self.imds.base_url(instance_id),
            "MULTUS_EC2_ENDPOINT": self.proxy.url,
            "MULTUS_ROOT": str(root),
            "MULTUS_HOST_CHANGES": "0" if netns is None else "1",
            **(env or {}),
        }
        in_netns = [] if netns is None else ["ip", "netns", "exec", netns]
        self.proxy.reset(faults)
        started = time.monotonic()
        completed = subprocess.run(
            [*in_netns, "bash", str(script)],
            env=script_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=180,
            check=False,
        )
        seconds = time.monotonic() - started
        processes = process_log.read_text().splitlines()
        return BootstrapRun(
            returncode=completed.returncode,
            output=completed.stdout,
            ec2_calls=self.proxy.calls,
            ec2_client_processes=sum(line.startswith("curl ec2 ") for line in processes),
            aws_cli_processes=sum(line.startswith("aws ") for line in processes),
            process_arguments="\n".join(processes),
            seconds=seconds,
            root=root,
        )

    def _host_daemon_stub_dir(self) -> Path:
        """A directory whose udevadm, networkctl and systemctl log their command line."""
        stub_dir = self.work_dir / "host-daemon-stubs"
        if not stub_dir.exists():
            stub_dir.mkdir(parents=True)
            for name in ("udevadm", "networkctl", "systemctl"):
                stub = stub_dir / name
                stub.write_text(f'#!/bin/sh\necho "{name} $*" >>"$PROCESS_LOG"\n')
                stub.chmod(0o755)
        return stub_dir

    def _counting_wrapper_dir(self) -> Path:
        """A directory whose `curl` and `aws` log each command line to $PROCESS_LOG.

        `curl` then runs the real curl; `aws` fails, since nodes need no aws CLI for this.
        """
        wrapper_dir = self.work_dir / "counting-wrappers"
        if not wrapper_dir.exists():
            real_curl = shutil.which("curl")
            if real_curl is None:
                raise RuntimeError("curl is not installed; the bootstrap script needs it")
            wrapper_dir.mkdir(parents=True)
            wrappers = {
                "curl": (
                    'case "$*" in *--aws-sigv4*) kind=ec2 ;; *) kind=imds ;; esac\n'
                    'echo "curl $kind $*" >>"$PROCESS_LOG"\n'
                    f'exec "{real_curl}" "$@"\n'
                ),
                "aws": 'echo "aws $*" >>"$PROCESS_LOG"\necho "aws: not installed" >&2\nexit 127\n',
            }
            for name, body in wrappers.items():
                wrapper = wrapper_dir / name
                wrapper.write_text(f"#!/bin/sh\n{body}")
                wrapper.chmod(0o755)
        return wrapper_dir


@contextmanager
def running_moto_server() -> Iterator[int]:
    """Starts moto_server on 127.0.0.1 and yields its port once it answers; stops it on exit."""
    port = free_port()
    moto = subprocess.Popen(
        [str(_VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_serving(f"http://127.0.0.1:{port}/moto-api/", moto)
        yield port
    finally:
        moto.terminate()
        try:
            moto.wait(timeout=10)
        except subprocess.TimeoutExpired:  # seen on a loaded machine: its werkzeug threads
            moto.kill()  # may hold it past SIGTERM; nothing of it is read after the tests
            moto.wait(timeout=10)


@contextmanager
def running_emulator(
    host: str = "127.0.0.1", moto_at: tuple[str, int] | None = None
) -> Iterator[Ec2Emulator]:
    """Starts moto_server, the proxy and the fake IMDS; stops them on exit. The proxy and the
    fake IMDS listen on `host` (the data-plane tier's nodes reach them over their eth0);
    moto_server, which only the proxy and the emulator's client talk to, on 127.0.0.1, unless
    `moto_at` names a fresh one already running elsewhere (the data-plane tier runs it on the
    host, outside the VM's emulated CPU: it is the emulator's costliest part)."""
    with ExitStack() as stack:
        if moto_at is None:
            moto_at = ("127.0.0.1", stack.enter_context(running_moto_server()))
        moto_host, moto_port = moto_at
        ec2 = boto3.client(
            "ec2", endpoint_url=f"http://{moto_host}:{moto_port}", region_name=REGION,
            **DUMMY_CREDENTIALS,
        )  # fmt: skip
        prefixes = Ipv4PrefixDelegation(ec2)
        proxy = stack.enter_context(closing(Ec2Proxy(moto_at, prefixes, host)))
        imds = stack.enter_context(closing(FakeImds(ec2, prefixes, host)))
        work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="multus-emulator-"))
        emulator = Ec2Emulator(ec2=ec2, proxy=proxy, imds=imds, work_dir=Path(work_dir))
        proxy.on_terminated = emulator.terminated
        proxy.on_addresses_changed = imds.addresses_changed
        proxy.on_change = imds.ec2_changed
        ec2.meta.events.register("after-call.ec2", partial(_report_change, imds))
        yield emulator


def _report_change(imds: FakeImds, model: OperationModel, **_: Any) -> None:
    """A botocore after-call handler: tells the fake IMDS of a call that may change EC2."""
    if not model.name.startswith(READ_ACTION_PREFIXES):
        imds.ec2_changed()


def _wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    wait_until_answering(
        url,
        timeout_seconds=MOTO_START_SECONDS,
        exit_reason=lambda: (
            None if process.poll() is None else f"moto_server exited with {process.returncode}"
        ),
    )
