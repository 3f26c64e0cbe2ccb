"""The agent's rules one at a time, in process: IMDSv2 and SigV4-signed EC2 calls against a local
fake (FakeAws), retries and their backoff, the CNI requests (ADD/DEL/CHECK) and their error codes,
the ENI worker's error paths and the reconcile.

Sources: the EC2 API reference (AssignPrivateIpAddresses: AllowReassignment "allow an IP address
that is already assigned to another network interface or instance to be reassigned";
UnassignPrivateIpAddresses: PrivateIpAddress.N; NetworkInterfacePrivateIpAddress: primary,
privateIpAddress; "Error codes": client errors come with a 4xx status, server errors with a 5xx),
the EC2 User Guide (IMDSv2: PUT /latest/api/token with a TTL of at most 21600 s, then the token in
X-aws-ec2-metadata-token), the CNI spec (error 7: invalid network config, 11: try again later) and
docs/multus-pod-ips.md (the agent's own codes 101, 102, 103, backoff 0.1 s * 2^n up to 10 s with
full jitter, DEL never fails, reconcile rules).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from multus_pod_ips.agent import rate_limit
from multus_pod_ips.agent.config import AgentConfig, AgentError
from multus_pod_ips.agent.ec2_query import Credentials, Ec2Client, Ec2Error
from multus_pod_ips.agent.eni_worker import Operation
from multus_pod_ips.agent.imds import InstanceMetadata
from multus_pod_ips.agent.node_agent import Agent, _wait
from multus_pod_ips.agent.records import PodAttachment, RecordStore
from multus_pod_ips.agent.service import main, serve
from multus_pod_ips.agent.socket_server import _Server
from testing_support.multus_emulator import NODE_CREDENTIALS, ec2_error_xml
from tests.unit.multus_pod_ips.fakes import (
    ENI_MAC,
    ENI_XML,
    PRIMARY_IP,
    FakeAws,
    ScriptedEc2,
    ScriptedImds,
    agent_for,
    config,
    settle,
    wait_for,
    worker_for,
)

REGION = "us-west-2"
#: CNI spec error codes and this plugin's own (docs/multus-pod-ips.md, "Failure modes").
CNI_INVALID_CONFIG, CNI_TRY_AGAIN_LATER = 7, 11
ENI_FULL, NOT_ASSIGNED, EC2_REFUSED = 101, 102, 103
ASSIGN_ONE = {"NetworkInterfaceId": "eni-1", "PrivateIpAddress.1": "10.0.4.33"}


@pytest.fixture(scope="module")
def aws() -> Iterator[FakeAws]:
    fake = FakeAws()
    yield fake
    fake.close()


@pytest.fixture
def fake_aws(aws: FakeAws) -> FakeAws:
    aws.reset()
    return aws


@pytest.fixture
def backoff(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """Records each jitter draw's bounds and draws 0 (no real waiting)."""
    drawn: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        drawn.append((low, high))
        return 0.0

    monkeypatch.setattr(random, "uniform", uniform)
    return drawn


def ec2_client(fake: FakeAws) -> Ec2Client:
    return Ec2Client(InstanceMetadata(fake.url), REGION, fake.url)


def deadline_in(seconds: float) -> float:
    return time.monotonic() + seconds


# --- IMDSv2 ------------------------------------------------------------------------------------


def test_metadata_is_read_with_one_imdsv2_token_of_at_most_six_hours(fake_aws: FakeAws) -> None:
    imds = InstanceMetadata(fake_aws.url + "/")

    assert imds.get("instance-id") == "i-0123456789abcdef0"
    assert imds.get("instance-type") == "m5.large"
    assert [ttl for _, ttl in fake_aws.tokens.issued] == ["21600"]


def test_an_expired_imds_token_is_replaced(fake_aws: FakeAws) -> None:
    imds = InstanceMetadata(fake_aws.url)
    imds.get("instance-id")
    imds._token_expires = time.monotonic() - 1

    imds.get("instance-id")

    assert len(fake_aws.tokens.issued) == 2


# --- EC2 requests ------------------------------------------------------------------------------


def test_an_ec2_call_is_a_signed_query_api_post_with_action_and_version(
    fake_aws: FakeAws,
) -> None:
    client = ec2_client(fake_aws)

    root = client.call("DescribeNetworkInterfaces", {"NetworkInterfaceId.1": "eni-1"}, 0.0)

    assert fake_aws.refusals == []
    assert fake_aws.ec2_requests == [
        {
            "Action": "DescribeNetworkInterfaces",
            "Version": "2016-11-15",
            "NetworkInterfaceId.1": "eni-1",
        }
    ]
    assert root.findtext("return") == "true"
    # The node role's credentials: the first role IMDS lists, then its document.
    assert fake_aws.metadata_reads == [
        "iam/security-credentials/",
        "iam/security-credentials/multus-test-node-role",
    ]


def test_credentials_are_fetched_once_while_valid(fake_aws: FakeAws) -> None:
    client = ec2_client(fake_aws)

    client.call("DescribeNetworkInterfaces", {}, 0.0)
    client.call("DescribeNetworkInterfaces", {}, 0.0)

    assert fake_aws.metadata_reads.count("iam/security-credentials/") == 1


@pytest.mark.parametrize(("seconds_left", "refreshed"), [(300.5, False), (299.5, True)])
def test_credentials_are_refreshed_five_minutes_before_they_expire(
    fake_aws: FakeAws, seconds_left: float, refreshed: bool
) -> None:
    client = ec2_client(fake_aws)
    client._credentials = Credentials(
        NODE_CREDENTIALS.access_key,
        NODE_CREDENTIALS.secret_key,
        NODE_CREDENTIALS.token,
        expires_at=time.time() + seconds_left,
    )

    client.call("DescribeNetworkInterfaces", {}, 0.0)

    assert ("iam/security-credentials/" in fake_aws.metadata_reads) is refreshed


def test_the_credentials_expiration_is_read_as_utc_whatever_the_local_time_zone(
    fake_aws: FakeAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_an_hour = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    fake_aws.credentials_expire_at = in_an_hour.strftime("%Y-%m-%dT%H:%M:%SZ")
    monkeypatch.setenv("TZ", "Etc/GMT-12")  # UTC+12: read as local time, it expired 11 h ago
    time.tzset()
    try:
        client = ec2_client(fake_aws)
        client.call("DescribeNetworkInterfaces", {}, 0.0)
        client.call("DescribeNetworkInterfaces", {}, 0.0)
    finally:
        monkeypatch.undo()
        time.tzset()

    assert fake_aws.metadata_reads.count("iam/security-credentials/") == 1


@pytest.mark.parametrize(
    "code", ["RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled"]
)
def test_a_throttled_call_is_retried(
    fake_aws: FakeAws,
    backoff: list[tuple[float, float]],
    code: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The throttle turns the rate limiter on at its floor, one token per 2 s; how it waits is
    # test_rate_limit.py's, so here its floor lets the retry through at once.
    monkeypatch.setattr(rate_limit, "MIN_RATE", 100.0)
    fake_aws.ec2_answers = [(400, ec2_error_xml(code, "slow down"))]

    ec2_client(fake_aws).call("AssignPrivateIpAddresses", ASSIGN_ONE, deadline_in(30))

    assert len(fake_aws.ec2_requests) == 2


@pytest.mark.parametrize("answer", [(500, "not xml"), (503, ""), (0, "")])
def test_server_errors_and_lost_connections_are_retried(
    fake_aws: FakeAws, backoff: list[tuple[float, float]], answer: tuple[int, str]
) -> None:
    fake_aws.ec2_answers = [answer]

    ec2_client(fake_aws).call("AssignPrivateIpAddresses", ASSIGN_ONE, deadline_in(30))

    assert len(fake_aws.ec2_requests) == 2


def test_retries_back_off_exponentially_with_full_jitter_up_to_ten_seconds(
    fake_aws: FakeAws, backoff: list[tuple[float, float]]
) -> None:
    fake_aws.ec2_answers = [(503, ec2_error_xml("Unavailable", "busy"))] * 8

    ec2_client(fake_aws).call("AssignPrivateIpAddresses", ASSIGN_ONE, deadline_in(60))

    assert backoff == [
        (0, 0.2),
        (0, 0.4),
        (0, pytest.approx(0.8)),
        (0, pytest.approx(1.6)),
        (0, pytest.approx(3.2)),
        (0, pytest.approx(6.4)),
        (0, 10.0),
        (0, 10.0),
    ]


def test_a_client_error_is_raised_at_once_with_ec2s_code_and_message(
    fake_aws: FakeAws, backoff: list[tuple[float, float]]
) -> None:
    fake_aws.ec2_answers = [(400, ec2_error_xml("InvalidParameterValue", "bad address"))]

    with pytest.raises(Ec2Error) as raised:
        ec2_client(fake_aws).call("AssignPrivateIpAddresses", ASSIGN_ONE, deadline_in(30))

    assert (raised.value.code, raised.value.message) == ("InvalidParameterValue", "bad address")
    assert raised.value.retryable is False
    assert (len(fake_aws.ec2_requests), backoff) == (1, [])


@pytest.mark.parametrize(
    ("answer", "code", "retryable"),
    [((400, "not xml"), "HTTP 400", False), ((403, "<Response/>"), "HTTP 403", False)],
)
def test_an_error_without_an_ec2_code_is_named_by_its_http_status(
    fake_aws: FakeAws, answer: tuple[int, str], code: str, retryable: bool
) -> None:
    fake_aws.ec2_answers = [answer]

    with pytest.raises(Ec2Error) as raised:
        ec2_client(fake_aws)._call_once("AssignPrivateIpAddresses", ASSIGN_ONE)

    assert (raised.value.code, raised.value.retryable) == (code, retryable)


def test_a_server_error_with_an_ec2_code_is_retryable(fake_aws: FakeAws) -> None:
    fake_aws.ec2_answers = [(500, ec2_error_xml("InternalError", "oops"))]

    with pytest.raises(Ec2Error) as raised:
        ec2_client(fake_aws)._call_once("AssignPrivateIpAddresses", ASSIGN_ONE)

    assert (raised.value.code, raised.value.message, raised.value.retryable) == (
        "InternalError",
        "oops",
        True,
    )


def test_a_lost_connection_is_a_retryable_connection_error(fake_aws: FakeAws) -> None:
    fake_aws.ec2_answers = [(0, "")]

    with pytest.raises(Ec2Error) as raised:
        ec2_client(fake_aws)._call_once("AssignPrivateIpAddresses", ASSIGN_ONE)

    assert (raised.value.code, raised.value.retryable) == ("ConnectionError", True)


def test_no_retry_is_started_that_would_end_after_the_deadline(
    fake_aws: FakeAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: high)
    # A server error, not a throttle: the rate limiter stays off (test_rate_limit.py).
    fake_aws.ec2_answers = [(503, ec2_error_xml("Unavailable", "try later"))] * 3

    with pytest.raises(Ec2Error) as raised:
        ec2_client(fake_aws).call("AssignPrivateIpAddresses", ASSIGN_ONE, deadline_in(0.3))

    # Waits 0.2 s after the first answer; a second wait of 0.4 s would pass the deadline.
    assert raised.value.code == "Unavailable"
    assert len(fake_aws.ec2_requests) == 2


# --- agent start -------------------------------------------------------------------------------

INSTANCE_TYPES_XML = """<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
<instanceTypeSet><item><instanceType>m5.large</instanceType><networkInfo>
<maximumNetworkInterfaces>3</maximumNetworkInterfaces>
<ipv4AddressesPerInterface>10</ipv4AddressesPerInterface>
<ipv6AddressesPerInterface>10</ipv6AddressesPerInterface>
</networkInfo></item></instanceTypeSet></DescribeInstanceTypesResponse>"""


@pytest.mark.parametrize("found_first", [None, "i-0fedcba9876543210 eni-old\n", "garbage"])
def test_the_agent_starts_on_the_eni_the_bootstrap_recorded_for_this_instance(
    fake_aws: FakeAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, found_first: str | None
) -> None:
    state = tmp_path / "eni"
    state.mkdir()
    if found_first is not None:
        (state / "multus1.eni").write_text(found_first)
    waits: list[float] = []

    def bootstrap_finishes(seconds: float) -> None:
        waits.append(seconds)
        (state / "multus1.eni").write_text("i-0123456789abcdef0 eni-0abc\n")

    fake_aws.ec2_default = INSTANCE_TYPES_XML
    imds = InstanceMetadata(fake_aws.url)
    agent = Agent(config(tmp_path), imds, Ec2Client(imds, REGION, fake_aws.url))
    monkeypatch.setattr(time, "sleep", bootstrap_finishes)
    agent.start()

    assert (agent.instance_type, agent.ipv4_per_eni) == ("m5.large", 10)
    assert agent.workers["multus1"].eni_id == "eni-0abc"
    assert agent.workers["multus1"].is_alive()
    assert len(waits) == 1
    assert fake_aws.ec2_requests[0]["InstanceType.1"] == "m5.large"


# --- CNI requests ------------------------------------------------------------------------------


def request(command: str, ips: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "command": command,
        "container_id": "c1",
        "ifname": "net1",
        "netns": "/var/run/netns/cni-1",
        "interface": "multus1",
        "ips": ips,
        "pod": "default/web",
        **fields,
    }


@pytest.fixture
def served(tmp_path: Path) -> Agent:
    """An agent with one running worker on eni-1 (multus1, 10.0.4.32/27) and pod c1's netns."""
    worker = worker_for(tmp_path, ScriptedEc2())
    (tmp_path / "run/netns").mkdir(parents=True)
    (tmp_path / "run/netns/cni-1").touch()
    return worker.agent


def ec2_of(agent: Agent) -> ScriptedEc2:
    ec2: ScriptedEc2 = agent.ec2  # type: ignore[assignment]
    return ec2


def test_add_assigns_check_confirms_del_unassigns_and_forgets(served: Agent) -> None:
    served.handle(request("ADD", ["10.0.4.33"]))
    assert ec2_of(served).secondaries == {"10.0.4.33"}
    assert [r.ips for r in served.records.all()] == [("10.0.4.33",)]
    served.handle(request("CHECK", ["10.0.4.33"]))

    served.handle(request("DEL", ["10.0.4.33"]))

    assert ec2_of(served).secondaries == set()
    assert served.records.all() == []
    served.handle(request("DEL", ["10.0.4.33"]))  # again: idempotent, no EC2 call
    assert ec2_of(served).actions().count("UnassignPrivateIpAddresses") == 1


def test_the_record_keeps_what_the_plugin_reported(served: Agent) -> None:
    served.handle(request("ADD", ["10.0.4.33", "10.0.4.34"]))

    assert served.records.all() == [
        PodAttachment(
            "c1",
            "net1",
            "/var/run/netns/cni-1",
            "multus1",
            ("10.0.4.33", "10.0.4.34"),
            "default/web",
        )
    ]


def test_an_unknown_command_is_an_invalid_config(served: Agent) -> None:
    with pytest.raises(AgentError) as raised:
        served.handle(request("VERSION", []))
    assert raised.value.code == CNI_INVALID_CONFIG


@pytest.mark.parametrize("command", ["ADD", "CHECK"])
def test_an_interface_without_a_multus_eni_is_an_invalid_config(
    served: Agent, command: str
) -> None:
    with pytest.raises(AgentError) as raised:
        served.handle(request(command, ["10.0.4.33"], interface="eth0"))
    assert raised.value.code == CNI_INVALID_CONFIG
    assert "'eth0'" in raised.value.message and "multus1" in raised.value.message
    assert ec2_of(served).calls == []


@pytest.mark.parametrize(
    ("ip", "managed"),
    [("10.0.4.32", True), ("10.0.4.63", True), ("10.0.4.31", False), ("10.0.4.64", False)],
)
def test_only_addresses_inside_the_interfaces_ranges_are_assigned(
    served: Agent, ip: str, managed: bool
) -> None:
    if managed:
        served.handle(request("ADD", [ip]))
        assert ec2_of(served).secondaries == {ip}
        return
    with pytest.raises(AgentError) as raised:
        served.handle(request("ADD", [ip]))
    assert raised.value.code == CNI_INVALID_CONFIG
    assert ip in raised.value.message and "10.0.4.32/27" in raised.value.message
    assert (ec2_of(served).calls, served.records.all()) == ([], [])


def test_a_failed_add_leaves_no_record(tmp_path: Path) -> None:
    agent = worker_for(tmp_path, ScriptedEc2({"10.0.4.33"}), limit=2).agent

    with pytest.raises(AgentError) as raised:
        agent.handle(request("ADD", ["10.0.4.34"]))

    assert raised.value.code == ENI_FULL
    assert agent.records.all() == []


LOCAL_IPV4S = f"network/interfaces/macs/{ENI_MAC}/local-ipv4s"


def imds_of(agent: Agent) -> ScriptedImds:
    imds: ScriptedImds = agent.imds  # type: ignore[assignment]
    return imds


def test_add_answers_only_once_imds_lists_a_moved_address_on_the_eni(tmp_path: Path) -> None:
    # EC2 API reference, AssignPrivateIpAddresses: "Remapping an IP address is an asynchronous
    # operation. When you move an IP address from one network interface to another, check
    # network/interfaces/macs/mac/local-ipv4s in the instance metadata to confirm that the
    # remapping is complete."
    agent = worker_for(tmp_path, ScriptedEc2(), remap_poll_seconds=0.01).agent
    imds = imds_of(agent)
    imds.moving = {"10.0.4.40"}
    answered = threading.Event()
    errors: list[AgentError] = []

    def add() -> None:
        try:
            agent.handle(request("ADD", ["10.0.4.40"]))
        except AgentError as error:
            errors.append(error)
        answered.set()

    threading.Thread(target=add, daemon=True).start()
    assert wait_for(lambda: imds.reads.get(LOCAL_IPV4S, 0) >= 3)
    assert not answered.is_set()  # EC2 said yes, but IMDS does not list it yet
    assert ec2_of(agent).secondaries == {"10.0.4.40"}

    imds.moving.clear()

    assert answered.wait(5) and errors == []
    assert [r.ips for r in agent.records.all()] == [("10.0.4.40",)]
    assert ec2_of(agent).actions().count("UnassignPrivateIpAddresses") == 0


def test_an_address_imds_never_lists_fails_the_add_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    agent = worker_for(
        tmp_path, ScriptedEc2(), add_timeout_seconds=0.3, remap_poll_seconds=0.01
    ).agent
    imds_of(agent).moving = {"10.0.4.40"}
    started = time.monotonic()

    with pytest.raises(AgentError) as raised:
        agent.handle(request("ADD", ["10.0.4.40"]))

    assert raised.value.code == CNI_TRY_AGAIN_LATER  # kubelet retries the sandbox
    assert "10.0.4.40" in raised.value.message and "local-ipv4s" in raised.value.message
    assert 0.3 - 0.02 <= time.monotonic() - started < 5  # waited out the ADD deadline, no more
    # The pod is not recorded, and the address is released again: nothing holds an address
    # no pod uses.
    assert agent.records.all() == []
    assert wait_for(lambda: ec2_of(agent).secondaries == set())
    assert ec2_of(agent).addresses_sent("UnassignPrivateIpAddresses") == [["10.0.4.40"]]
    assert list((tmp_path / "pods").iterdir()) == []


def test_a_pod_waiting_for_its_move_does_not_hold_up_the_enis_other_pods(
    tmp_path: Path,
) -> None:
    agent = worker_for(
        tmp_path, ScriptedEc2(), add_timeout_seconds=2.0, remap_poll_seconds=0.01
    ).agent
    imds_of(agent).moving = {"10.0.4.40"}

    def add_moving_pod() -> None:
        with contextlib.suppress(AgentError):  # it times out: the previous test's case
            agent.handle(request("ADD", ["10.0.4.40"]))

    waiting = threading.Thread(target=add_moving_pod, daemon=True)
    waiting.start()
    assert wait_for(lambda: imds_of(agent).reads.get(LOCAL_IPV4S, 0) >= 2)
    started = time.monotonic()

    agent.handle(request("ADD", ["10.0.4.41"], container_id="c2"))
    agent.handle(request("DEL", ["10.0.4.41"], container_id="c2"))

    assert time.monotonic() - started < 1.0  # well before the first pod's 2 s deadline
    assert waiting.is_alive()
    waiting.join(5)


def test_a_burst_of_adds_shares_its_imds_reads(tmp_path: Path) -> None:
    # IMDS throttles queries per instance (EC2 User Guide, "Retrieve instance metadata", Query
    # throttling): pods whose addresses were assigned together wait on shared reads.
    ec2 = ScriptedEc2()
    agent = worker_for(tmp_path, ec2, limit=50).agent
    ec2.gate.clear()  # hold EC2 so that the ADDs queue up behind the first call
    ips = [f"10.0.4.{host}" for host in range(40, 50)]
    threads = [
        threading.Thread(target=agent.handle, args=(request("ADD", [ip], container_id=ip),))
        for ip in ips
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    ec2.gate.set()
    for thread in threads:
        thread.join(10)

    assert ec2.secondaries == set(ips)
    assert ec2.actions().count("AssignPrivateIpAddresses") <= 2  # the first batch, the rest
    assert imds_of(agent).reads[LOCAL_IPV4S] < len(ips)


def test_an_add_without_addresses_has_nothing_to_wait_for(served: Agent) -> None:
    served.handle(request("ADD", []))  # e.g. an IPv6-only result: nothing to assign

    assert ec2_of(served).calls == []
    assert LOCAL_IPV4S not in imds_of(served).reads


def test_the_wait_looks_up_the_enis_own_mac_once(tmp_path: Path) -> None:
    agent = worker_for(tmp_path, ScriptedEc2()).agent

    agent.handle(request("ADD", ["10.0.4.40"]))
    agent.handle(request("ADD", ["10.0.4.41"], container_id="c2"))

    reads = imds_of(agent).reads
    assert reads["network/interfaces/macs/"] == 1
    assert reads[LOCAL_IPV4S] == 2
    assert agent.workers["multus1"].mac == ENI_MAC


def test_the_reconcile_restores_without_waiting_for_imds(tmp_path: Path) -> None:
    # The restore never moves an address (AllowReassignment=false), so there is no remap to
    # confirm; it must not hold the worker for an ADD's deadline either.
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2, settle_seconds=0.0)
    agent = worker.agent
    (tmp_path / "run/netns").mkdir(parents=True)
    (tmp_path / "run/netns/cni-1").touch()
    agent.records.put(PodAttachment("c1", "net1", "/run/netns/cni-1", "multus1", ("10.0.4.40",)))
    imds_of(agent).moving = {"10.0.4.40"}

    assert agent.reconcile_all(timeout=5) is True
    assert ec2.secondaries == {"10.0.4.40"}
    assert LOCAL_IPV4S not in imds_of(agent).reads


def test_del_succeeds_and_forgets_the_pod_even_when_ec2_fails(served: Agent) -> None:
    served.handle(request("ADD", ["10.0.4.33"]))
    ec2_of(served).failures = [Ec2Error("UnauthorizedOperation", "denied", retryable=False)]

    served.handle(request("DEL", ["10.0.4.33"]))

    assert served.records.all() == []


def test_del_of_a_pod_on_an_interface_without_a_worker_forgets_it(served: Agent) -> None:
    served.records.put(PodAttachment("c1", "net1", "", "multus9", ("10.0.4.33",)))

    served.handle(request("DEL", ["10.0.4.33"], interface="multus9"))

    assert (served.records.all(), ec2_of(served).calls) == ([], [])


@pytest.mark.parametrize(
    ("recorded", "on_eni", "checked"),
    [
        (None, set(), ["10.0.4.33"]),  # no record
        (["10.0.4.33"], {"10.0.4.33"}, ["10.0.4.34"]),  # another address than recorded
        (["10.0.4.33"], set(), ["10.0.4.33"]),  # recorded but gone from the ENI
    ],
)
def test_check_fails_unless_the_recorded_address_is_on_the_eni(
    served: Agent, recorded: list[str] | None, on_eni: set[str], checked: list[str]
) -> None:
    worker = served.workers["multus1"]
    if recorded is not None:
        served.records.put(
            PodAttachment("c1", "net1", "/var/run/netns/cni-1", "multus1", tuple(recorded))
        )
    ec2_of(served).secondaries = set(on_eni)
    worker._refresh(deadline_in(5))

    with pytest.raises(AgentError) as raised:
        served.handle(request("CHECK", checked))

    assert raised.value.code == NOT_ASSIGNED


def test_check_passes_for_the_recorded_addresses_in_any_order(served: Agent) -> None:
    served.handle(request("ADD", ["10.0.4.33", "10.0.4.34"]))

    served.handle(request("CHECK", ["10.0.4.34", "10.0.4.33"]))


def test_each_interface_of_a_pod_has_its_own_record(served: Agent) -> None:
    served.handle(request("ADD", ["10.0.4.33"], ifname="net1"))
    served.handle(request("ADD", ["10.0.4.34"], ifname="net2"))

    served.handle(request("DEL", ["10.0.4.33"], ifname="net1"))

    assert [record.ifname for record in served.records.all()] == ["net2"]
    assert ec2_of(served).secondaries == {"10.0.4.34"}


def test_a_record_file_is_named_after_the_container_and_interface_made_path_safe() -> None:
    # The name is persisted in /run: the next agent version must find the same records.
    key = PodAttachment("../../etc/x y", "net/1", "", "multus1", ()).key

    assert "/" not in key and " " not in key
    assert key == ".._.._etc_x_y_net_1"


def test_waiting_returns_the_first_failure(tmp_path: Path) -> None:
    done, failed = Operation("assign", "10.0.4.33", 0.0), Operation("assign", "10.0.4.34", 0.0)
    done.finish()
    failed.finish(AgentError(ENI_FULL, "full"))

    error = _wait([done, failed], deadline_in(1))

    assert error is failed.error


# --- the socket --------------------------------------------------------------------------------


@pytest.fixture
def socket_path(served: Agent) -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="agent")  # unix socket paths are short (108 bytes)
    path = os.path.join(directory, "agent.sock")
    server = _Server(path, served)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield path
    server.shutdown()
    server.server_close()
    os.remove(path)
    os.rmdir(directory)


def ask(path: str, line: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(10)
        connection.connect(path)
        connection.sendall(line)
        reply: dict[str, Any] = json.loads(connection.makefile("rb").readline())
    return reply


def test_the_socket_answers_ok_or_the_cni_error(socket_path: str, served: Agent) -> None:
    ok = ask(socket_path, json.dumps(request("ADD", ["10.0.4.33"])).encode() + b"\n")
    refused = ask(socket_path, json.dumps(request("ADD", ["10.0.4.100"])).encode() + b"\n")

    assert ok == {"ok": True}
    assert refused["ok"] is False and refused["code"] == CNI_INVALID_CONFIG
    assert "10.0.4.100" in refused["msg"]


@pytest.mark.parametrize("line", [b"not json\n", b'{"command": "ADD"}\n', b"[]\n", b'"ADD"\n'])
def test_a_malformed_request_is_answered_as_an_invalid_config(
    socket_path: str, line: bytes
) -> None:
    reply = ask(socket_path, line)

    assert reply["ok"] is False and reply["code"] == CNI_INVALID_CONFIG
    assert reply["msg"].startswith("bad request")


# --- the ENI worker's error paths ----------------------------------------------------------------


def submit(worker: Any, *operations: tuple[str, str]) -> list[Operation]:
    deadline = deadline_in(30)
    return [worker.submit(Operation(kind, ip, deadline)) for kind, ip in operations]


def test_an_unassign_refused_because_an_address_moved_away_releases_the_rest(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.33", "10.0.4.35"})
    worker = worker_for(tmp_path, ec2)
    settle(submit(worker, ("assign", "10.0.4.35")))
    ec2.secondaries.discard("10.0.4.35")  # another node took it (AllowReassignment)
    ec2.gate.clear()
    operations = submit(worker, ("unassign", "10.0.4.33"), ("unassign", "10.0.4.35"))
    ec2.gate.set()

    assert settle(operations) == [None, None]
    assert ec2.secondaries == set()
    assert ec2.addresses_sent("UnassignPrivateIpAddresses") == [
        ["10.0.4.33", "10.0.4.35"],
        ["10.0.4.33"],
    ]


def test_an_unassign_of_addresses_already_gone_succeeds_without_retry(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    worker = worker_for(tmp_path, ec2)
    settle(submit(worker, ("assign", "10.0.4.33")))
    ec2.secondaries.clear()

    assert settle(submit(worker, ("unassign", "10.0.4.33"))) == [None]
    assert ec2.addresses_sent("UnassignPrivateIpAddresses") == [["10.0.4.33"]]


@pytest.mark.parametrize(
    ("kind", "failure", "code"),
    [
        ("unassign", Ec2Error("RequestLimitExceeded", "slow", retryable=True), 11),
        ("unassign", Ec2Error("UnauthorizedOperation", "denied", retryable=False), 103),
        ("assign", Ec2Error("RequestLimitExceeded", "slow", retryable=True), 11),
        ("assign", Ec2Error("UnauthorizedOperation", "denied", retryable=False), 103),
        ("assign", Ec2Error("PrivateIpAddressLimitExceeded", "full", retryable=False), 101),
    ],
)
def test_an_ec2_failure_fails_the_request_with_its_cni_code(
    tmp_path: Path, kind: str, failure: Ec2Error, code: int
) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    worker = worker_for(tmp_path, ec2)
    ec2.failures = [failure]

    [error] = settle(submit(worker, (kind, "10.0.4.33" if kind == "unassign" else "10.0.4.34")))

    assert error is not None and error.code == code
    assert failure.code in error.message and "eni-1" in error.message
    assert ec2.secondaries == {"10.0.4.33"}


def test_an_assign_ec2_refuses_for_an_address_the_eni_holds_counts_as_done(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    worker = worker_for(tmp_path, ec2)
    ec2.failures = [Ec2Error("InvalidParameterValue", "duplicate", retryable=False)]

    assert settle(submit(worker, ("assign", "10.0.4.33"))) == [None]


def test_an_address_the_eni_already_holds_takes_no_room(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33", "10.0.4.34"})  # full: the primary and two of 3
    worker = worker_for(tmp_path, ec2, limit=3)

    assert settle(submit(worker, ("assign", "10.0.4.33"), ("assign", "10.0.4.34"))) == [None] * 2
    [full] = settle(submit(worker, ("assign", "10.0.4.35")))
    assert full is not None and full.code == ENI_FULL
    assert "holds 3 of the 3 IPv4 addresses" in full.message and "m5.large" in full.message


def test_the_last_request_for_an_address_wins_and_settles_the_earlier_ones(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.40"})
    worker = worker_for(tmp_path, ec2)
    settle(submit(worker, ("assign", "10.0.4.40")))
    ec2.gate.clear()
    operations = submit(worker, ("assign", "10.0.4.40"), ("unassign", "10.0.4.40"))
    ec2.gate.set()

    assert settle(operations) == [None, None]
    assert ec2.secondaries == set()


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (RuntimeError("bug"), CNI_TRY_AGAIN_LATER),
        (Ec2Error("RequestLimitExceeded", "slow", retryable=True), CNI_TRY_AGAIN_LATER),
        (Ec2Error("UnauthorizedOperation", "denied", retryable=False), EC2_REFUSED),
    ],
)
def test_a_batch_that_fails_unexpectedly_fails_its_requests_and_the_worker_goes_on(
    tmp_path: Path, failure: Exception, code: int
) -> None:
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2)
    describe = ec2.describe
    raised = [failure]

    def describe_once() -> Any:
        if raised:
            raise raised.pop()
        return describe()

    ec2.describe = describe_once  # type: ignore[method-assign]

    [error] = settle(submit(worker, ("assign", "10.0.4.33")))
    assert error is not None and error.code == code and "eni-1" in error.message
    assert settle(submit(worker, ("assign", "10.0.4.34"))) == [None]


def test_the_worker_reads_the_enis_addresses_once_before_its_first_change(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    worker = worker_for(tmp_path, ec2)

    settle(submit(worker, ("assign", "10.0.4.34")))
    settle(submit(worker, ("assign", "10.0.4.35")))

    assert ec2.actions() == [
        "DescribeNetworkInterfaces",
        "AssignPrivateIpAddresses",
        "AssignPrivateIpAddresses",
    ]
    assert ec2.calls[1][1] == {
        "NetworkInterfaceId": "eni-1",
        "AllowReassignment": "true",
        "PrivateIpAddress.1": "10.0.4.34",
    }
    assert (worker.held, worker.primary) == (
        {PRIMARY_IP, "10.0.4.33", "10.0.4.34", "10.0.4.35"},
        PRIMARY_IP,
    )


# --- reconcile ---------------------------------------------------------------------------------


def reconciled_agent(tmp_path: Path, ec2: ScriptedEc2, **overrides: Any) -> Agent:
    agent = worker_for(tmp_path, ec2, **{"settle_seconds": 0.0, **overrides}).agent
    (tmp_path / "run/netns").mkdir(parents=True)
    return agent


def pod(agent: Agent, tmp_path: Path, name: str, ip: str, alive: bool = True) -> None:
    if alive:
        (tmp_path / f"run/netns/cni-{name}").touch()
    agent.records.put(
        PodAttachment(name, "net1", f"/var/run/netns/cni-{name}", "multus1", (ip,), name)
    )


def test_reconcile_releases_managed_addresses_without_a_running_pod_and_nothing_else(
    tmp_path: Path,
) -> None:
    held = {"10.0.4.32", "10.0.4.33", "10.0.4.63", "10.0.4.31", "10.0.4.64", "10.0.4.200"}
    ec2 = ScriptedEc2(held)
    agent = reconciled_agent(tmp_path, ec2)
    pod(agent, tmp_path, "running", "10.0.4.33")
    pod(agent, tmp_path, "gone", "10.0.4.63", alive=False)

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.secondaries == {"10.0.4.33", "10.0.4.31", "10.0.4.64", "10.0.4.200"}
    assert [record.pod for record in agent.records.all()] == ["running"]
    assert agent.workers["multus1"].reconciled.is_set()


def test_reconcile_never_releases_the_enis_primary_address(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    agent = reconciled_agent(tmp_path, ec2, interfaces={"multus1": ["10.0.4.0/24"]})

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.addresses_sent("UnassignPrivateIpAddresses") == [["10.0.4.33"]]


def test_reconcile_restores_a_running_pods_address_without_taking_it_from_another_eni(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_agent(tmp_path, ec2)
    pod(agent, tmp_path, "running", "10.0.4.34")

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.secondaries == {"10.0.4.34"}
    assign = [params for action, params in ec2.calls if action == "AssignPrivateIpAddresses"]
    assert [params["AllowReassignment"] for params in assign] == ["false"]


def test_a_restore_ec2_refuses_does_not_fail_the_reconcile(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_agent(tmp_path, ec2)
    pod(agent, tmp_path, "stale", "10.0.4.34")
    ec2.failures = [Ec2Error("InvalidIPAddress.InUse", "in use", retryable=False)]

    assert agent.reconcile_all(timeout=10) is True
    assert ec2.secondaries == set()


def test_reconcile_leaves_addresses_changed_within_the_settle_time_alone(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    agent = reconciled_agent(tmp_path, ec2, settle_seconds=30.0)
    agent.workers["multus1"].touch(("10.0.4.33", "10.0.4.34"))
    pod(agent, tmp_path, "adding", "10.0.4.34")

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.secondaries == {"10.0.4.33"}
    assert "AssignPrivateIpAddresses" not in ec2.actions()


def test_a_reconcile_that_cannot_read_the_eni_reports_failure(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_agent(tmp_path, ec2)

    def unreadable() -> Any:
        raise Ec2Error("RequestLimitExceeded", "slow", retryable=True)

    ec2.describe = unreadable  # type: ignore[method-assign]

    assert agent.reconcile_all(timeout=10) is False
    assert not agent.workers["multus1"].reconciled.is_set()


def test_a_reconcile_of_a_node_without_workers_is_complete(tmp_path: Path) -> None:
    assert agent_for(tmp_path, ScriptedEc2()).reconcile_all(timeout=1) is True


def test_pods_of_other_interfaces_do_not_count_and_are_kept(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, ScriptedEc2())
    agent.records.put(PodAttachment("c2", "net1", "/run/netns/gone", "multus2", ("10.0.6.33",)))

    assert agent.live_addresses("multus1") == set()
    assert len(agent.records.all()) == 1


# --- records and the command line ----------------------------------------------------------------


def test_unreadable_and_temporary_record_files_are_ignored(tmp_path: Path) -> None:
    record = PodAttachment("c1", "net1", "/run/netns/cni-1", "multus1", ("10.0.4.33",))
    RecordStore(str(tmp_path)).put(record)
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "old.json").write_text(json.dumps({"container_id": "c", "ips": []}))
    (tmp_path / "no-ips.json").write_text(json.dumps({"container_id": "c", "interface": "n"}))
    (tmp_path / "c9_net1.json.tmp").write_text("{")

    assert RecordStore(str(tmp_path)).all() == [record]


def test_a_record_is_written_whole_and_removing_an_unknown_one_is_harmless(
    tmp_path: Path,
) -> None:
    store = RecordStore(str(tmp_path / "pods"))
    store.put(PodAttachment("c1", "net1", "", "multus1", ("10.0.4.33",)))

    assert sorted(path.name for path in (tmp_path / "pods").iterdir()) == ["c1_net1.json"]
    store.remove("never-added")


def test_the_config_file_is_read_as_json(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({**config(tmp_path).__dict__, "reconcile_seconds": 5}))

    assert AgentConfig.load(str(path)) == config(tmp_path, reconcile_seconds=5)


@pytest.mark.parametrize("argv", [["agent.py"], ["agent.py", "a.json", "b.json"]])
def test_the_command_line_wants_exactly_one_config_file(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("usage: agent.py CONFIG.json")


def test_the_agent_serves_then_marks_itself_ready_reconciles_periodically_and_stops_on_sigterm(
    fake_aws: FakeAws, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_aws.ec2_by_action = {
        "DescribeInstanceTypes": INSTANCE_TYPES_XML,
        "DescribeNetworkInterfaces": ENI_XML.format(secondaries="", ipv6s=""),
    }
    for metadata_path, value in {
        "network/interfaces/macs/": f"{ENI_MAC}/",
        f"network/interfaces/macs/{ENI_MAC}/interface-id": "eni-1",
        LOCAL_IPV4S: PRIMARY_IP,
    }.items():
        monkeypatch.setitem(fake_aws.metadata, metadata_path, value)
    monkeypatch.setenv("MULTUS_IMDS_URL", fake_aws.url)
    monkeypatch.setenv("MULTUS_EC2_ENDPOINT", fake_aws.url)
    (tmp_path / "eni").mkdir()
    (tmp_path / "eni/multus1.eni").write_text("i-0123456789abcdef0 eni-1\n")
    run = Path(tempfile.mkdtemp(prefix="agent"))  # unix socket paths are short (108 bytes)
    # Left over from the previous agent on this node: both are replaced.
    (run / "agent.sock").write_text("")
    (run / "ready").write_text("stale\n")
    agent_config = config(tmp_path, socket_path=str(run / "agent.sock"), reconcile_seconds=0.05)
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({**agent_config.__dict__, "ready_marker": str(run / "ready")}))
    ends, report = multiprocessing.Pipe()

    def agent_process() -> None:
        # The agent's process: main, then what would keep the process alive after it returns.
        code = main(["agent.py", str(path)])
        left = [t.name for t in threading.enumerate() if t.daemon is False]
        report.send((code, left))

    agent = multiprocessing.get_context("fork").Process(target=agent_process)
    agent.start()
    try:
        wait_for(lambda: marker(run / "ready") == f"{agent.pid}\n" or not agent.is_alive(), 10)
        ready = marker(run / "ready") == f"{agent.pid}\n"
        mode = os.stat(run / "agent.sock").st_mode & 0o777 if ready else None
        # The first reconcile reads the ENI from EC2, the periodic ones from IMDS only.
        periodic = wait_for(lambda: fake_aws.metadata_reads.count(LOCAL_IPV4S) >= 3)
        with socket.socket(socket.AF_UNIX) as silent:  # a client that never sends its request
            if ready:
                silent.connect(str(run / "agent.sock"))
            # Answered after the silent one was accepted (connections are accepted in order).
            reply = ask(str(run / "agent.sock"), b"not json\n") if ready else {}
            os.kill(agent.pid or 0, signal.SIGTERM)
            agent.join(10)
            ended = ends.poll(0) and ends.recv()
    finally:
        agent.kill()
        shutil.rmtree(run)

    assert (ready, mode, periodic) == (True, 0o600, True)  # 0600: the plugin runs as root
    assert reply["code"] == CNI_INVALID_CONFIG
    assert ended == (0, ["MainThread"])  # SIGTERM ends serve, and nothing keeps the process up


def marker(path: Path) -> str:
    with contextlib.suppress(FileNotFoundError):
        return path.read_text()
    return ""


def test_an_idle_worker_waits_for_work(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ec2 = ScriptedEc2()
    worker = worker_for(tmp_path, ec2)

    time.sleep(0.1)  # twenty batch windows

    assert (ec2.calls, caplog.records) == ([], [])
    assert settle(submit(worker, ("assign", "10.0.4.33"))) == [None]


def test_every_imds_and_ec2_request_has_a_timeout(
    fake_aws: FakeAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeouts: list[float | None] = []
    urlopen = urllib.request.urlopen

    def recording(request: Any, *args: Any, **kwargs: Any) -> Any:
        timeouts.append(kwargs.get("timeout", args[1] if len(args) > 1 else None))
        return urlopen(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", recording)

    ec2_client(fake_aws).call("DescribeNetworkInterfaces", {}, 0.0)

    # The token, the role, its credentials, then EC2: a hung endpoint must not hang the agent.
    assert len(timeouts) == 4
    assert all(timeout is not None and 0 < timeout <= 30 for timeout in timeouts)


def test_a_reconcile_reads_the_eni_once_and_only_that_eni(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_agent(tmp_path, ec2)

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.calls == [("DescribeNetworkInterfaces", {"NetworkInterfaceId.1": "eni-1"})]


def test_reconcile_all_returns_once_every_eni_is_reconciled(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_agent(tmp_path, ec2)
    ec2.gate.clear()
    threading.Timer(0.1, ec2.gate.set).start()

    assert agent.reconcile_all(timeout=10) is True
    assert agent.workers["multus1"].reconciled.is_set()


def test_an_address_still_held_whose_retried_unassign_is_throttled_fails_alone(
    tmp_path: Path,
) -> None:
    class ThrottledRetry(ScriptedEc2):
        def call(self, action: str, params: dict[str, str], deadline: float) -> Any:
            if self.actions().count("UnassignPrivateIpAddresses") == 1 and action.startswith("U"):
                self.calls.append((action, params))
                raise Ec2Error("RequestLimitExceeded", "slow down", retryable=True)
            return super().call(action, params, deadline)

    ec2 = ThrottledRetry({"10.0.4.33", "10.0.4.35"})
    worker = worker_for(tmp_path, ec2)
    settle(submit(worker, ("assign", "10.0.4.35")))
    ec2.secondaries.discard("10.0.4.35")  # moved to another node's ENI
    ec2.gate.clear()
    operations = submit(worker, ("unassign", "10.0.4.33"), ("unassign", "10.0.4.35"))
    ec2.gate.set()

    still_held, moved_away = settle(operations)

    assert still_held is not None and still_held.code == CNI_TRY_AGAIN_LATER
    assert moved_away is None


@pytest.mark.parametrize(
    ("overrides", "first_outside_url"),
    [
        ({}, "http://169.254.169.254/latest/api/token"),
        ({"MULTUS_IMDS_URL": "fake"}, "https://ec2.us-west-2.amazonaws.com/"),
    ],
)
def test_without_overrides_the_agent_uses_imds_and_the_regional_ec2_endpoint(
    fake_aws: FakeAws,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, str],
    first_outside_url: str,
) -> None:
    monkeypatch.delenv("MULTUS_IMDS_URL", raising=False)
    monkeypatch.delenv("MULTUS_EC2_ENDPOINT", raising=False)
    for name in overrides:
        monkeypatch.setenv(name, fake_aws.url)
    outside: list[str] = []
    urlopen = urllib.request.urlopen

    def local_only(request: urllib.request.Request, *args: Any, **kwargs: Any) -> Any:
        if request.full_url.startswith(fake_aws.url):
            return urlopen(request, *args, **kwargs)
        outside.append(request.full_url)
        raise urllib.error.HTTPError(request.full_url, 400, "refused", Message(), io.BytesIO())

    monkeypatch.setattr(urllib.request, "urlopen", local_only)

    with pytest.raises((urllib.error.HTTPError, Ec2Error)):
        serve(config(tmp_path))

    assert outside == [first_outside_url]
