"""One thread per Multus ENI: serializes its EC2 changes and coalesces concurrent requests."""

from __future__ import annotations

import ipaddress
import logging
import math
import queue
import threading
import time
import urllib.error
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ..cni_plugin import ADDRESS_IN_USE, EC2_REFUSED, ENI_FULL, TRY_AGAIN_LATER
from .address_family import FAMILIES, IPV4, AddressFamily, canonical, family_of
from .config import AgentConfig, AgentError
from .ec2_query import Ec2Client, Ec2Error, local_name
from .imds import InstanceMetadata
from .metrics import AgentMetrics

LOG = logging.getLogger("multus-pod-ips")
#: EC2's answer to AssignPrivateIpAddresses without AllowReassignment for an address that
#: another ENI holds (EC2 API reference, "Error codes for the Amazon EC2 API"); the emulator
#: answers AssignIpv6Addresses alike (testing_support/eni_addresses.py).
ADDRESS_ON_ANOTHER_ENI = "InvalidIPAddress.InUse"


class WorkerHost(Protocol):
    """What a worker needs of the node agent that runs it (node_agent.Agent): the agent's
    config and clients, the instance type's limits and which addresses pods still hold."""

    config: AgentConfig
    ec2: Ec2Client
    imds: InstanceMetadata
    metrics: AgentMetrics
    instance_type: str

    def addresses_per_eni(self, family: AddressFamily) -> int: ...

    def live_addresses(self, interface: str) -> set[str]: ...

    def kept_floating(self, interface: str, held: set[str], live: set[str]) -> set[str]: ...


@dataclass
class Operation:
    """One address to assign or unassign, or a reconcile; `done` is set when it is settled.
    reassign: an assign may take the address from another ENI (AllowReassignment)."""

    kind: str  # "assign", "unassign" or "reconcile"
    ip: str
    deadline: float
    reassign: bool = True
    done: threading.Event = field(default_factory=threading.Event)
    error: AgentError | None = None
    finished_at = 0.0  # time.monotonic() when it was settled

    def finish(self, error: AgentError | None = None) -> None:
        self.error = error
        self.finished_at = time.monotonic()
        self.done.set()


class EniWorker(threading.Thread):
    """Serializes every EC2 change to one ENI and coalesces concurrent requests, per address
    family (a batch makes at most one assign and one unassign call per family).

    The worker thread changes the ENI; request threads read what it holds (CHECK), mark
    addresses as in flight (touch) and wait for IMDS (addresses_in_imds). What both read or
    write (the addresses held, the primary, the in-flight times, the MAC) is behind `_lock`
    and leaves it only as copies."""

    def __init__(self, agent: WorkerHost, interface: str, eni_id: str) -> None:
        super().__init__(name=f"eni-{interface}", daemon=True)
        self.agent = agent
        self.interface = interface
        self.eni_id = eni_id
        self.ranges = [ipaddress.ip_network(cidr) for cidr in agent.config.interfaces[interface]]
        #: The families of the ranges: only their addresses are read from IMDS.
        self.families = tuple(
            f for f in FAMILIES if any(r.version == f.version for r in self.ranges)
        )
        self._lock = threading.Lock()
        self._held: set[str] | None = None  # every private IPv4 and IPv6 address of the ENI
        self._primary = ""
        self._mac = ""  # the ENI's key under IMDS network/interfaces/macs/, found on first use
        self._changed_at: dict[str, float] = {}
        self._imds_read_lock = threading.Lock()  # one IMDS read at a time (see below)
        self._imds_read: tuple[float, set[str]] = (-1.0, set())  # (started at, addresses)
        self.reconciled = threading.Event()
        self._queue: queue.Queue[Operation] = queue.Queue()

    @property
    def held(self) -> set[str] | None:
        """The ENI's private IPv4 and IPv6 addresses as last read or changed (None before the
        first read)."""
        with self._lock:
            return None if self._held is None else set(self._held)

    @property
    def primary(self) -> str:
        with self._lock:
            return self._primary

    @property
    def mac(self) -> str:
        with self._lock:
            return self._mac

    def submit(self, operation: Operation) -> Operation:
        self._queue.put(operation)
        return operation

    def touch(self, ips: tuple[str, ...]) -> None:
        """Leaves these addresses to a request in progress: the reconcile skips them until
        they settle (also covers EC2's eventually consistent reads after a change)."""
        now = time.monotonic()
        with self._lock:
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
                code = TRY_AGAIN_LATER if retryable else EC2_REFUSED
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
        for family, group in _by_family(op for op in last.values() if op.kind == "unassign"):
            self._unassign(family, group)
        for family, group in _by_family(op for op in last.values() if op.kind == "assign"):
            self._assign(family, group)
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
                error = AgentError(TRY_AGAIN_LATER, str(failure))
            for operation in reconciles:
                operation.finish(error)

    def _refresh(self, deadline: float) -> None:
        root = self.agent.ec2.call(
            "DescribeNetworkInterfaces", {"NetworkInterfaceId.1": self.eni_id}, deadline
        )
        held, primary = set(), ""
        for item in root.iter():
            if local_name(item.tag) != "item":
                continue
            fields = {local_name(child.tag): (child.text or "") for child in item}
            if "privateIpAddress" in fields and "primary" in fields:
                held.add(canonical(fields["privateIpAddress"]))
                if fields["primary"] == "true":
                    primary = canonical(fields["privateIpAddress"])
        for address_set in root.iter():
            if local_name(address_set.tag) == "ipv6AddressesSet":
                held.update(
                    canonical(child.text or "")
                    for item in address_set
                    for child in item
                    if local_name(child.tag) == "ipv6Address"
                )
        with self._lock:
            self._held, self._primary = held, primary

    def _unassign(self, family: AddressFamily, operations: list[Operation]) -> None:
        if not operations:
            return
        ips = [op.ip for op in operations]
        deadline = max(op.deadline for op in operations)
        try:
            self._change(family, family.unassign_action, ips, deadline)
        except Ec2Error as error:
            # One address no longer on this ENI (moved with its pod) fails the whole call:
            # ask EC2 what the ENI holds and retry only the addresses still there.
            if error.retryable:
                self._fail(operations, TRY_AGAIN_LATER, error)
                return
            self._refresh(deadline)
            held = self.held or set()
            remaining = [op for op in operations if op.ip in held]
            if remaining and len(remaining) < len(operations):
                self._unassign(family, remaining)
            elif remaining:
                self._fail(operations, EC2_REFUSED, error)
                return
        for op in operations:
            if not op.done.is_set():
                op.finish()

    def _assign(self, family: AddressFamily, operations: list[Operation]) -> None:
        if not operations:
            return
        held = {ip for ip in self.held or set() if family_of(ip) is family}
        limit = self.agent.addresses_per_eni(family)
        free = limit - len(held)
        accepted: list[Operation] = []
        for op in operations:
            if op.ip in held or free > 0:
                accepted.append(op)
                free -= op.ip not in held
            else:
                op.finish(
                    AgentError(
                        ENI_FULL,
                        f"ENI {self.eni_id} ({self.interface}) already holds "
                        f"{limit - free} of the {limit} {family.name} addresses an ENI of "
                        f"{self.agent.instance_type} can have; {op.ip} cannot be added. Spread "
                        "Multus pods over more nodes or allow larger instance types.",
                    )
                )
        if not family.reassignable:  # one call: there is no AllowReassignment to choose
            self._assign_accepted(family, accepted, allow_reassignment=False)
            return
        self._assign_accepted(
            family, [op for op in accepted if op.reassign], allow_reassignment=True
        )
        self._assign_accepted(
            family, [op for op in accepted if not op.reassign], allow_reassignment=False
        )

    def _assign_accepted(
        self, family: AddressFamily, operations: list[Operation], allow_reassignment: bool
    ) -> None:
        if not operations:
            return
        deadline = max(op.deadline for op in operations)
        reassignment = (
            {"AllowReassignment": "true" if allow_reassignment else "false"}
            if family.reassignable
            else {}
        )
        try:
            self._change(
                family, family.assign_action, [op.ip for op in operations], deadline, reassignment
            )
        except Ec2Error as error:
            if error.retryable:
                self._fail(operations, TRY_AGAIN_LATER, error)
            elif len(operations) > 1:  # isolate the address EC2 refuses
                for op in operations:
                    self._assign_accepted(family, [op], allow_reassignment)
            else:
                self._refresh(deadline)
                if operations[0].ip not in (self.held or set()):
                    if error.code == ADDRESS_ON_ANOTHER_ENI:
                        if operations[0].reassign and not family.reassignable:
                            self._refuse_unmovable(operations[0], error)
                        else:
                            self._refuse_taken(operations[0], error)
                        return
                    code = ENI_FULL if "LimitExceeded" in error.code else EC2_REFUSED
                    self._fail(operations, code, error)
                    return
        for op in operations:
            if not op.done.is_set():
                op.finish()

    def addresses_in_imds(self, read_after: float) -> set[str]:
        """The addresses IMDS lists for this ENI (none while IMDS cannot say), from
        a read that started at `read_after` (time.monotonic()) or later. Concurrent waiters
        share one read: IMDS throttles queries per instance (EC2 User Guide, "Retrieve instance
        metadata", Query throttling), and a burst of pods waits at once."""
        with self._imds_read_lock:
            if self._imds_read[0] < read_after:
                started = time.monotonic()
                try:
                    listed = set(self._read_imds_addresses() or ())
                except OSError as error:  # urllib's URLError and HTTPError are OSErrors
                    LOG.info("%s: IMDS: %s", self.eni_id, error)
                    listed = set()
                self._imds_read = (started, listed)
            return self._imds_read[1]

    def _read_imds_addresses(self) -> list[str] | None:
        """IMDS network/interfaces/macs/<mac>/local-ipv4s of this ENI, and its ipv6s when the
        ENI has IPv6 ranges (None when IMDS does not list the ENI); OSError when IMDS does not
        answer."""
        mac = self.mac or self._find_mac()
        if not mac:
            return None
        with self._lock:
            self._mac = mac
        return [ip for family in self.families for ip in self._read_imds_key(mac, family)]

    def _read_imds_key(self, mac: str, family: AddressFamily) -> list[str]:
        try:
            listed = self.agent.imds.get(f"network/interfaces/macs/{mac}/{family.imds_key}")
            return [canonical(ip) for ip in listed.split()]
        except urllib.error.HTTPError as error:
            if error.code == 404 and family is not IPV4:  # IMDS omits ipv6s without any
                return []
            raise

    def _find_mac(self) -> str:
        imds = self.agent.imds
        for entry in imds.get("network/interfaces/macs/").split():
            mac = entry.rstrip("/")
            if imds.get(f"network/interfaces/macs/{mac}/interface-id").strip() == self.eni_id:
                return mac
        return ""

    def _change(
        self,
        family: AddressFamily,
        action: str,
        ips: list[str],
        deadline: float,
        extra: dict[str, str] | None = None,
    ) -> None:
        params = {"NetworkInterfaceId": self.eni_id, **(extra or {})}
        parameter = family.address_parameter
        params.update({f"{parameter}.{n}": ip for n, ip in enumerate(ips, start=1)})
        self.agent.ec2.call(action, params, deadline)
        now = time.monotonic()
        with self._lock:
            held = self._held if self._held is not None else set()
            if action == family.assign_action:
                held.update(ips)
            else:
                held.difference_update(ips)
            self._held = held
            self._changed_at.update({ip: now for ip in ips})
        LOG.info("%s: %s %s", self.eni_id, action, " ".join(ips))

    def _refuse_taken(self, operation: Operation, error: Ec2Error) -> None:
        operation.finish(
            AgentError(
                ADDRESS_IN_USE,
                f"fixed address {operation.ip} is assigned to another ENI, so a pod on another "
                f"node still holds it (EC2: {error}); it is not taken from there: a fixed address "
                "belongs to one pod at a time. The kubelet retries this ADD, which succeeds once "
                "that pod's DEL released the address (or its node is gone)",
            )
        )

    def _refuse_unmovable(self, operation: Operation, error: Ec2Error) -> None:
        operation.finish(
            AgentError(
                TRY_AGAIN_LATER,
                f"{operation.ip} is assigned to another ENI (EC2: {error}), and EC2 moves no "
                "IPv6 address between ENIs (AssignIpv6Addresses has no AllowReassignment): the "
                "pod that had it on another node has not been deleted yet. The kubelet retries "
                "this ADD, which succeeds once that pod's DEL released the address",
            )
        )

    def _fail(self, operations: list[Operation], code: int, error: Ec2Error) -> None:
        for op in operations:
            if not op.done.is_set():
                op.finish(AgentError(code, f"{error} (ENI {self.eni_id}, {self.interface})"))

    def _reconcile(self, deadline: float) -> None:
        """Compares the ENI with the node's live pods and corrects the difference. The ENI's
        addresses come from EC2 only on the first reconcile (the record of what the ENI holds,
        its primary address included, starts from EC2's answer) and when IMDS contradicts the
        record (_confirm_with_imds): at rest a reconcile costs no EC2 request."""
        if self.held is None:
            self._refresh(deadline)
        else:
            self._confirm_with_imds(deadline)
        desired = self.agent.live_addresses(self.interface)
        now = time.monotonic()
        with self._lock:
            held, primary = set(self._held or ()), self._primary
            changed_at = dict(self._changed_at)
        desired |= self.agent.kept_floating(self.interface, held, desired)  # floating.py
        settled = {
            ip
            for ip in held | desired
            if now - changed_at.get(ip, -1e9) >= self.agent.config.settle_seconds
        }
        managed = {ip for ip in held if ip != primary and self.manages(ip)}
        stale = sorted((managed - desired) & settled)
        missing = sorted((desired - held) & settled)
        corrections = self.agent.metrics.reconcile_corrections
        if stale:
            corrections.inc(self.interface, "released", amount=len(stale))
            LOG.info("%s: reconcile releases %s", self.interface, " ".join(stale))
            release = (Operation("unassign", ip, deadline) for ip in stale)
            for family, group in _by_family(release):
                self._unassign(family, group)
        if missing:
            corrections.inc(self.interface, "restored", amount=len(missing))
            LOG.info("%s: reconcile restores %s", self.interface, " ".join(missing))
            restore = [Operation("assign", ip, deadline, reassign=False) for ip in missing]
            # Never take an address from another ENI here: a newer pod elsewhere may own it.
            for family, group in _by_family(restore):
                self._assign_accepted(family, group, allow_reassignment=False)
            for op in restore:
                if op.error:
                    LOG.warning("%s: could not restore %s: %s", self.interface, op.ip, op.error)
        self.reconciled.set()

    def _confirm_with_imds(self, deadline: float) -> None:
        """Checks the record of the ENI's addresses against IMDS local-ipv4s (and ipv6s, for
        the families of its ranges), which costs no EC2 request but lags EC2: a change shows
        there only some time after EC2 made it (EC2 API reference, AssignPrivateIpAddresses:
        remapping is asynchronous; check network/interfaces/macs/mac/local-ipv4s to confirm it
        is complete). An address on which the two disagree within the settle time after the
        agent changed it is IMDS catching up; past it, or when IMDS does not list the ENI, the
        record is wrong (a change made outside the agent, a call whose answer was lost): EC2 is
        asked and its answer replaces the record. OSError when IMDS does not answer: the
        reconcile fails, EC2 is not asked."""
        listed = self._read_imds_addresses()
        now = time.monotonic()
        with self._lock:
            held = {ip for ip in self._held or () if family_of(ip) in self.families}
            changed_at = dict(self._changed_at)
        settle = self.agent.config.settle_seconds
        disputed = sorted(
            ip
            for ip in held.symmetric_difference(listed or ())
            if now - changed_at.get(ip, -math.inf) >= settle
        )
        if listed is None or disputed:
            self.agent.metrics.reconcile_corrections.inc(self.interface, "record")
            LOG.warning(
                "%s: IMDS addresses %s the record (%s); asking EC2",
                self.eni_id,
                "does not list" if listed is None else "contradicts",
                " ".join(disputed) or "no entry for the ENI",
            )
            self._refresh(deadline)


def _by_family(operations: Iterable[Operation]) -> Iterator[tuple[AddressFamily, list[Operation]]]:
    """The operations per address family, IPv4 first; families without one left out."""
    pending = list(operations)
    for family in FAMILIES:
        group = [op for op in pending if family_of(op.ip) is family]
        if group:
            yield family, group
