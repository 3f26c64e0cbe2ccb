#!/usr/bin/python3
"""Multus pod IP agent: makes every Multus pod address a secondary IP of its node's Multus ENI.

Runs once per node (DaemonSet, host network, so IMDS answers with hop limit 1 and EC2 calls
carry the node role). The CNI plugin `multus-pod-ip`, chained after ipvlan and sbr in every
NetworkAttachmentDefinition, asks over a unix socket:

  ADD    assign the pod's address to the ENI of the NAD's master interface, and wait until
         IMDS lists it on that ENI (a move from another ENI completes asynchronously);
  DEL    unassign it;
  CHECK  is it still assigned?

Requests for one ENI are served by one worker thread: whatever queued up while the previous
EC2 call was in flight goes out as one AssignPrivateIpAddresses (and one Unassign) call.
Throttling and 5xx answers are retried with exponential backoff and full jitter until the
request's deadline. A periodic reconcile compares each ENI's secondary addresses inside the
managed ranges with the pods recorded on the node whose network namespace still exists:
addresses of pods that are gone are unassigned, missing ones assigned (without taking them
from another ENI). Records live in /run, so a reboot starts from "no pods" and the first
reconcile releases whatever the node held before.

Python 3.9 standard library only: the same file runs in the agent image (Amazon Linux 2023)
and in tests. Configuration: a JSON file (first argument); environment overrides for tests:
MULTUS_IMDS_URL, MULTUS_EC2_ENDPOINT.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import queue
import random
import signal
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger("multus-pod-ips")

EC2_API_VERSION = "2016-11-15"
# Throttling codes; server errors (InternalError, Unavailable, ...) come with a 5xx status and
# are retried by status (EC2 API reference, "Error codes").
RETRYABLE_EC2_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled"}
)
#: CNI error codes (CNI spec "Error" section); 100+ are this plugin's own.
CNI_INVALID_CONFIG = 7
CNI_TRY_AGAIN_LATER = 11
ERROR_ENI_FULL = 101
ERROR_NOT_ASSIGNED = 102
ERROR_EC2 = 103


@dataclass(frozen=True)
class AgentConfig:
    """socket_path: where the CNI plugin connects. records_dir: one JSON file per pod attachment
    (keep it on a tmpfs such as /run so a reboot forgets them). ready_marker: written once the
    agent serves requests. eni_state_dir: the node bootstrap's <interface>.eni files
    ("<instance-id> <eni-id>"). netns_root: prefix under which the host's /run/netns is visible.
    interfaces: master interface -> address ranges the agent manages on that interface's ENI
    (the Whereabouts ranges, i.e. the CIDR reservations)."""

    socket_path: str
    records_dir: str
    ready_marker: str
    eni_state_dir: str
    interfaces: dict[str, list[str]]
    netns_root: str = ""
    reconcile_seconds: float = 60.0
    #: Addresses changed this recently are left to their in-flight request (EC2 reads are
    #: eventually consistent), not to the reconcile.
    settle_seconds: float = 30.0
    #: How long a worker waits for more requests before calling EC2.
    batch_window_seconds: float = 0.02
    add_timeout_seconds: float = 50.0
    del_timeout_seconds: float = 20.0
    #: How often IMDS is asked whether assigned addresses are on the ENI yet (IMDS reads cost
    #: no EC2 request budget).
    remap_poll_seconds: float = 0.2

    @staticmethod
    def load(path: str) -> AgentConfig:
        with open(path, encoding="utf-8") as handle:
            return AgentConfig(**json.load(handle))


class AgentError(Exception):
    """A failure reported to the CNI plugin with a CNI error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Ec2Error(Exception):
    """An EC2 API error: its code, message and whether a retry may succeed."""

    def __init__(self, code: str, message: str, retryable: bool) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable


# --- IMDS and EC2 ----------------------------------------------------------------------------


class InstanceMetadata:
    """IMDSv2 client (token refreshed before it expires)."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url.rstrip("/")
        self._token = ""
        self._token_expires = 0.0
        self._lock = threading.Lock()

    def get(self, path: str) -> str:
        request = urllib.request.Request(
            f"{self._base_url}/latest/meta-data/{path}",
            headers={"X-aws-ec2-metadata-token": self._current_token()},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return str(response.read().decode())

    def _current_token(self) -> str:
        with self._lock:
            if time.monotonic() > self._token_expires:
                request = urllib.request.Request(
                    f"{self._base_url}/latest/api/token",
                    method="PUT",
                    headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"},
                )
                with urllib.request.urlopen(request, timeout=5) as response:
                    self._token = response.read().decode()
                self._token_expires = time.monotonic() + 21000
            return self._token


@dataclass(frozen=True)
class Credentials:
    """The node role's temporary credentials from IMDS and when they expire."""

    access_key: str
    secret_key: str
    token: str
    expires_at: float  # time.time()


class Ec2Client:
    """EC2 Query API over HTTPS, SigV4-signed with the instance profile's credentials."""

    def __init__(self, imds: InstanceMetadata, region: str, endpoint: str) -> None:
        self._imds = imds
        self._region = region
        self._endpoint = endpoint.rstrip("/") + "/"
        self._credentials: Credentials | None = None
        self._lock = threading.Lock()

    def call(self, action: str, params: dict[str, str], deadline: float) -> ElementTree.Element:
        """One action, retried on throttling/5xx/connection errors until `deadline`
        (time.monotonic()): delays drawn uniformly from [0, min(10 s, 0.1 s * 2^attempt))."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._call_once(action, params)
            except Ec2Error as error:
                if not error.retryable:
                    raise
                delay = random.uniform(0, min(10.0, 0.1 * 2**attempt))
                if time.monotonic() + delay > deadline:
                    raise
                LOG.info("%s: %s; retry %d in %.2f s", action, error.code, attempt, delay)
                time.sleep(delay)

    def _call_once(self, action: str, params: dict[str, str]) -> ElementTree.Element:
        body = urllib.parse.urlencode({"Action": action, "Version": EC2_API_VERSION, **params})
        request = urllib.request.Request(
            self._endpoint, data=body.encode(), headers=self._signed_headers(body), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return ElementTree.fromstring(response.read())
        except urllib.error.HTTPError as error:
            payload = error.read()
            code, message = _error_code(payload) or (f"HTTP {error.code}", "")
            retryable = error.code >= 500 or code in RETRYABLE_EC2_CODES
            raise Ec2Error(code, message, retryable) from None
        except (urllib.error.URLError, OSError) as error:
            raise Ec2Error("ConnectionError", str(error), retryable=True) from None

    def _signed_headers(self, body: str) -> dict[str, str]:
        credentials = self._valid_credentials()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        host = urllib.parse.urlsplit(self._endpoint).netloc
        headers = {
            "content-type": "application/x-www-form-urlencoded; charset=utf-8",
            "host": host,
            "x-amz-date": amz_date,
            "x-amz-security-token": credentials.token,
        }
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                "POST",
                "/",
                "",
                "".join(f"{name}:{headers[name]}\n" for name in sorted(headers)),
                signed,
                hashlib.sha256(body.encode()).hexdigest(),
            ]
        )
        scope = f"{amz_date[:8]}/{self._region}/ec2/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = ("AWS4" + credentials.secret_key).encode()
        for part in (amz_date[:8], self._region, "ec2", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        del headers["host"]  # urllib sends it
        return headers

    def _valid_credentials(self) -> Credentials:
        with self._lock:
            if self._credentials is None or time.time() > self._credentials.expires_at - 300:
                role = self._imds.get("iam/security-credentials/").splitlines()[0]
                document = json.loads(self._imds.get(f"iam/security-credentials/{role}"))
                expires = datetime.datetime.strptime(document["Expiration"], "%Y-%m-%dT%H:%M:%SZ")
                self._credentials = Credentials(
                    document["AccessKeyId"],
                    document["SecretAccessKey"],
                    document["Token"],
                    expires.replace(tzinfo=datetime.timezone.utc).timestamp(),
                )
            return self._credentials


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _error_code(payload: bytes) -> tuple[str, str] | None:
    try:
        root = ElementTree.fromstring(payload)
    except ElementTree.ParseError:
        return None
    values = {_local(element.tag): (element.text or "") for element in root.iter()}
    return (values["Code"], values.get("Message", "")) if "Code" in values else None


def _texts(root: ElementTree.Element, name: str) -> list[str]:
    return [element.text or "" for element in root.iter() if _local(element.tag) == name]


# --- per-ENI worker --------------------------------------------------------------------------


@dataclass
class Operation:
    """One address to assign or unassign, or a reconcile; `done` is set when it is settled."""

    kind: str  # "assign", "unassign" or "reconcile"
    ip: str
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    error: AgentError | None = None
    finished_at = 0.0  # time.monotonic() when it was settled

    def finish(self, error: AgentError | None = None) -> None:
        self.error = error
        self.finished_at = time.monotonic()
        self.done.set()


class EniWorker(threading.Thread):
    """Serializes every EC2 change to one ENI and coalesces concurrent requests."""

    def __init__(self, agent: Agent, interface: str, eni_id: str) -> None:
        super().__init__(name=f"eni-{interface}", daemon=True)
        self.agent = agent
        self.interface = interface
        self.eni_id = eni_id
        self.ranges = [ipaddress.ip_network(cidr) for cidr in agent.config.interfaces[interface]]
        self.held: set[str] | None = None  # every private IPv4 address of the ENI
        self.primary = ""
        self.mac = ""  # the ENI's key under IMDS network/interfaces/macs/, found on first use
        self._imds_read_lock = threading.Lock()
        self._imds_read: tuple[float, set[str]] = (-1.0, set())  # (started at, addresses)
        self.reconciled = threading.Event()
        self._queue: queue.Queue[Operation] = queue.Queue()
        self._changed_at: dict[str, float] = {}

    def submit(self, operation: Operation) -> Operation:
        self._queue.put(operation)
        return operation

    def touch(self, ips: tuple[str, ...]) -> None:
        """Leaves these addresses to a request in progress: the reconcile skips them until
        they settle (also covers EC2's eventually consistent reads after a change)."""
        now = time.monotonic()
        self._changed_at.update({ip: now for ip in ips})

    def manages(self, ip: str) -> bool:
        address = ipaddress.ip_address(ip)
        return any(address in network for network in self.ranges)

    def run(self) -> None:
        while True:
            batch = [self._queue.get()]
            time.sleep(self.agent.config.batch_window_seconds)
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                self._process(batch)
            except Exception as error:  # keep serving: one bad batch must not stop the node
                LOG.exception("%s: batch failed", self.interface)
                retryable = not isinstance(error, Ec2Error) or error.retryable
                code = CNI_TRY_AGAIN_LATER if retryable else ERROR_EC2
                for operation in batch:
                    if not operation.done.is_set():
                        operation.finish(AgentError(code, f"{self.eni_id}: {error}"))

    def _process(self, batch: list[Operation]) -> None:
        last: dict[str, Operation] = {}
        for operation in batch:
            if operation.kind != "reconcile":
                last[operation.ip] = operation
        deadline = max(operation.deadline for operation in batch)
        if self.held is None and last:
            self._refresh(deadline)
        unassign = [op for op in last.values() if op.kind == "unassign"]
        assign = [op for op in last.values() if op.kind == "assign"]
        self._unassign(unassign)
        self._assign(assign)
        for operation in batch:  # superseded operations share the outcome of the last one
            if operation.kind != "reconcile" and not operation.done.is_set():
                final = last.get(operation.ip)
                operation.finish(final.error if final else None)
        reconciles = [op for op in batch if op.kind == "reconcile"]
        if reconciles:
            try:
                self._reconcile(deadline)
                error = None
            except (Ec2Error, OSError) as failure:
                LOG.warning("%s: reconcile failed: %s", self.interface, failure)
                error = AgentError(CNI_TRY_AGAIN_LATER, str(failure))
            for operation in reconciles:
                operation.finish(error)

    def _refresh(self, deadline: float) -> None:
        root = self.agent.ec2.call(
            "DescribeNetworkInterfaces", {"NetworkInterfaceId.1": self.eni_id}, deadline
        )
        held, primary = set(), ""
        for item in root.iter():
            if _local(item.tag) != "item":
                continue
            fields = {_local(child.tag): (child.text or "") for child in item}
            if "privateIpAddress" in fields and "primary" in fields:
                held.add(fields["privateIpAddress"])
                if fields["primary"] == "true":
                    primary = fields["privateIpAddress"]
        self.held, self.primary = held, primary

    def _unassign(self, operations: list[Operation]) -> None:
        if not operations:
            return
        ips = [op.ip for op in operations]
        deadline = max(op.deadline for op in operations)
        try:
            self._change("UnassignPrivateIpAddresses", ips, deadline)
        except Ec2Error as error:
            # One address no longer on this ENI (moved with its pod) fails the whole call:
            # ask EC2 what the ENI holds and retry only the addresses still there.
            if error.retryable:
                self._fail(operations, CNI_TRY_AGAIN_LATER, error)
                return
            self._refresh(deadline)
            remaining = [op for op in operations if op.ip in (self.held or set())]
            if remaining and len(remaining) < len(operations):
                self._unassign(remaining)
            elif remaining:
                self._fail(operations, ERROR_EC2, error)
                return
        for op in operations:
            if not op.done.is_set():
                op.finish()

    def _assign(self, operations: list[Operation]) -> None:
        if not operations:
            return
        held = self.held or set()
        free = self.agent.ipv4_per_eni - len(held)
        accepted: list[Operation] = []
        for op in operations:
            if op.ip in held or free > 0:
                accepted.append(op)
                free -= op.ip not in held
            else:
                op.finish(
                    AgentError(
                        ERROR_ENI_FULL,
                        f"ENI {self.eni_id} ({self.interface}) already holds "
                        f"{self.agent.ipv4_per_eni - free} of the "
                        f"{self.agent.ipv4_per_eni} IPv4 addresses an ENI of "
                        f"{self.agent.instance_type} can have; {op.ip} cannot be added. Spread "
                        "Multus pods over more nodes or allow larger instance types.",
                    )
                )
        self._assign_accepted(accepted, allow_reassignment=True)

    def _assign_accepted(self, operations: list[Operation], allow_reassignment: bool) -> None:
        if not operations:
            return
        deadline = max(op.deadline for op in operations)
        try:
            self._change(
                "AssignPrivateIpAddresses",
                [op.ip for op in operations],
                deadline,
                {"AllowReassignment": "true" if allow_reassignment else "false"},
            )
        except Ec2Error as error:
            if error.retryable:
                self._fail(operations, CNI_TRY_AGAIN_LATER, error)
            elif len(operations) > 1:  # isolate the address EC2 refuses
                for op in operations:
                    self._assign_accepted([op], allow_reassignment)
            else:
                self._refresh(deadline)
                if operations[0].ip not in (self.held or set()):
                    code = ERROR_ENI_FULL if "LimitExceeded" in error.code else ERROR_EC2
                    self._fail(operations, code, error)
                    return
        for op in operations:
            if not op.done.is_set():
                op.finish()

    def addresses_in_imds(self, read_after: float) -> set[str]:
        """The private IPv4 addresses IMDS lists for this ENI (none while IMDS cannot say), from
        a read that started at `read_after` (time.monotonic()) or later. Concurrent waiters
        share one read: IMDS throttles queries per instance (EC2 User Guide, "Retrieve instance
        metadata", Query throttling), and a burst of pods waits at once."""
        with self._imds_read_lock:
            if self._imds_read[0] < read_after:
                self._imds_read = (time.monotonic(), self._read_local_ipv4s())
            return self._imds_read[1]

    def _read_local_ipv4s(self) -> set[str]:
        imds = self.agent.imds
        try:
            if not self.mac:
                self.mac = self._find_mac()
            if not self.mac:
                return set()
            return set(imds.get(f"network/interfaces/macs/{self.mac}/local-ipv4s").split())
        except OSError as error:  # urllib's URLError and HTTPError are OSErrors
            LOG.info("%s: IMDS: %s", self.eni_id, error)
            return set()

    def _find_mac(self) -> str:
        imds = self.agent.imds
        for entry in imds.get("network/interfaces/macs/").split():
            mac = entry.rstrip("/")
            if imds.get(f"network/interfaces/macs/{mac}/interface-id").strip() == self.eni_id:
                return mac
        return ""

    def _change(
        self, action: str, ips: list[str], deadline: float, extra: dict[str, str] | None = None
    ) -> None:
        params = {"NetworkInterfaceId": self.eni_id, **(extra or {})}
        params.update({f"PrivateIpAddress.{n}": ip for n, ip in enumerate(ips, start=1)})
        self.agent.ec2.call(action, params, deadline)
        held = self.held if self.held is not None else set()
        if action == "AssignPrivateIpAddresses":
            held.update(ips)
        else:
            held.difference_update(ips)
        self.held = held
        now = time.monotonic()
        self._changed_at.update({ip: now for ip in ips})
        LOG.info("%s: %s %s", self.eni_id, action, " ".join(ips))

    def _fail(self, operations: list[Operation], code: int, error: Ec2Error) -> None:
        for op in operations:
            if not op.done.is_set():
                op.finish(AgentError(code, f"{error} (ENI {self.eni_id}, {self.interface})"))

    def _reconcile(self, deadline: float) -> None:
        self._refresh(deadline)
        held = self.held or set()
        desired = self.agent.live_addresses(self.interface)
        now = time.monotonic()
        settled = {
            ip
            for ip in held | desired
            if now - self._changed_at.get(ip, -1e9) >= self.agent.config.settle_seconds
        }
        managed = {ip for ip in held if ip != self.primary and self.manages(ip)}
        stale = sorted((managed - desired) & settled)
        missing = sorted((desired - held) & settled)
        if stale:
            LOG.info("%s: reconcile releases %s", self.interface, " ".join(stale))
            self._unassign([Operation("unassign", ip, deadline) for ip in stale])
        if missing:
            LOG.info("%s: reconcile restores %s", self.interface, " ".join(missing))
            restore = [Operation("assign", ip, deadline) for ip in missing]
            # Never take an address from another ENI here: a newer pod elsewhere may own it.
            self._assign_accepted(restore, allow_reassignment=False)
            for op in restore:
                if op.error:
                    LOG.warning("%s: could not restore %s: %s", self.interface, op.ip, op.error)
        self.reconciled.set()


# --- pod records -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PodAttachment:
    """One pod interface on a Multus network, as the CNI plugin reported it."""

    container_id: str
    ifname: str
    netns: str
    interface: str
    ips: tuple[str, ...]
    pod: str = ""

    @property
    def key(self) -> str:
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in self.container_id) + (
            "_" + "".join(c if c.isalnum() else "_" for c in self.ifname)
        )


class RecordStore:
    """Pod attachments on this node, one JSON file each (survives agent restarts)."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._lock = threading.Lock()
        os.makedirs(directory, exist_ok=True)
        self._records: dict[str, PodAttachment] = {}
        for name in os.listdir(directory):
            if name.endswith(".json"):
                try:
                    with open(os.path.join(directory, name), encoding="utf-8") as handle:
                        data = json.load(handle)
                    record = PodAttachment(**{**data, "ips": tuple(data["ips"])})
                    self._records[record.key] = record
                except (OSError, ValueError, TypeError, KeyError):
                    LOG.warning("ignoring unreadable record %s", name)

    def put(self, record: PodAttachment) -> None:
        path = os.path.join(self._directory, record.key + ".json")
        with self._lock:
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump({**record.__dict__, "ips": list(record.ips)}, handle)
            os.replace(path + ".tmp", path)
            self._records[record.key] = record

    def get(self, key: str) -> PodAttachment | None:
        with self._lock:
            return self._records.get(key)

    def remove(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self._directory, key + ".json"))

    def all(self) -> list[PodAttachment]:
        with self._lock:
            return list(self._records.values())


# --- the agent -------------------------------------------------------------------------------


class Agent:
    """Serves the CNI plugin's requests and reconciles the node's Multus ENIs."""

    def __init__(self, config: AgentConfig, imds: InstanceMetadata, ec2: Ec2Client) -> None:
        self.config = config
        self.imds = imds
        self.ec2 = ec2
        self.records = RecordStore(config.records_dir)
        self.workers: dict[str, EniWorker] = {}
        self.instance_type = ""
        self.ipv4_per_eni = 0

    def start(self) -> None:
        instance_id = self.imds.get("instance-id")
        self.instance_type = self.imds.get("instance-type")
        deadline = time.monotonic() + 120
        answer = self.ec2.call(
            "DescribeInstanceTypes", {"InstanceType.1": self.instance_type}, deadline
        )
        self.ipv4_per_eni = int(_texts(answer, "ipv4AddressesPerInterface")[0])
        for interface in self.config.interfaces:
            worker = EniWorker(self, interface, self._wait_for_eni(interface, instance_id))
            self.workers[interface] = worker
            worker.start()
        LOG.info(
            "instance %s (%s, %d IPv4 addresses per ENI): %s",
            instance_id,
            self.instance_type,
            self.ipv4_per_eni,
            ", ".join(f"{w.interface}={w.eni_id}" for w in self.workers.values()),
        )

    def _wait_for_eni(self, interface: str, instance_id: str) -> str:
        path = os.path.join(self.config.eni_state_dir, f"{interface}.eni")
        while True:
            try:
                with open(path, encoding="utf-8") as handle:
                    owner, eni_id = handle.read().split()
                if owner == instance_id:
                    return eni_id
                LOG.warning("%s belongs to %s, not %s; waiting", path, owner, instance_id)
            except (OSError, ValueError):
                LOG.info("waiting for the node bootstrap to write %s", path)
            time.sleep(2)

    def reconcile_all(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        operations = [
            worker.submit(Operation("reconcile", "", deadline)) for worker in self.workers.values()
        ]
        for operation in operations:
            operation.done.wait(max(0.0, deadline - time.monotonic()) + 1)
        return all(op.done.is_set() and op.error is None for op in operations)

    def live_addresses(self, interface: str) -> set[str]:
        """Addresses of the interface's recorded pods whose network namespace still exists;
        records of pods whose namespace is gone are dropped."""
        live: set[str] = set()
        for record in self.records.all():
            if record.interface != interface:
                continue
            if self._netns_exists(record.netns):
                live.update(record.ips)
            else:
                LOG.info("pod %s (%s) is gone; forgetting it", record.pod, record.container_id)
                self.records.remove(record.key)
        return live

    def _netns_exists(self, netns: str) -> bool:
        path = netns.replace("/var/run/", "/run/", 1) if netns.startswith("/var/run/") else netns
        if not path.startswith("/run/netns/"):
            return True  # a form we cannot check: never release a live pod's address
        return os.path.exists(self.config.netns_root + path)

    # CNI requests -----------------------------------------------------------------------

    def handle(self, request: dict[str, Any]) -> None:
        command = request.get("command")
        attachment = PodAttachment(
            container_id=str(request["container_id"]),
            ifname=str(request["ifname"]),
            netns=str(request.get("netns", "")),
            interface=str(request.get("interface", "")),
            ips=tuple(str(ip) for ip in request.get("ips", [])),
            pod=str(request.get("pod", "")),
        )
        if command == "ADD":
            self._add(attachment)
        elif command == "DEL":
            self._delete(attachment)
        elif command == "CHECK":
            self._check(attachment)
        else:
            raise AgentError(CNI_INVALID_CONFIG, f"unknown command {command!r}")

    def _worker(self, attachment: PodAttachment) -> EniWorker:
        worker = self.workers.get(attachment.interface)
        if worker is None:
            raise AgentError(
                CNI_INVALID_CONFIG,
                f"master interface {attachment.interface!r} is not a Multus ENI of this node "
                f"(known: {', '.join(sorted(self.workers)) or 'none yet'})",
            )
        outside = [ip for ip in attachment.ips if not worker.manages(ip)]
        if outside:
            raise AgentError(
                CNI_INVALID_CONFIG,
                f"{', '.join(outside)} outside the ranges managed on {attachment.interface} "
                f"({', '.join(self.config.interfaces[attachment.interface])})",
            )
        return worker

    def _add(self, attachment: PodAttachment) -> None:
        worker = self._worker(attachment)
        worker.touch(attachment.ips)
        self.records.put(attachment)
        deadline = time.monotonic() + self.config.add_timeout_seconds
        operations = [worker.submit(Operation("assign", ip, deadline)) for ip in attachment.ips]
        error = _wait(operations, deadline) or self._await_remap(worker, operations, deadline)
        if error:
            self.records.remove(attachment.key)
            raise error

    def _await_remap(
        self, worker: EniWorker, assigned: list[Operation], deadline: float
    ) -> AgentError | None:
        """Waits, at most until `deadline`, until IMDS lists the pod's addresses on the ENI.

        ADD assigns with AllowReassignment, and moving an address from another ENI is
        asynchronous: the EC2 API reference (AssignPrivateIpAddresses) says to check
        network/interfaces/macs/<mac>/local-ipv4s to confirm that the remapping is complete;
        until then the VPC may still deliver the address to the old node. Addresses that do not
        appear in time are unassigned again (queued on the worker, ahead of any retried ADD)
        and the ADD fails, so no address stays on the ENI for a pod that did not start. The
        wait runs in the request's thread: the worker goes on serving the ENI's other pods."""
        started = time.monotonic()
        waiting = {op.ip for op in assigned}
        read_after = max((op.finished_at for op in assigned), default=started)
        while waiting:
            waiting -= worker.addresses_in_imds(read_after)
            poll = self.config.remap_poll_seconds
            if not waiting or time.monotonic() + poll > deadline:
                break
            time.sleep(poll)
            read_after = time.monotonic()
        if not waiting:
            LOG.info(
                "%s: %s on the ENI after %.1f s",
                worker.eni_id,
                " ".join(sorted(op.ip for op in assigned)),
                time.monotonic() - started,
            )
            return None
        late = sorted(waiting)
        LOG.warning("%s: %s not in IMDS local-ipv4s in time; unassigning", worker.eni_id, late)
        release = time.monotonic() + self.config.del_timeout_seconds
        for ip in late:
            worker.submit(Operation("unassign", ip, release))
        return AgentError(
            CNI_TRY_AGAIN_LATER,
            f"{', '.join(late)} assigned to {worker.eni_id} ({worker.interface}), but IMDS "
            f"network/interfaces/macs/{worker.mac or '?'}/local-ipv4s did not list it within "
            f"{time.monotonic() - started:.0f} s: the move from its previous ENI is not "
            "complete; it is released again",
        )

    def _delete(self, attachment: PodAttachment) -> None:
        record = self.records.get(attachment.key)
        if record is None:
            return  # never added, or already deleted: DEL is idempotent
        worker = self.workers.get(record.interface)
        if worker is not None:
            deadline = time.monotonic() + self.config.del_timeout_seconds
            worker.touch(record.ips)
            operations = [worker.submit(Operation("unassign", ip, deadline)) for ip in record.ips]
            error = _wait(operations, deadline)
            if error:  # the reconcile releases it later; a failing DEL would only be retried
                LOG.warning("DEL %s: %s; left to the reconcile", record.pod, error.message)
        self.records.remove(record.key)

    def _check(self, attachment: PodAttachment) -> None:
        worker = self._worker(attachment)
        record = self.records.get(attachment.key)
        if record is None or set(record.ips) != set(attachment.ips):
            raise AgentError(
                ERROR_NOT_ASSIGNED, f"no record of {attachment.ips} for this container"
            )
        missing = [ip for ip in record.ips if ip not in (worker.held or set())]
        if missing:
            raise AgentError(
                ERROR_NOT_ASSIGNED, f"{', '.join(missing)} not assigned to {worker.eni_id}"
            )


def _wait(operations: list[Operation], deadline: float) -> AgentError | None:
    for operation in operations:
        if not operation.done.wait(max(0.0, deadline - time.monotonic()) + 5):
            return AgentError(CNI_TRY_AGAIN_LATER, f"{operation.ip}: no answer from EC2 in time")
        if operation.error:
            return operation.error
    return None


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
            reply = {"ok": False, "code": CNI_INVALID_CONFIG, "msg": f"bad request: {error}"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of pods connects at once; the default backlog is 5

    def __init__(self, path: str, agent: Agent) -> None:
        self.agent = agent
        super().__init__(path, _RequestHandler)


def serve(config: AgentConfig) -> None:
    imds = InstanceMetadata(os.environ.get("MULTUS_IMDS_URL", "http://169.254.169.254"))
    region = imds.get("placement/region")
    endpoint = os.environ.get("MULTUS_EC2_ENDPOINT") or (
        f"https://ec2.{region}.{imds.get('services/domain')}"
    )
    agent = Agent(config, imds, Ec2Client(imds, region, endpoint))
    for stale in (config.ready_marker, config.socket_path):
        if os.path.lexists(stale):
            os.remove(stale)
    agent.start()
    os.makedirs(os.path.dirname(config.socket_path), exist_ok=True)
    server = _Server(config.socket_path, agent)
    os.chmod(config.socket_path, 0o600)  # the plugin runs as root on the host
    threading.Thread(target=server.serve_forever, name="cni-socket", daemon=True).start()
    while not agent.reconcile_all(timeout=120):
        LOG.warning("first reconcile incomplete; retrying")
    with open(config.ready_marker, "w", encoding="utf-8") as marker:
        marker.write(f"{os.getpid()}\n")
    LOG.info("ready: serving %s", config.socket_path)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(config.reconcile_seconds):
        agent.reconcile_all(timeout=config.reconcile_seconds)
    server.server_close()


def main(argv: list[str]) -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(threadName)s %(message)s"
    )
    if len(argv) != 2:
        print(f"usage: {argv[0]} CONFIG.json", file=sys.stderr)
        return 2
    serve(AgentConfig.load(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
