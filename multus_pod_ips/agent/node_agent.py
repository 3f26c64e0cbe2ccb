"""The agent: starts a worker per Multus ENI, serves the CNI requests, reconciles."""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from typing import Any

from ..cni_plugin import ADDRESS_IN_USE, INVALID_CONFIG, NOT_ASSIGNED, TRY_AGAIN_LATER
from .address_family import IPV4, IPV6, AddressFamily, canonical, family_of
from .config import AgentConfig, AgentError
from .ec2_query import Ec2Client, texts
from .eni_worker import EniWorker, Operation
from .floating import ArpWatcher, FloatingAddresses
from .imds import InstanceMetadata
from .metrics import AgentMetrics
from .pod_routes import point_routes
from .records import PodAttachment, RecordStore

LOG = logging.getLogger("multus-pod-ips")


class Agent:
    """Serves the CNI plugin's requests and reconciles the node's Multus ENIs."""

    def __init__(
        self,
        config: AgentConfig,
        imds: InstanceMetadata,
        ec2: Ec2Client,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self.config = config
        self.imds = imds
        self.ec2 = ec2
        self.records = RecordStore(config.records_dir)
        # Two ADDs of one fixed address at once would both find it free: check and record it
        # as one step.
        self._claim_lock = threading.Lock()
        self.workers: dict[str, EniWorker] = {}
        self.instance_type = ""
        self.ipv4_per_eni = 0
        self.ipv6_per_eni = 0
        self.metrics = metrics or AgentMetrics()
        self.metrics.slots = self.address_slots
        self.floating = FloatingAddresses(self, config.floating_addresses)

    def addresses_per_eni(self, family: AddressFamily) -> int:
        """The instance type's limit of addresses of this family per ENI."""
        return self.ipv4_per_eni if family is IPV4 else self.ipv6_per_eni

    def address_slots(self) -> dict[str, tuple[int, int]]:
        """Per Multus interface whose ENI's addresses are known: (used, free) private IPv4
        address slots of its ENI."""
        slots = {}
        for interface, worker in self.workers.items():
            held = worker.held
            if held is not None:
                used = sum(family_of(ip) is IPV4 for ip in held)
                slots[interface] = (used, max(0, self.ipv4_per_eni - used))
        return slots

    def start(self) -> None:
        instance_id = self.imds.get("instance-id")
        self.instance_type = self.imds.get("instance-type")
        deadline = time.monotonic() + 120
        answer = self.ec2.call(
            "DescribeInstanceTypes", {"InstanceType.1": self.instance_type}, deadline
        )
        self.ipv4_per_eni = int(texts(answer, IPV4.per_eni_limit_field)[0])
        # Absent for instance types without IPv6: no IPv6 address fits then.
        self.ipv6_per_eni = int((texts(answer, IPV6.per_eni_limit_field) or ["0"])[0])
        for interface in self.config.interfaces:
            worker = EniWorker(self, interface, self._wait_for_eni(interface, instance_id))
            self.workers[interface] = worker
            worker.start()
        for interface in self.floating.addresses:
            ArpWatcher(interface, self.floating).start()
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

    def kept_floating(self, interface: str, held: set[str], live: set[str]) -> set[str]:
        return self.floating.kept(interface, held, live)

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
            ips=_addresses(request.get("ips", [])),
            pod=str(request.get("pod", "")),
            fixed=request.get("fixed") is True,
        )
        if command == "ADD":
            self._add(attachment, _ranges(request.get("routed_ranges", [])))
        elif command == "DEL":
            self._delete(attachment)
        elif command == "CHECK":
            self._check(attachment)
        else:
            raise AgentError(INVALID_CONFIG, f"unknown command {command!r}")

    def _worker(self, attachment: PodAttachment) -> EniWorker:
        worker = self.workers.get(attachment.interface)
        if worker is None:
            raise AgentError(
                INVALID_CONFIG,
                f"master interface {attachment.interface!r} is not a Multus ENI of this node "
                f"(known: {', '.join(sorted(self.workers)) or 'none yet'})",
            )
        outside = [ip for ip in attachment.ips if not worker.manages(ip)]
        if outside:
            raise AgentError(
                INVALID_CONFIG,
                f"{', '.join(outside)} outside the ranges managed on {attachment.interface} "
                f"({', '.join(self.config.interfaces[attachment.interface])})",
            )
        return worker

    def _add(self, attachment: PodAttachment, routed_ranges: tuple[str, ...] = ()) -> None:
        worker = self._worker(attachment)
        self._check_routed_ranges(attachment.interface, routed_ranges)
        started = time.monotonic()
        worker.touch(attachment.ips)
        with self._claim_lock:
            if attachment.fixed:
                self._check_fixed(attachment)
            self.records.put(attachment)
        deadline = started + self.config.add_timeout_seconds
        # Whereabouts leases an address to one pod, so taking it from another ENI follows the
        # pod that has it now. Nothing leases a fixed address: it is never taken from an ENI.
        operations = [
            worker.submit(Operation("assign", ip, deadline, reassign=not attachment.fixed))
            for ip in attachment.ips
        ]
        error = _wait(operations, deadline) or self._await_remap(worker, operations, deadline)
        if error is None and routed_ranges:
            # Only once the pod's addresses are here: a failed ADD leaves the route with the
            # node that still serves the range.
            try:
                point_routes(
                    self.ec2,
                    self.config.route_tables.get(attachment.interface, []),
                    routed_ranges,
                    worker.eni_id,
                    deadline,
                )
            except AgentError as failure:
                error = failure
        self.metrics.assign_seconds.observe(time.monotonic() - started, worker.interface)
        if error:
            self.records.remove(attachment.key)
            raise error

    def _check_routed_ranges(self, interface: str, routed_ranges: tuple[str, ...]) -> None:
        """Each range the pod asks for is one of the network's, and the network has route
        tables to put it in."""
        allowed = self.config.routed_ranges.get(interface, [])
        refused = [cidr for cidr in routed_ranges if cidr not in allowed]
        if refused:
            raise AgentError(
                INVALID_CONFIG,
                f"{', '.join(refused)} is not a pod-routed range of {interface} "
                f"({', '.join(allowed) or 'none'}): ask for one of "
                "multus.networks[].pod_routed_ranges",
            )
        if routed_ranges and not self.config.route_tables.get(interface):
            raise AgentError(
                INVALID_CONFIG, f"no route tables configured for {interface}'s routed ranges"
            )

    def _check_fixed(self, attachment: PodAttachment) -> None:
        """A fixed address lies in its interface's static ranges (not in Whereabouts' dynamic
        part) and no other live pod of this node holds it."""
        ranges = self.config.static_ranges.get(attachment.interface, [])
        outside = [
            ip
            for ip in attachment.ips
            if not any(ipaddress.ip_address(ip) in ipaddress.ip_network(r) for r in ranges)
        ]
        if outside:
            raise AgentError(
                INVALID_CONFIG,
                f"fixed address {', '.join(outside)} is not in a static range of "
                f"{attachment.interface} ({', '.join(ranges) or 'none'}): ask for an address "
                "of the subnet's multus.networks[].subnets[].static_range; the rest of the "
                "reservation belongs to Whereabouts",
            )
        floating = [
            ip for ip in attachment.ips if self.floating.is_floating(attachment.interface, ip)
        ]
        if floating:
            raise AgentError(
                INVALID_CONFIG,
                f"fixed address {', '.join(floating)} is a floating address of "
                f"{attachment.interface} (multus.networks[].subnets[].floating_addresses): it "
                "moves to the pod that announces it (gratuitous ARP), never to a pod that asks "
                "for it; ask for another address of the static range",
            )
        for record in self.records.all():
            shared = sorted(set(record.ips) & set(attachment.ips))
            if (
                shared
                and record.key != attachment.key
                and record.interface == attachment.interface
                and self._netns_exists(record.netns)
            ):
                raise AgentError(
                    ADDRESS_IN_USE,
                    f"fixed address {', '.join(shared)} is held by pod {record.pod} (container "
                    f"{record.container_id}) on this node: a fixed address belongs to one pod at "
                    "a time; the kubelet retries this ADD, which succeeds once that pod is gone",
                )

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
        answered_at = max((op.finished_at for op in assigned), default=started)
        read_after = answered_at
        while waiting:
            waiting -= worker.addresses_in_imds(read_after)
            poll = self.config.remap_poll_seconds
            if not waiting or time.monotonic() + poll > deadline:
                break
            time.sleep(poll)
            read_after = time.monotonic()
        if not waiting:
            self.metrics.imds_lag_seconds.observe(
                max(0.0, time.monotonic() - answered_at), worker.interface
            )
            LOG.info(
                "%s: %s on the ENI after %.1f s",
                worker.eni_id,
                " ".join(sorted(op.ip for op in assigned)),
                time.monotonic() - started,
            )
            return None
        late = sorted(waiting)
        LOG.warning("%s: %s not in IMDS in time; unassigning", worker.eni_id, late)
        release = time.monotonic() + self.config.del_timeout_seconds
        for ip in late:
            worker.submit(Operation("unassign", ip, release))
        return AgentError(
            TRY_AGAIN_LATER,
            f"{', '.join(late)} assigned to {worker.eni_id} ({worker.interface}), but IMDS "
            f"network/interfaces/macs/{worker.mac or '?'}/"
            f"{'/'.join(sorted({family_of(ip).imds_key for ip in late}))} did not list it within "
            f"{time.monotonic() - started:.0f} s: the move from its previous ENI is not "
            "complete; it is released again",
        )

    def _delete(self, attachment: PodAttachment) -> None:
        record = self.records.get(attachment.key)
        if record is None:
            return  # never added, or already deleted: DEL is idempotent
        worker = self.workers.get(record.interface)
        if worker is not None:
            started = time.monotonic()
            deadline = started + self.config.del_timeout_seconds
            worker.touch(record.ips)
            operations = [worker.submit(Operation("unassign", ip, deadline)) for ip in record.ips]
            error = _wait(operations, deadline)
            self.metrics.unassign_seconds.observe(time.monotonic() - started, worker.interface)
            if error:  # the reconcile releases it later; a failing DEL would only be retried
                LOG.warning("DEL %s: %s; left to the reconcile", record.pod, error.message)
        self.records.remove(record.key)

    def _check(self, attachment: PodAttachment) -> None:
        worker = self._worker(attachment)
        record = self.records.get(attachment.key)
        if record is None or set(record.ips) != set(attachment.ips):
            raise AgentError(NOT_ASSIGNED, f"no record of {attachment.ips} for this container")
        held = worker.held or set()
        missing = [ip for ip in record.ips if ip not in held]
        if missing:
            raise AgentError(NOT_ASSIGNED, f"{', '.join(missing)} not assigned to {worker.eni_id}")


def _wait(operations: list[Operation], deadline: float) -> AgentError | None:
    for operation in operations:
        if not operation.done.wait(max(0.0, deadline - time.monotonic()) + 5):
            return AgentError(TRY_AGAIN_LATER, f"{operation.ip}: no answer from EC2 in time")
        if operation.error:
            return operation.error
    return None


def _ranges(cidrs: Any) -> tuple[str, ...]:
    """The request's routed ranges in their canonical form; INVALID_CONFIG for one that is
    not an IPv4 CIDR."""
    try:
        return tuple(str(ipaddress.IPv4Network(str(cidr))) for cidr in cidrs)
    except (ValueError, TypeError) as error:
        raise AgentError(INVALID_CONFIG, f"not an IPv4 CIDR: {error}") from None


def _addresses(ips: list[Any]) -> tuple[str, ...]:
    """The request's addresses in their canonical form; INVALID_CONFIG for one that is none."""
    try:
        return tuple(canonical(str(ip)) for ip in ips)
    except ValueError as error:
        raise AgentError(INVALID_CONFIG, f"not an IP address: {error}") from None
