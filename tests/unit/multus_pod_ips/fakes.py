"""In-process stand-ins for what the agent talks to: a scripted EC2 for one ENI (ScriptedEc2)
and that ENI's addresses in IMDS (ScriptedImds), and IMDSv2 plus the EC2 Query API over HTTP on
127.0.0.1 (FakeAws), which checks each request's SigV4 signature the way EC2 does."""

from __future__ import annotations

import threading
import time
import urllib.error
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from multus_pod_ips.agent.config import AgentConfig, AgentError
from multus_pod_ips.agent.ec2_query import Ec2Error
from multus_pod_ips.agent.eni_worker import EniWorker, Operation
from multus_pod_ips.agent.node_agent import Agent
from testing_support.multus_emulator import (
    NODE_CREDENTIALS,
    NODE_ROLE,
    ImdsTokens,
    ImdsV2Handler,
    credentials_document,
    ec2_error_xml,
    ec2_request_error,
    signature_error,
)

#: DescribeNetworkInterfaces' answer for eni-1 (EC2 API reference, NetworkInterface): the ENI's own
#: privateIpAddress, then one item per address in privateIpAddressesSet; other sets have items too.
ENI_XML = """<DescribeNetworkInterfacesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
<requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>
<networkInterfaceSet><item><networkInterfaceId>eni-1</networkInterfaceId>
<privateIpAddress>10.0.4.10</privateIpAddress>
<groupSet><item><groupId>sg-1</groupId><groupName>multus</groupName></item></groupSet>
<tagSet><item><key>multus.k8s.aws/interface</key><value>multus1</value></item></tagSet>
<privateIpAddressesSet>
<item><privateIpAddress>10.0.4.10</privateIpAddress><primary>true</primary></item>
{secondaries}
</privateIpAddressesSet><ipv6AddressesSet>{ipv6s}</ipv6AddressesSet></item></networkInterfaceSet>
</DescribeNetworkInterfacesResponse>"""
PRIMARY_IP = "10.0.4.10"
#: The IPv6 address eni-1 got at creation (the bootstrap's Ipv6AddressCount=1), outside the
#: pod range 2600:1f14:0:4::100/120 of its subnet's /64.
SEED_IPV6 = "2600:1f14:0:4::10"
ENI_MAC = "02:00:00:00:00:01"
OK_XML = "<Response><return>true</return></Response>"


def config(tmp_path: Path, **overrides: Any) -> AgentConfig:
    values: dict[str, Any] = {
        "socket_path": str(tmp_path / "agent.sock"),
        "records_dir": str(tmp_path / "pods"),
        "ready_marker": str(tmp_path / "ready"),
        "eni_state_dir": str(tmp_path / "eni"),
        "interfaces": {"multus1": ["10.0.4.32/27"]},
        "netns_root": str(tmp_path),
        "batch_window_seconds": 0.005,
        **overrides,
    }
    return AgentConfig(**values)


class ScriptedEc2:
    """Answers like EC2 for one ENI (eni-1, primary 10.0.4.10; `ipv6s`: its IPv6 addresses,
    none unless given); calls block until `gate` opens. Like EC2, an Unassign of an address the
    ENI does not hold fails the whole call."""

    def __init__(self, secondaries: set[str] | None = None, ipv6s: set[str] | None = None) -> None:
        self.secondaries = set(secondaries or ())
        self.ipv6s = set(ipv6s or ())
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.failures: list[Ec2Error] = []
        self.ipv4_per_eni = "10"

    def call(self, action: str, params: dict[str, str], deadline: float) -> ElementTree.Element:
        self.gate.wait(5)
        self.calls.append((action, params))
        if self.failures and action != "DescribeNetworkInterfaces":
            raise self.failures.pop(0)
        if action == "DescribeInstanceTypes":
            return ElementTree.fromstring(
                "<DescribeInstanceTypesResponse><instanceTypeSet><item><networkInfo>"
                f"<ipv4AddressesPerInterface>{self.ipv4_per_eni}</ipv4AddressesPerInterface>"
                f"<ipv6AddressesPerInterface>{self.ipv4_per_eni}</ipv6AddressesPerInterface>"
                "</networkInfo></item></instanceTypeSet></DescribeInstanceTypesResponse>"
            )
        ips = {v for k, v in params.items() if k.startswith("PrivateIpAddress.")}
        if action == "AssignPrivateIpAddresses":
            self.secondaries |= ips
        elif action == "UnassignPrivateIpAddresses":
            if not ips <= self.secondaries:
                raise Ec2Error("InvalidParameterValue", "not assigned", retryable=False)
            self.secondaries -= ips
        ipv6s = {v for k, v in params.items() if k.startswith("Ipv6Addresses.")}
        if action == "AssignIpv6Addresses":
            self.ipv6s |= ipv6s
        elif action == "UnassignIpv6Addresses":
            if not ipv6s <= self.ipv6s:
                raise Ec2Error("InvalidParameterValue", "not assigned", retryable=False)
            self.ipv6s -= ipv6s
        return self.describe()

    def describe(self) -> ElementTree.Element:
        items = "".join(
            f"<item><privateIpAddress>{ip}</privateIpAddress><primary>false</primary></item>"
            for ip in sorted(self.secondaries)
        )
        ipv6s = "".join(
            f"<item><ipv6Address>{ip}</ipv6Address><isPrimaryIpv6>false</isPrimaryIpv6></item>"
            for ip in sorted(self.ipv6s)
        )
        return ElementTree.fromstring(ENI_XML.format(secondaries=items, ipv6s=ipv6s))

    def actions(self) -> list[str]:
        return [action for action, _ in self.calls]

    def addresses_sent(self, action: str) -> list[list[str]]:
        """The addresses of each call of `action`, in call order."""
        return [
            sorted(v for k, v in params.items() if k.startswith(("PrivateIpAddress.", "Ipv6")))
            for called, params in self.calls
            if called == action
        ]


class ScriptedImds:
    """IMDS's network/interfaces/macs/ of a node with two ENIs, its primary one first, then eni-1
    (ENI_MAC), whose local-ipv4s lists its primary and ScriptedEc2's secondaries except the
    `moving` ones (moves from another ENI that have not completed), plus the `lingering` ones
    (removed in EC2, not yet in IMDS); its ipv6s lists ScriptedEc2's IPv6 addresses (404 while
    there are none, as IMDS answers). `reads` counts each path."""

    def __init__(self, ec2: ScriptedEc2) -> None:
        self.ec2 = ec2
        self.moving: set[str] = set()
        self.lingering: set[str] = set()
        self.reads: dict[str, int] = {}
        self._values = {
            "network/interfaces/macs/": f"02:00:00:00:00:aa/\n{ENI_MAC}/",
            "network/interfaces/macs/02:00:00:00:00:aa/interface-id": "eni-primary",
            f"network/interfaces/macs/{ENI_MAC}/interface-id": "eni-1",
        }

    def get(self, path: str) -> str:
        self.reads[path] = self.reads.get(path, 0) + 1
        if path == f"network/interfaces/macs/{ENI_MAC}/local-ipv4s":
            listed = (self.ec2.secondaries - self.moving) | self.lingering
            return "\n".join([PRIMARY_IP, *sorted(listed)])
        if path == f"network/interfaces/macs/{ENI_MAC}/ipv6s" and self.ec2.ipv6s:
            return "\n".join(sorted((self.ec2.ipv6s - self.moving) | self.lingering))
        if path not in self._values:
            raise urllib.error.HTTPError(path, 404, "Not Found", None, None)  # type: ignore[arg-type]
        return self._values[path]


def agent_for(tmp_path: Path, ec2: ScriptedEc2, limit: int = 10, **overrides: Any) -> Agent:
    imds = ScriptedImds(ec2)
    agent = Agent(config(tmp_path, **overrides), imds=imds, ec2=ec2)  # type: ignore[arg-type]
    agent.ipv4_per_eni, agent.instance_type = limit, "m5.large"
    agent.ipv6_per_eni = limit  # EC2: as many IPv6 as IPv4 addresses per ENI
    return agent


class AgentWorker(EniWorker):
    """An ENI worker run by a real Agent, which the tests reach through it."""

    agent: Agent


def worker_for(tmp_path: Path, ec2: ScriptedEc2, limit: int = 10, **overrides: Any) -> AgentWorker:
    agent = agent_for(tmp_path, ec2, limit, **overrides)
    worker = AgentWorker(agent, "multus1", "eni-1")
    agent.workers["multus1"] = worker
    worker.start()
    return worker


def settle(operations: list[Operation]) -> list[AgentError | None]:
    for operation in operations:
        assert operation.done.wait(10)
    return [operation.error for operation in operations]


class FakeAws:
    """IMDSv2 (PUT /latest/api/token, then GETs carrying the token) and the EC2 Query API (POST /,
    a form-encoded body, SigV4-signed with the node role's credentials) on one local port.

    `ec2_answers` are (HTTP status, body) pairs served in order, then 200 with the action's
    `ec2_by_action` entry or `ec2_default`; a status of 0 closes the connection unanswered."""

    def __init__(self) -> None:
        self.metadata: dict[str, str] = {
            "instance-id": "i-0123456789abcdef0",
            "instance-type": "m5.large",
            "placement/region": "us-west-2",
            "services/domain": "amazonaws.com",
            "iam/security-credentials/": NODE_ROLE,
        }
        self.credentials_expire_at = "2099-01-01T00:00:00Z"
        self.tokens = ImdsTokens()
        self.metadata_reads: list[str] = []
        self.ec2_requests: list[dict[str, str]] = []
        self.ec2_answers: list[tuple[int, str]] = []
        self.ec2_default = OK_XML
        self.ec2_by_action: dict[str, str] = {}
        self.refusals: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def reset(self) -> None:
        self.tokens.clear()
        with self._lock:
            self.metadata_reads.clear()
            self.ec2_requests.clear()
            self.ec2_answers.clear()
            self.refusals.clear()
        self.credentials_expire_at = "2099-01-01T00:00:00Z"
        self.ec2_default = OK_XML
        self.ec2_by_action = {}

    def ec2_actions(self) -> list[str]:
        with self._lock:
            return [request.get("Action", "") for request in self.ec2_requests]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _metadata(self, path: str) -> str | None:
        if path == f"iam/security-credentials/{NODE_ROLE}":
            return credentials_document(NODE_CREDENTIALS, self.credentials_expire_at)
        return self.metadata.get(path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(ImdsV2Handler):
            tokens = fake.tokens

            def metadata(self, path: str) -> str | None:
                if not path.startswith("/latest/meta-data/"):
                    return None
                path = path.removeprefix("/latest/meta-data/")
                with fake._lock:
                    fake.metadata_reads.append(path)
                return fake._metadata(path)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                refused = signature_error(fake.url + "/", self.headers, body, NODE_CREDENTIALS)
                try:  # SigV4: X-Amz-Date in ISO 8601 basic format, UTC
                    time.strptime(self.headers.get("X-Amz-Date", ""), "%Y%m%dT%H%M%SZ")
                except ValueError:
                    refused = refused or "malformed X-Amz-Date"
                form = self.headers.get("Content-Type", "")
                if not form.startswith("application/x-www-form-urlencoded"):
                    refused = refused or f"content type {form!r}"
                if self.path != "/" or refused:
                    with fake._lock:
                        fake.refusals.append(refused or f"path {self.path}")
                    self.reply(403, ec2_error_xml("AuthFailure", refused))
                    return
                params = dict(parse_qsl(body.decode()))
                invalid = ec2_request_error(params)
                if invalid:
                    with fake._lock:
                        fake.refusals.append(invalid)
                    self.reply(400, ec2_error_xml(invalid.split()[0], invalid))
                    return
                with fake._lock:
                    fake.ec2_requests.append(params)
                    default = fake.ec2_by_action.get(params.get("Action", ""), fake.ec2_default)
                    status, answer = fake.ec2_answers.pop(0) if fake.ec2_answers else (200, default)
                if status == 0:
                    self.close_connection = True
                    return
                self.reply(status, answer)

        return Handler


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())
