"""Agent parts without processes: request signing, records, netns liveness, the ENI worker's
batching against a scripted EC2."""

from __future__ import annotations

import threading
import time
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from multus_pod_ips.agent.config import AgentError
from multus_pod_ips.agent.ec2_query import Credentials, Ec2Client, Ec2Error
from multus_pod_ips.agent.eni_worker import Operation
from multus_pod_ips.agent.node_agent import Agent
from multus_pod_ips.agent.records import PodAttachment, RecordStore
from multus_pod_ips.cni_plugin import ADDRESS_IN_USE, ENI_FULL
from testing_support.multus_emulator import NODE_CREDENTIALS, REGION, signature_error
from tests.unit.multus_pod_ips.fakes import PRIMARY_IP, ScriptedEc2, config, settle, worker_for


def test_requests_queued_during_a_call_go_out_together(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2)
    deadline = time.monotonic() + 30
    first = worker.submit(Operation("assign", "10.0.4.33", deadline))
    assert settle([first]) == [None]
    ec2.gate.clear()
    blocking = worker.submit(Operation("assign", "10.0.4.34", deadline))
    time.sleep(0.2)  # the worker is now inside its call
    queued = [worker.submit(Operation("assign", f"10.0.4.{h}", deadline)) for h in (35, 36, 37)]
    ec2.gate.set()

    assert settle([blocking, *queued]) == [None] * 4
    assigns = [params for action, params in ec2.calls if action == "AssignPrivateIpAddresses"]
    assert [sorted(v for k, v in p.items() if k.startswith("Private")) for p in assigns] == [
        ["10.0.4.33"],
        ["10.0.4.34"],
        ["10.0.4.35", "10.0.4.36", "10.0.4.37"],
    ]
    assert all(p["AllowReassignment"] == "true" for p in assigns)


def test_an_unassign_superseded_by_an_assign_of_the_same_address_keeps_it(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.40"})
    worker = worker_for(tmp_path, ec2)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    operations = [
        worker.submit(Operation("unassign", "10.0.4.40", deadline)),
        worker.submit(Operation("assign", "10.0.4.40", deadline)),
    ]
    ec2.gate.set()

    assert settle(operations) == [None, None]
    assert ec2.secondaries == {"10.0.4.40"}
    assert "UnassignPrivateIpAddresses" not in [action for action, _ in ec2.calls]


def test_addresses_beyond_the_per_eni_limit_fail_and_the_rest_are_assigned(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})  # primary + 1 secondary of 4
    worker = worker_for(tmp_path, ec2, limit=4)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    operations = [
        worker.submit(Operation("assign", f"10.0.4.{host}", deadline)) for host in (34, 35, 36)
    ]
    ec2.gate.set()

    errors = settle(operations)
    assert errors[:2] == [None, None]
    assert errors[2] is not None and errors[2].code == ENI_FULL
    assert "holds 4 of the 4 IPv4 addresses" in errors[2].message
    assert ec2.secondaries == {"10.0.4.33", "10.0.4.34", "10.0.4.35"}


def test_one_refused_address_does_not_fail_the_others_in_its_batch(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    ec2.failures = [Ec2Error("InvalidParameterValue", "bad", retryable=False)] * 2
    operations = [
        worker.submit(Operation("assign", f"10.0.4.{host}", deadline)) for host in (41, 42)
    ]
    ec2.gate.set()

    errors = settle(operations)
    # The batch fails, then each address alone: the first single fails, the second works.
    assert errors[0] is not None and "InvalidParameterValue" in errors[0].message
    assert errors[1] is None
    assert ec2.secondaries == {"10.0.4.42"}


def test_requests_are_signed_as_ec2_expects(tmp_path: Path) -> None:
    client = Ec2Client(imds=None, region=REGION, endpoint="http://127.0.0.1:8999")  # type: ignore[arg-type]
    client._credentials = Credentials(
        NODE_CREDENTIALS.access_key,
        NODE_CREDENTIALS.secret_key,
        NODE_CREDENTIALS.token,
        expires_at=time.time() + 3600,
    )
    body = "Action=AssignPrivateIpAddresses&Version=2016-11-15&PrivateIpAddress.1=10.0.4.33"
    headers = Message()
    for name, value in {**client._signed_headers(body), "Host": "127.0.0.1:8999"}.items():
        headers[name] = value

    assert signature_error("http://127.0.0.1:8999/", headers, body.encode(), NODE_CREDENTIALS) == ""
    assert (
        signature_error("http://127.0.0.1:8999/", headers, body.encode() + b"0", NODE_CREDENTIALS)
        == "signature does not match"
    )


def test_records_survive_a_restart_and_go_when_removed(tmp_path: Path) -> None:
    record = PodAttachment("c1", "net1", "/var/run/netns/cni-c1", "multus1", ("10.0.4.33",), "a/b")
    RecordStore(str(tmp_path)).put(record)

    reloaded = RecordStore(str(tmp_path))
    assert reloaded.all() == [record]
    reloaded.remove(record.key)
    assert RecordStore(str(tmp_path)).all() == []


@pytest.mark.parametrize(
    ("netns", "exists", "alive"),
    [
        ("/var/run/netns/cni-1", True, True),
        ("/run/netns/cni-1", True, True),
        ("/var/run/netns/cni-1", False, False),
        ("/proc/4242/ns/net", False, True),  # cannot be checked: never treated as gone
    ],
)
def test_a_pod_counts_as_running_while_its_network_namespace_exists(
    tmp_path: Path, netns: str, exists: bool, alive: bool
) -> None:
    agent = Agent(config(tmp_path), imds=None, ec2=None)  # type: ignore[arg-type]
    if exists:
        (tmp_path / "run/netns").mkdir(parents=True)
        (tmp_path / "run/netns/cni-1").touch()
    agent.records.put(PodAttachment("c1", "net1", netns, "multus1", ("10.0.4.33",)))

    assert agent.live_addresses("multus1") == ({"10.0.4.33"} if alive else set())
    assert len(agent.records.all()) == (1 if alive else 0)


def test_concurrent_adds_checks_deletes_and_reconciles_leave_the_eni_and_records_consistent(
    tmp_path: Path,
) -> None:
    # Request threads read and mark the worker's state while its thread changes the ENI and
    # reconciles: at the end EC2, the worker's view and the records agree, address by address.
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2, limit=40)
    agent = worker.agent
    (tmp_path / "run/netns").mkdir(parents=True)
    hosts = range(33, 63)
    failures: list[str] = []

    def pod_lifecycle(host: int) -> None:
        container, ip = f"c{host}", f"10.0.4.{host}"
        (tmp_path / f"run/netns/cni-{container}").touch()
        request: dict[str, Any] = {"container_id": container, "ifname": "net1", "ips": [ip]}
        request |= {"interface": "multus1", "netns": f"/run/netns/cni-{container}"}
        try:
            for _ in range(3):
                agent.handle({**request, "command": "ADD"})
                agent.handle({**request, "command": "CHECK"})
                agent.handle({**request, "command": "DEL"})
            if host % 2:
                agent.handle({**request, "command": "ADD"})
        except AgentError as error:
            failures.append(f"{ip}: {error.message}")

    stop = threading.Event()

    def reconciles() -> None:
        while not stop.is_set():
            agent.reconcile_all(timeout=10)

    threads = [threading.Thread(target=pod_lifecycle, args=(host,)) for host in hosts]
    reconciler = threading.Thread(target=reconciles)
    for thread in [reconciler, *threads]:
        thread.start()
    for thread in threads:
        thread.join(60)
    stop.set()
    reconciler.join(20)

    kept = {f"10.0.4.{host}" for host in hosts if host % 2}
    assert failures == []
    assert ec2.secondaries == kept
    assert worker.held == {PRIMARY_IP, *kept}
    assert {ip for record in agent.records.all() for ip in record.ips} == kept


def test_two_adds_of_one_fixed_address_at_once_give_it_to_one_pod(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = worker_for(tmp_path, ec2, static_ranges={"multus1": ["10.0.4.48/28"]}).agent
    (tmp_path / "run/netns").mkdir(parents=True)
    store = agent.records.put

    def slow_put(record: PodAttachment) -> None:  # widens the window between check and record
        time.sleep(0.3)
        store(record)

    agent.records.put = slow_put  # type: ignore[method-assign]
    errors: dict[str, AgentError] = {}

    def add(container: str) -> None:
        (tmp_path / f"run/netns/cni-{container}").touch()
        request = {
            "command": "ADD",
            "container_id": container,
            "ifname": "net1",
            "netns": f"/run/netns/cni-{container}",
            "interface": "multus1",
            "ips": ["10.0.4.50"],
            "pod": f"core/{container}",
            "fixed": True,
        }
        try:
            agent.handle(request)
        except AgentError as error:
            errors[container] = error

    first = threading.Thread(target=add, args=("smf-a",))
    first.start()
    time.sleep(0.1)  # the first ADD has checked the address and is recording it
    add("smf-b")
    first.join(10)

    assert list(errors) == ["smf-b"]
    assert errors["smf-b"].code == ADDRESS_IN_USE
    assert "held by pod core/smf-a" in errors["smf-b"].message
