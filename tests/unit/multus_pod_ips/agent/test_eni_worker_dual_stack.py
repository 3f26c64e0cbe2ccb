"""The ENI worker on a dual-stack network: pod IPv6 addresses assigned and released like the
IPv4 ones, batched per family, within the per-ENI limit, never moved from another ENI, and
reconciled against IMDS ipv6s.

Sources: EC2 API reference, AssignIpv6Addresses (Ipv6Addresses.N; "You can assign as many IPv6
addresses to a network interface as you can assign private IPv4 addresses, and the limit varies
by instance type"; no AllowReassignment parameter, unlike AssignPrivateIpAddresses) and
UnassignIpv6Addresses (Ipv6Addresses.N); EC2 User Guide, "Instance metadata categories"
(network/interfaces/macs/mac/ipv6s: the IPv6 addresses associated with the interface).
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path

import pytest

from multus_pod_ips.agent.config import AgentError
from multus_pod_ips.agent.ec2_query import Ec2Error
from multus_pod_ips.agent.eni_worker import ADDRESS_ON_ANOTHER_ENI, Operation
from multus_pod_ips.agent.records import PodAttachment
from multus_pod_ips.cni_plugin import ADDRESS_IN_USE, ENI_FULL, INVALID_CONFIG, TRY_AGAIN_LATER
from tests.unit.multus_pod_ips.agent.test_eni_worker import DESCRIBE, imds_of
from tests.unit.multus_pod_ips.fakes import SEED_IPV6, AgentWorker, ScriptedEc2, settle, worker_for

IPV4_RANGE, IPV6_RANGE = "10.0.4.32/27", "2600:1f14:0:4::100/120"
DUAL_STACK = {"multus1": [IPV4_RANGE, IPV6_RANGE]}


def pod_ipv6(host: int) -> str:
    return f"2600:1f14:0:4::1{host:02x}"


def dual_stack_worker(
    tmp_path: Path, ec2: ScriptedEc2, limit: int = 10, **overrides: object
) -> AgentWorker:
    return worker_for(tmp_path, ec2, limit, interfaces=DUAL_STACK, **overrides)


def test_a_burst_of_both_families_costs_one_assign_call_per_family(tmp_path: Path) -> None:
    ec2 = ScriptedEc2(ipv6s={SEED_IPV6})
    worker = dual_stack_worker(tmp_path, ec2)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    operations = [
        worker.submit(Operation("assign", ip, deadline))
        for host in range(3)
        for ip in (f"10.0.4.{33 + host}", pod_ipv6(host))
    ]
    ec2.gate.set()

    assert settle(operations) == [None] * 6
    assert ec2.actions() == [DESCRIBE, "AssignPrivateIpAddresses", "AssignIpv6Addresses"]
    (ipv6_call,) = [params for action, params in ec2.calls if action == "AssignIpv6Addresses"]
    # IPv6 has no AllowReassignment (an unknown parameter EC2 would refuse).
    assert ipv6_call == {
        "NetworkInterfaceId": "eni-1",
        "Ipv6Addresses.1": pod_ipv6(0),
        "Ipv6Addresses.2": pod_ipv6(1),
        "Ipv6Addresses.3": pod_ipv6(2),
    }
    assert ec2.ipv6s == {SEED_IPV6, pod_ipv6(0), pod_ipv6(1), pod_ipv6(2)}
    assert ec2.secondaries == {"10.0.4.33", "10.0.4.34", "10.0.4.35"}


def test_a_release_of_both_families_costs_one_unassign_call_per_family(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({"10.0.4.33", "10.0.4.34"}, ipv6s={SEED_IPV6, pod_ipv6(0), pod_ipv6(1)})
    worker = dual_stack_worker(tmp_path, ec2)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    ips = ("10.0.4.33", "10.0.4.34", pod_ipv6(0), pod_ipv6(1))
    operations = [worker.submit(Operation("unassign", ip, deadline)) for ip in ips]
    ec2.gate.set()

    assert settle(operations) == [None] * 4
    assert ec2.actions() == [DESCRIBE, "UnassignPrivateIpAddresses", "UnassignIpv6Addresses"]
    assert ec2.addresses_sent("UnassignIpv6Addresses") == [sorted([pod_ipv6(0), pod_ipv6(1)])]
    assert (ec2.secondaries, ec2.ipv6s) == (set(), {SEED_IPV6})


def test_ipv6_addresses_beyond_the_per_eni_limit_fail_and_the_rest_are_assigned(
    tmp_path: Path,
) -> None:
    # The limit counts every IPv6 address of the ENI, the seed included: 1 + 2 of 3 fit.
    ec2 = ScriptedEc2(ipv6s={SEED_IPV6})
    worker = dual_stack_worker(tmp_path, ec2, limit=3)
    ec2.gate.clear()
    deadline = time.monotonic() + 30
    operations = [worker.submit(Operation("assign", pod_ipv6(h), deadline)) for h in range(3)]
    ec2.gate.set()

    errors = settle(operations)
    assert errors[:2] == [None, None]
    assert errors[2] is not None and errors[2].code == ENI_FULL
    assert "holds 3 of the 3 IPv6 addresses" in errors[2].message
    assert ec2.ipv6s == {SEED_IPV6, pod_ipv6(0), pod_ipv6(1)}


def test_ipv4_addresses_do_not_count_against_the_ipv6_limit(tmp_path: Path) -> None:
    ec2 = ScriptedEc2({f"10.0.4.{h}" for h in range(33, 36)})  # 4 of 4 IPv4 with the primary
    worker = dual_stack_worker(tmp_path, ec2, limit=4)
    deadline = time.monotonic() + 30

    assert settle([worker.submit(Operation("assign", pod_ipv6(0), deadline))]) == [None]
    assert ec2.ipv6s == {pod_ipv6(0)}


def test_an_ipv6_address_on_another_eni_is_not_taken_and_the_add_is_retried(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2()
    worker = dual_stack_worker(tmp_path, ec2)
    ec2.failures = [Ec2Error(ADDRESS_ON_ANOTHER_ENI, "Address in use", retryable=False)]
    deadline = time.monotonic() + 30

    (error,) = settle([worker.submit(Operation("assign", pod_ipv6(0), deadline))])

    assert error is not None and error.code == TRY_AGAIN_LATER
    assert "AllowReassignment" in error.message
    assert ec2.ipv6s == set()


def test_a_fixed_ipv6_address_on_another_eni_is_in_use(tmp_path: Path) -> None:
    ec2 = ScriptedEc2()
    worker = dual_stack_worker(tmp_path, ec2)
    ec2.failures = [Ec2Error(ADDRESS_ON_ANOTHER_ENI, "Address in use", retryable=False)]
    deadline = time.monotonic() + 30

    (error,) = settle([worker.submit(Operation("assign", pod_ipv6(0), deadline, reassign=False))])

    assert error is not None and error.code == ADDRESS_IN_USE


def dual_stack_pods(tmp_path: Path, worker: AgentWorker, pods: dict[str, tuple[str, ...]]) -> None:
    (tmp_path / "run/netns").mkdir(parents=True, exist_ok=True)
    for name, ips in pods.items():
        (tmp_path / f"run/netns/cni-{name}").touch()
        worker.agent.records.put(
            PodAttachment(name, "net1", f"/var/run/netns/cni-{name}", "multus1", ips, name)
        )


def test_the_reconcile_releases_and_restores_both_families(tmp_path: Path) -> None:
    # EC2 holds a pod's pair that is gone (.33 / ::100) and lacks one of a live pod (::101);
    # the seed address lies outside the ranges the agent manages and stays.
    ec2 = ScriptedEc2({"10.0.4.33", "10.0.4.34"}, ipv6s={SEED_IPV6, pod_ipv6(0)})
    worker = dual_stack_worker(tmp_path, ec2, settle_seconds=0)
    dual_stack_pods(tmp_path, worker, {"live": ("10.0.4.34", pod_ipv6(1))})

    assert worker.agent.reconcile_all(timeout=10) is True

    assert ec2.ipv6s == {SEED_IPV6, pod_ipv6(1)}
    assert ec2.secondaries == {"10.0.4.34"}
    assert ec2.addresses_sent("UnassignIpv6Addresses") == [[pod_ipv6(0)]]
    assert ec2.addresses_sent("AssignIpv6Addresses") == [[pod_ipv6(1)]]


def test_a_reconcile_at_rest_reads_both_imds_keys_and_calls_ec2_not_at_all(
    tmp_path: Path,
) -> None:
    ec2 = ScriptedEc2({"10.0.4.34"}, ipv6s={SEED_IPV6, pod_ipv6(1)})
    worker = dual_stack_worker(tmp_path, ec2, settle_seconds=0)
    dual_stack_pods(tmp_path, worker, {"live": ("10.0.4.34", pod_ipv6(1))})
    assert worker.agent.reconcile_all(timeout=10) is True
    ec2.calls.clear()

    assert worker.agent.reconcile_all(timeout=10) is True

    assert ec2.calls == []
    reads = imds_of(worker.agent).reads
    assert [path.rsplit("/", 1)[1] for path in reads if path.endswith(("ipv4s", "ipv6s"))] == [
        "local-ipv4s",
        "ipv6s",
    ]


def test_an_ipv6_address_imds_lacks_past_the_settle_time_is_asked_of_ec2(tmp_path: Path) -> None:
    ec2 = ScriptedEc2(ipv6s={SEED_IPV6, pod_ipv6(1)})
    worker = dual_stack_worker(tmp_path, ec2, settle_seconds=0)
    dual_stack_pods(tmp_path, worker, {"live": (pod_ipv6(1),)})
    assert worker.agent.reconcile_all(timeout=10) is True
    ec2.calls.clear()
    imds_of(worker.agent).moving = {pod_ipv6(1)}  # the record says held, IMDS does not

    assert worker.agent.reconcile_all(timeout=10) is True

    assert ec2.actions() == [DESCRIBE]


def test_an_ipv6_address_spelled_another_way_is_the_same_address(tmp_path: Path) -> None:
    # The plugin passes the address as the pod's IPAM wrote it (a static range may spell it
    # expanded or in capitals); EC2 and IMDS answer in RFC 5952's compressed lowercase form.
    ec2 = ScriptedEc2(ipv6s={SEED_IPV6, pod_ipv6(1)})
    worker = dual_stack_worker(tmp_path, ec2, settle_seconds=0)
    (tmp_path / "run/netns").mkdir(parents=True, exist_ok=True)
    (tmp_path / "run/netns/cni-live").touch()
    spelled = ipaddress.ip_address(pod_ipv6(1)).exploded.upper()
    request = {"command": "ADD", "container_id": "live", "ifname": "net1", "interface": "multus1"}
    worker.agent.handle({**request, "netns": "/run/netns/cni-live", "ips": [spelled]})

    assert worker.agent.reconcile_all(timeout=10) is True

    assert ec2.ipv6s == {SEED_IPV6, pod_ipv6(1)}
    assert ec2.addresses_sent("AssignIpv6Addresses") == [[pod_ipv6(1)]]
    assert "UnassignIpv6Addresses" not in ec2.actions()
    assert [record.ips for record in worker.agent.records.all()] == [(pod_ipv6(1),)]


def test_a_request_address_that_is_none_is_an_invalid_config(tmp_path: Path) -> None:
    worker = dual_stack_worker(tmp_path, ScriptedEc2())
    request = {"command": "ADD", "container_id": "c", "ifname": "net1", "interface": "multus1"}

    with pytest.raises(AgentError) as refused:
        worker.agent.handle({**request, "ips": ["2600:1f14::zz"]})

    assert refused.value.code == INVALID_CONFIG
    assert "2600:1f14::zz" in str(refused.value)


def test_an_ipv4_only_worker_never_reads_ipv6s(tmp_path: Path) -> None:
    ec2 = ScriptedEc2(ipv6s={SEED_IPV6})  # the ENI has IPv6; the agent manages none of it
    worker = worker_for(tmp_path, ec2, settle_seconds=0)
    assert worker.agent.reconcile_all(timeout=10) is True
    ec2.calls.clear()

    assert worker.agent.reconcile_all(timeout=10) is True

    assert ec2.calls == []
    assert not [path for path in imds_of(worker.agent).reads if path.endswith("ipv6s")]
