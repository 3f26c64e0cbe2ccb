"""EC2 + IMDS emulator for running the Multus ENI bootstrap script on 127.0.0.1.

moto_server plays EC2. In front of it an HTTP proxy records every EC2 request the script
makes (moto accepts but does not store DeleteOnTermination, so tests assert on requests) and
can add latency or answer with injected errors. A fake IMDS serves the paths the script reads,
deriving network/interfaces/macs/ from moto's view of the instance's attachments.
"""

from __future__ import annotations

import email
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import boto3

from node_bootstrap import AzPlacement, MultusInterface, NodeBootstrapProps
from node_bootstrap.renderer import CLUSTER_TAG_KEY, INSTANCE_TAG_KEY

REGION = "us-west-2"
AVAILABILITY_ZONES = ("us-west-2a", "us-west-2b")
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
_IMDS_TOKEN = "fake-imds-token"
_VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Fault:
    """Answers matching EC2 requests with an error, `times` times."""

    code: str
    status: int = 503
    action: str | None = None  # None matches every action
    with_param: str | None = None  # only requests carrying this query parameter
    times: int = 1


@dataclass(frozen=True)
class RecordedCall:
    action: str
    params: dict[str, str]
    status: int
    received_at: float  # time.time() when the proxy got the request


class Ec2Proxy:
    """Recording, latency-adding, fault-injecting proxy in front of moto_server."""

    def __init__(self, upstream_port: int) -> None:
        self.latency_seconds = 0.0
        self._upstream_port = upstream_port
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._remaining: list[int] = []  # how often each fault still fires
        self._calls: list[RecordedCall] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

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
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                params = dict(parse_qsl(body.decode()))
                action = params.get("Action", "")
                received_at = time.time()
                time.sleep(proxy.latency_seconds)
                fault = proxy._injected_fault(action, params)
                if fault:
                    status, payload = fault.status, _ec2_error(fault.code).encode()
                else:
                    status, payload = self._forward(body)
                proxy._record(RecordedCall(action, params, status, received_at))
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _forward(self, body: bytes) -> tuple[int, bytes]:
                upstream = HTTPConnection("127.0.0.1", proxy._upstream_port, timeout=30)
                try:
                    headers = {
                        key: value for key, value in self.headers.items() if key.lower() != "host"
                    }
                    upstream.request("POST", self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    return response.status, response.read()
                finally:
                    upstream.close()

        return Handler


def _ec2_error(code: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>injected {code}</Message>"
        "</Error></Errors><RequestID>injected</RequestID></Response>"
    )


class FakeImds:
    """IMDSv2 for any moto instance: the base URL for instance i-x is <url>/i-x."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def base_url(self, instance_id: str) -> str:
        return f"{self.url}/{instance_id}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def metadata(self, instance_id: str, path: str) -> str | None:
        if path == "instance-id":
            return instance_id
        if path == "placement/region":
            return REGION
        if path == "placement/availability-zone":
            reservations = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
            return str(reservations[0]["Instances"][0]["Placement"]["AvailabilityZone"])
        enis = {
            eni["MacAddress"]: eni
            for eni in self._ec2.describe_network_interfaces(
                Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
            )["NetworkInterfaces"]
        }
        prefix = "network/interfaces/macs/"
        if path == prefix:
            return "".join(f"{mac}/\n" for mac in enis)
        mac, _, leaf = path.removeprefix(prefix).partition("/")
        if not path.startswith(prefix) or mac not in enis:
            return None
        values = {
            "device-number": str(enis[mac]["Attachment"]["DeviceIndex"]),
            "subnet-id": enis[mac]["SubnetId"],
            "interface-id": enis[mac]["NetworkInterfaceId"],
        }
        return values.get(leaf)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        imds = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                if self.path.endswith("/latest/api/token") and self.headers.get(
                    "X-aws-ec2-metadata-token-ttl-seconds"
                ):
                    self._reply(200, _IMDS_TOKEN)
                else:
                    self._reply(400, "")

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != _IMDS_TOKEN:
                    self._reply(401, "")
                    return
                instance_id, _, rest = self.path.lstrip("/").partition("/")
                value = imds.metadata(instance_id, rest.removeprefix("latest/meta-data/"))
                if value is None:
                    self._reply(404, "")
                else:
                    self._reply(200, value)

            def _reply(self, status: int, text: str) -> None:
                payload = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


@dataclass(frozen=True)
class MultusVpc:
    """The template's layout: private node subnets plus one subnet per (network, AZ)."""

    vpc_id: str
    private_subnets: dict[str, str]
    multus_subnets: dict[tuple[str, str], str]
    security_group_id: str
    networks: tuple[str, ...]

    def bootstrap_props(
        self, cluster_name: str, azs: Sequence[str] = AVAILABILITY_ZONES
    ) -> NodeBootstrapProps:
        return NodeBootstrapProps(
            cluster_name=cluster_name,
            interfaces=[
                MultusInterface(network=network, interface_name=network, device_index=index)
                for index, network in enumerate(self.networks, start=1)
            ],
            placements={
                az: AzPlacement(
                    subnet_ids=[self.multus_subnets[network, az] for network in self.networks],
                    security_group_ids=[self.security_group_id],
                )
                for az in azs
            },
        )


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
    returncode: int
    output: str
    ec2_calls: list[RecordedCall]
    aws_processes: int
    seconds: float
    root: Path

    def actions(self, name: str) -> list[RecordedCall]:
        return [call for call in self.ec2_calls if call.action == name]


@dataclass
class Ec2Emulator:
    """moto_server + recording proxy + fake IMDS, all on 127.0.0.1."""

    ec2: Any
    proxy: Ec2Proxy
    imds: FakeImds
    work_dir: Path

    def create_multus_vpc(self, network_count: int = 2) -> MultusVpc:
        """VPC 10.0.0.0/16, private 10.0.2-3.0/24, Multus from 10.0.4.0/24 per (network, AZ)."""
        ec2 = self.ec2
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]

        def subnet(third_octet: int, az: str) -> str:
            cidr = f"10.0.{third_octet}.0/24"
            created = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)
            return str(created["Subnet"]["SubnetId"])

        networks = tuple(f"multus{number}" for number in range(1, network_count + 1))
        private = {az: subnet(2 + index, az) for index, az in enumerate(AVAILABILITY_ZONES)}
        multus = {
            (network, az): subnet(4 + 2 * network_index + az_index, az)
            for network_index, network in enumerate(networks)
            for az_index, az in enumerate(AVAILABILITY_ZONES)
        }
        group_id = ec2.create_security_group(
            GroupName=f"multus-{vpc_id}", Description="Multus ENIs", VpcId=vpc_id
        )["GroupId"]
        return MultusVpc(vpc_id, private, multus, group_id, networks)

    def launch_instance(self, vpc: MultusVpc, az: str, cluster_name: str) -> str:
        reservation = self.ec2.run_instances(
            ImageId="ami-12c6146b",
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=vpc.private_subnets[az],
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": CLUSTER_TAG_KEY, "Value": cluster_name}],
                }
            ],
        )
        return str(reservation["Instances"][0]["InstanceId"])

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
    ) -> BootstrapRun:
        """Runs the user-data's shell part with bash in dry-host mode against the emulator."""
        root = root or Path(tempfile.mkdtemp(prefix="node-root-", dir=self.work_dir))
        script = root / "user-data.sh"
        script.write_text(shell_part(user_data))
        aws_log = root / "aws-invocations.log"
        aws_log.write_text("")
        env = {
            "PATH": f"{self._aws_wrapper_dir()}:{_VENV_BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_INVOCATION_LOG": str(aws_log),
            "MULTUS_IMDS_URL": self.imds.base_url(instance_id),
            "MULTUS_EC2_ENDPOINT": self.proxy.url,
            "MULTUS_ROOT": str(root),
            "MULTUS_HOST_CHANGES": "0",
            "MULTUS_WAIT_SECONDS": "10",
        }
        self.proxy.reset(faults)
        started = time.monotonic()
        completed = subprocess.run(
            ["bash", str(script)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=180,
            check=False,
        )
        seconds = time.monotonic() - started
        return BootstrapRun(
            returncode=completed.returncode,
            output=completed.stdout,
            ec2_calls=self.proxy.calls,
            aws_processes=len(aws_log.read_text().splitlines()),
            seconds=seconds,
            root=root,
        )

    def _aws_wrapper_dir(self) -> Path:
        """A directory whose `aws` logs each invocation, then runs the venv's aws CLI."""
        wrapper_dir = self.work_dir / "aws-wrapper"
        wrapper = wrapper_dir / "aws"
        if not wrapper.exists():
            wrapper_dir.mkdir(parents=True, exist_ok=True)
            wrapper.write_text(
                f'#!/bin/sh\necho "$*" >>"$AWS_INVOCATION_LOG"\nexec "{_VENV_BIN / "aws"}" "$@"\n'
            )
            wrapper.chmod(0o755)
        return wrapper_dir


@contextmanager
def running_emulator() -> Iterator[Ec2Emulator]:
    """Starts moto_server, the proxy and the fake IMDS; stops them on exit."""
    port = _free_port()
    moto = subprocess.Popen(
        [str(_VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proxy = imds = None
    try:
        _wait_until_serving(f"http://127.0.0.1:{port}/moto-api/", moto)
        ec2 = boto3.client(
            "ec2", endpoint_url=f"http://127.0.0.1:{port}", region_name=REGION, **DUMMY_CREDENTIALS
        )
        proxy = Ec2Proxy(port)
        imds = FakeImds(ec2)
        with tempfile.TemporaryDirectory(prefix="multus-emulator-") as work_dir:
            yield Ec2Emulator(ec2=ec2, proxy=proxy, imds=imds, work_dir=Path(work_dir))
    finally:
        for server in (proxy, imds):
            if server:
                server.close()
        moto.terminate()
        moto.wait(timeout=10)


def _wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    raise RuntimeError(f"moto_server did not answer {url} within 30 s")
