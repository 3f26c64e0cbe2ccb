"""The ENI worker's reconcile at rest: the record of the ENI's addresses is checked against IMDS,
and EC2 is asked only to change something or when IMDS contradicts the record past the settle
time.

Sources: EC2 User Guide, "Instance metadata categories" (network/interfaces/macs/mac/local-ipv4s:
the private IPv4 addresses associated with the interface); EC2 API reference,
AssignPrivateIpAddresses ("Remapping an IP address is an asynchronous operation ... check
network/interfaces/macs/mac/local-ipv4s in the instance metadata to confirm that the remapping is
complete": IMDS lags EC2); EC2 developer guide, "Request throttling for the Amazon EC2 API" (every
DescribeNetworkInterfaces takes a token from the account's bucket, shared with the VPC CNI and
Karpenter: a periodic one per node and ENI is what the fleet cannot afford).
"""

from __future__ import annotations

import time
from pathlib import Path

from multus_pod_ips.agent.node_agent import Agent
from multus_pod_ips.agent.records import PodAttachment
from tests.unit.multus_pod_ips.fakes import ScriptedEc2, ScriptedImds, worker_for

DESCRIBE = "DescribeNetworkInterfaces"


def reconciled_once(
    tmp_path: Path, ec2: ScriptedEc2, settle_seconds: float, pods: dict[str, str] | None = None
) -> Agent:
    """An agent with these running pods (name -> address) whose first reconcile (which seeds
    the record from EC2) is done; EC2's call log starts empty after it."""
    agent = worker_for(tmp_path, ec2, settle_seconds=settle_seconds).agent
    (tmp_path / "run/netns").mkdir(parents=True)
    for name, ip in (pods or {}).items():
        live_pod(agent, tmp_path, name, ip)
    assert agent.reconcile_all(timeout=10) is True
    assert ec2.actions() == [DESCRIBE]
    ec2.calls.clear()
    return agent


def imds_of(agent: Agent) -> ScriptedImds:
    assert isinstance(agent.imds, ScriptedImds)
    return agent.imds


def live_pod(agent: Agent, tmp_path: Path, name: str, ip: str) -> None:
    (tmp_path / f"run/netns/cni-{name}").touch()
    agent.records.put(
        PodAttachment(name, "net1", f"/var/run/netns/cni-{name}", "multus1", (ip,), name)
    )


def test_a_reconcile_at_rest_reads_imds_and_calls_ec2_not_at_all(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33"})
    agent = worker_for(tmp_path, ec2, settle_seconds=0.0).agent
    (tmp_path / "run/netns").mkdir(parents=True)
    live_pod(agent, tmp_path, "running", "10.0.4.33")
    assert agent.reconcile_all(timeout=10) is True
    ec2.calls.clear()

    for _ in range(3):
        assert agent.reconcile_all(timeout=10) is True

    assert ec2.calls == []
    assert imds_of(agent).reads["network/interfaces/macs/02:00:00:00:00:01/local-ipv4s"] == 3


def cni(agent: Agent, command: str, name: str, ip: str) -> None:
    agent.handle(
        {
            "command": command,
            "container_id": name,
            "ifname": "net1",
            "interface": "multus1",
            "netns": f"/var/run/netns/cni-{name}",
            "ips": [ip],
        }
    )


def test_imds_lagging_the_agents_own_changes_within_the_settle_time_is_not_questioned(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_once(tmp_path, ec2, settle_seconds=30.0)
    live_pod(agent, tmp_path, "new", "10.0.4.34")
    cni(agent, "ADD", "new", "10.0.4.34")
    live_pod(agent, tmp_path, "old", "10.0.4.35")
    cni(agent, "ADD", "old", "10.0.4.35")
    cni(agent, "DEL", "old", "10.0.4.35")
    ec2.calls.clear()
    # IMDS lags: it does not list the new address yet and still lists the released one.
    imds_of(agent).moving = {"10.0.4.34"}
    imds_of(agent).lingering = {"10.0.4.35"}

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.calls == []


def test_imds_contradicting_the_record_past_the_settle_time_is_settled_by_ec2(
    tmp_path: Path,
) -> None:
    # Someone outside the agent removed a running pod's address; IMDS shows it.
    ec2 = ScriptedEc2({"10.0.4.33"})
    agent = reconciled_once(tmp_path, ec2, settle_seconds=0.2, pods={"running": "10.0.4.33"})
    ec2.secondaries.clear()
    time.sleep(0.25)

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.actions() == [DESCRIBE, "AssignPrivateIpAddresses"]
    assert ec2.secondaries == {"10.0.4.33"}


def test_the_same_disagreement_within_the_settle_time_waits_for_imds(tmp_path: Path) -> None:
    # The boundary of the previous test: the address changed 0 s ago, the settle time is 30 s.
    ec2 = ScriptedEc2({"10.0.4.33"})
    agent = reconciled_once(tmp_path, ec2, settle_seconds=30.0, pods={"running": "10.0.4.33"})
    ec2.secondaries.clear()
    agent.workers["multus1"].touch(("10.0.4.33",))

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.calls == []


def test_an_address_imds_lists_beyond_the_record_is_checked_with_ec2_and_released(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_once(tmp_path, ec2, settle_seconds=0.0)
    ec2.secondaries.add("10.0.4.40")  # assigned while the record did not see it; no pod has it

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.actions() == [DESCRIBE, "UnassignPrivateIpAddresses"]
    assert ec2.secondaries == set()


def test_an_eni_missing_from_imds_is_asked_of_ec2(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_once(tmp_path, ec2, settle_seconds=30.0)
    imds = imds_of(agent)
    imds._values["network/interfaces/macs/"] = "02:00:00:00:00:aa/"
    agent.workers["multus1"]._mac = ""

    assert agent.reconcile_all(timeout=10) is True

    assert ec2.actions() == [DESCRIBE]


def test_imds_not_answering_fails_the_reconcile_without_asking_ec2(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    agent = reconciled_once(tmp_path, ec2, settle_seconds=0.0)

    def unanswered(path: str) -> str:
        raise OSError("connection refused")

    imds_of(agent).get = unanswered  # type: ignore[method-assign]

    assert agent.reconcile_all(timeout=10) is False
    assert ec2.calls == []
