"""The pod IP agent and CNI plugin as processes against the emulator (moto + fake IMDS + proxy).

The proxy's EniAddressModel makes moto behave like EC2 for secondary addresses (one ENI per
address, AllowReassignment, per-ENI limits), so each ENI's address set is what the VPC would
deliver to.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from node_bootstrap import CLUSTER_TAG_KEY
from node_bootstrap.pod_ip_iam import POD_IP_ACTIONS, POD_IP_READ_ACTIONS
from testing_support.eni_addresses import EniAddressModel
from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    Ec2Emulator,
    EmulatedVpc,
    Fault,
)
from testing_support.pod_ip_node import (
    PodIpNode,
    address_model,
    outcome,
    pod_ip_vpc,
    wait_until,
)

pytestmark = pytest.mark.integration

CLUSTER = "telco-cluster"
AZ = AVAILABILITY_ZONES[0]


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    return pod_ip_vpc(emulator)


@pytest.fixture
def nodes(emulator: Ec2Emulator) -> Iterator[list[PodIpNode]]:
    started: list[PodIpNode] = []
    emulator.proxy.reset()
    emulator.proxy.latency_seconds = 0.0
    yield started
    for node in started:
        node.stop_agent()
    emulator.proxy.latency_seconds = 0.0
    emulator.proxy.reset()


def new_node(
    nodes: list[PodIpNode], emulator: Ec2Emulator, vpc: EmulatedVpc, **options: object
) -> PodIpNode:
    node = PodIpNode.bootstrap(emulator, vpc, AZ, CLUSTER, **options)  # type: ignore[arg-type]
    nodes.append(node)
    node.start_agent()
    return node


def test_pods_added_and_deleted_leave_exactly_their_addresses_on_their_networks_enis(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    bystander = new_node(nodes, emulator, vpc)

    for container, ip, master in (
        ("a", "10.0.4.33", "multus1"),
        ("b", "10.0.4.34", "multus1"),
        ("c", "10.0.6.33", "multus2"),
    ):
        added = node.add_pod(container, ip, master)
        assert added.status == 0, added.stdout
    assert node.addresses("multus1") == {"10.0.4.33", "10.0.4.34"}
    assert node.addresses("multus2") == {"10.0.6.33"}

    assert node.delete_pod("a", "10.0.4.33").status == 0
    assert node.delete_pod("c", "10.0.6.33", "multus2").status == 0
    assert node.addresses("multus1") == {"10.0.4.34"}
    assert node.addresses("multus2") == set()
    # A repeated DEL (the runtime retries) is a success and changes nothing.
    assert node.delete_pod("a", "10.0.4.33").status == 0
    assert node.addresses("multus1") == {"10.0.4.34"}
    assert bystander.addresses("multus1") == bystander.addresses("multus2") == set()


def test_concurrent_requests_on_one_eni_share_ec2_calls(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    emulator.proxy.latency_seconds = 0.3
    ips = [f"10.0.4.{host}" for host in range(40, 48)]
    pending = []
    for index, ip in enumerate(ips):
        node.netns(f"burst{index}")
        pending.append(node.cni_command("ADD", f"burst{index}", ip=ip))
    emulator.proxy.reset()
    for started in pending:
        started.release()
    assert all(outcome(started).status == 0 for started in pending)

    calls = [call for call in emulator.proxy.calls if call.action == "AssignPrivateIpAddresses"]
    # A call answered with 5xx is retried as it should be; count what EC2 accepted.
    accepted = [call for call in calls if call.status == 200]
    assigned = [v for call in accepted for k, v in call.params.items() if k.startswith("Private")]
    diagnostics = ([(call.status, call.params) for call in calls], node.agent_log())
    assert sorted(assigned) == sorted(ips), diagnostics  # every address once, none twice
    assert len(accepted) < len(ips) / 2, diagnostics
    assert node.addresses("multus1") == set(ips), node.agent_log()


def test_injected_throttling_is_retried_until_every_address_is_assigned(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    throttled = Fault("RequestLimitExceeded", 503, action="AssignPrivateIpAddresses", times=4)
    ips = [f"10.0.4.{host}" for host in range(50, 55)]
    pending = []
    for index, ip in enumerate(ips):
        node.netns(f"throttled{index}")
        pending.append(node.cni_command("ADD", f"throttled{index}", ip=ip))
    emulator.proxy.reset([throttled])
    results = [outcome(started) for started in pending]

    assert [result.status for result in results] == [0] * len(ips)
    statuses = [c.status for c in emulator.proxy.calls if c.action == "AssignPrivateIpAddresses"]
    assert statuses.count(503) == 4 and statuses[-1] == 200
    assert node.addresses("multus1") == set(ips)


def test_a_pod_beyond_the_enis_address_limit_fails_with_a_clear_cni_error(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    # m5.large: 10 IPv4 addresses per ENI (EC2 DescribeInstanceTypes), the primary included.
    node = new_node(nodes, emulator, vpc, instance_type="m5.large")
    for host in range(33, 42):
        assert node.add_pod(f"fits{host}", f"10.0.4.{host}").status == 0

    refused = node.add_pod("one-too-many", "10.0.4.42")

    assert refused.status == 1, node.agent_log()
    assert refused.json["code"] == 101
    assert "holds 10 of the 10 IPv4 addresses" in refused.json["msg"]
    assert "m5.large" in refused.json["msg"]
    assert "10.0.4.42" not in node.addresses("multus1")
    assert len(node.addresses("multus1")) == 9


def test_reconcile_repairs_what_a_killed_agent_left_behind(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    assert node.add_pod("gone", "10.0.4.60").status == 0
    assert node.add_pod("kept", "10.0.4.61").status == 0

    # Killed in the middle of an ADD whose EC2 call is in flight.
    emulator.proxy.latency_seconds = 1.0
    node.netns("interrupted")
    interrupted = node.cni_command("ADD", "interrupted", ip="10.0.4.62")
    interrupted.release()
    records = node.root / "run/multus-pod-ips/pods"
    assert wait_until(lambda: any(records.glob("interrupted*")))
    time.sleep(0.3)  # the Assign call is now waiting in the proxy
    node.kill_agent()
    assert outcome(interrupted).status == 1  # the runtime tears the sandbox down and retries
    emulator.proxy.latency_seconds = 0.0
    assert node.cni("DEL", "interrupted", ip="10.0.4.62").status == 0  # agent down: no error
    node.remove_netns("interrupted")
    # While the agent is down: a pod goes away (its DEL is lost) and another pod's address
    # disappears from the ENI.
    assert node.cni("DEL", "gone", ip="10.0.4.60").status == 0
    node.remove_netns("gone")
    emulator.ec2.unassign_private_ip_addresses(
        NetworkInterfaceId=node.enis["multus1"], PrivateIpAddresses=["10.0.4.61"]
    )

    node.start_agent()

    assert wait_until(lambda: node.addresses("multus1") == {"10.0.4.61"}), node.agent_log()


def test_a_reboot_releases_every_managed_address_and_nothing_else(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    assert node.add_pod("before-reboot", "10.0.4.36").status == 0
    # Outside the Whereabouts range: not ours to manage.
    emulator.ec2.assign_private_ip_addresses(
        NetworkInterfaceId=node.enis["multus1"], PrivateIpAddresses=["10.0.4.200"]
    )
    node.stop_agent()
    for path in (node.root / "run").rglob("*"):  # /run is a tmpfs
        if path.is_file():
            path.unlink()

    node.start_agent()

    assert wait_until(lambda: node.addresses("multus1") == {"10.0.4.200"}), node.agent_log()


def test_a_pod_moved_to_another_node_takes_its_address_along(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    old_node = new_node(nodes, emulator, vpc)
    new = new_node(nodes, emulator, vpc)
    assert old_node.add_pod("v1", "10.0.4.45").status == 0

    # The old node is cut off (no DEL reaches it); Whereabouts hands the address to the
    # pod's replacement on the new node.
    old_node.kill_agent()
    assert new.add_pod("v2", "10.0.4.45").status == 0

    assert new.addresses("multus1") == {"10.0.4.45"}
    assert old_node.addresses("multus1") == set()
    # The old node comes back with the old pod's namespace still there: its reconcile must
    # not take the address back from the newer pod.
    old_node.start_agent()
    local_ipv4s = f"network/interfaces/macs/{old_node.mac('multus1')}/local-ipv4s"
    reads = emulator.imds.reads[old_node.instance_id, local_ipv4s]
    assert wait_until(lambda: emulator.imds.reads[old_node.instance_id, local_ipv4s] >= reads + 3)
    assert new.addresses("multus1") == {"10.0.4.45"}
    assert old_node.addresses("multus1") == set()


@pytest.fixture
def slow_remap(emulator: Ec2Emulator, vpc: EmulatedVpc) -> Iterator[EniAddressModel]:
    model = address_model(emulator)
    yield model
    model.remap_seconds = 0.0


def test_add_of_a_moved_address_answers_once_imds_lists_it_on_the_new_node(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    nodes: list[PodIpNode],
    slow_remap: EniAddressModel,
) -> None:
    # EC2 API reference, AssignPrivateIpAddresses: remapping is asynchronous; IMDS
    # network/interfaces/macs/<mac>/local-ipv4s confirms that it is complete. Until then the
    # VPC may deliver to the old node, so the new pod's containers must not start yet.
    old_node, new = new_node(nodes, emulator, vpc), new_node(nodes, emulator, vpc)
    assert old_node.add_pod("r1", "10.0.4.46").status == 0
    old_node.kill_agent()
    slow_remap.remap_seconds = 1.5

    started = time.monotonic()
    pending = new.cni_command("ADD", "r2", ip="10.0.4.46")
    new.netns("r2")
    pending.release()
    assert wait_until(lambda: new.addresses("multus1") == {"10.0.4.46"}, timeout=5)
    assert "10.0.4.46" in old_node.imds_local_ipv4s()  # EC2 moved it; the VPC has not yet
    added = outcome(pending)

    assert added.status == 0, (added.stdout, new.agent_log())
    assert time.monotonic() - started >= 1.5
    assert "10.0.4.46" in new.imds_local_ipv4s()
    assert "10.0.4.46" not in old_node.imds_local_ipv4s()


def test_add_of_a_move_that_never_completes_fails_and_leaves_nothing_behind(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    nodes: list[PodIpNode],
    slow_remap: EniAddressModel,
) -> None:
    old_node = new_node(nodes, emulator, vpc)
    new = new_node(nodes, emulator, vpc, add_timeout_seconds=2.0)
    assert old_node.add_pod("n1", "10.0.4.47").status == 0
    old_node.kill_agent()
    slow_remap.remap_seconds = math.inf

    added = new.add_pod("n2", "10.0.4.47")

    assert added.status == 1
    assert (added.json["code"], "local-ipv4s" in added.json["msg"]) == (11, True), added.json
    # The new node recorded no pod and releases the address again: nothing leaks there.
    assert list((new.root / "run/multus-pod-ips/pods").glob("*.json")) == []
    assert wait_until(lambda: new.addresses("multus1") == set(), timeout=5), new.agent_log()
    unassigned = [
        c.params for c in emulator.proxy.calls if c.action == "UnassignPrivateIpAddresses"
    ]
    assert {
        "NetworkInterfaceId": new.enis["multus1"],
        "PrivateIpAddress.1": "10.0.4.47",
    }.items() <= (unassigned[-1].items())


def test_check_confirms_an_assigned_address_and_fails_after_delete(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)
    assert node.add_pod("checked", "10.0.4.37").status == 0

    assert node.cni("CHECK", "checked", ip="10.0.4.37").status == 0
    assert node.delete_pod("checked", "10.0.4.37").status == 0
    after_delete = node.cni("CHECK", "checked", ip="10.0.4.37")

    assert after_delete.status == 1
    assert after_delete.json["code"] == 102


def test_an_address_outside_the_managed_ranges_is_refused(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    node = new_node(nodes, emulator, vpc)

    refused = node.add_pod("misconfigured", "10.0.4.100")

    assert refused.status == 1
    assert refused.json["code"] == 7
    assert "10.0.4.32/27" in refused.json["msg"]
    assert node.addresses("multus1") == set()


# Fixed addresses (a static NAD's pods: multus.networks[].subnets[].static_range) ------------

# Addresses of multus1's static range 10.0.4.48/28 in the first AZ, one per test: the
# module's emulator keeps what a test's nodes left on their ENIs.
FIXED_ADDRESSES = iter(f"10.0.4.{host}" for host in range(55, 60))  # others use 50-54, 60-62


@pytest.fixture
def fixed() -> str:
    return next(FIXED_ADDRESSES)


ADDRESS_IN_USE = 105  # multus_pod_ips.cni_plugin.ADDRESS_IN_USE


def assign_calls(emulator: Ec2Emulator, ip: str) -> list[dict[str, str]]:
    return [
        call.params
        for call in emulator.proxy.calls
        if call.action == "AssignPrivateIpAddresses" and ip in call.params.values()
    ]


def test_a_fixed_address_is_assigned_without_reassignment_and_released(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode], fixed: str
) -> None:
    node = new_node(nodes, emulator, vpc)
    emulator.proxy.reset()

    added = node.add_pod("upf-n3", fixed, fixed=True)

    assert added.status == 0, (added.stdout, node.agent_log())
    assert node.addresses("multus1") == {fixed}
    assert [c["AllowReassignment"] for c in assign_calls(emulator, fixed)] == ["false"]
    assert node.delete_pod("upf-n3", fixed, fixed=True).status == 0
    assert node.addresses("multus1") == set()


def test_a_fixed_address_follows_its_pod_to_another_node_after_the_old_pods_del(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode], fixed: str
) -> None:
    old_node, new = new_node(nodes, emulator, vpc), new_node(nodes, emulator, vpc)
    assert old_node.add_pod("upf-0-old", fixed, fixed=True).status == 0

    assert old_node.delete_pod("upf-0-old", fixed, fixed=True).status == 0
    moved = new.add_pod("upf-0-new", fixed, fixed=True)

    assert moved.status == 0, (moved.stdout, new.agent_log())
    assert new.addresses("multus1") == {fixed}
    assert old_node.addresses("multus1") == set()
    assert fixed in new.imds_local_ipv4s()


def test_a_fixed_address_another_node_holds_is_refused_until_that_pod_released_it(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode], fixed: str
) -> None:
    """EC2 API reference, AssignPrivateIpAddresses: AllowReassignment says whether an address
    already assigned to another network interface may be moved; without it EC2 refuses with
    InvalidIPAddress.InUse ("Error codes for the Amazon EC2 API"; moto ignores the flag:
    testing_support/eni_addresses.py refuses as EC2 does). Nothing leases a fixed address, so
    the second pod must fail instead of taking the first one's address."""
    holder, other = new_node(nodes, emulator, vpc), new_node(nodes, emulator, vpc)
    assert holder.add_pod("smf-a", fixed, fixed=True).status == 0

    refused = other.add_pod("smf-b", fixed, fixed=True)

    assert refused.status == 1
    assert refused.json["code"] == ADDRESS_IN_USE, refused.json
    message = refused.json["msg"]
    for fragment in (f"fixed address {fixed}", "another ENI", "InvalidIPAddress.InUse"):
        assert fragment in message, message
    assert "kubelet retries this ADD" in message, message
    assert holder.addresses("multus1") == {fixed}
    assert other.addresses("multus1") == set()
    assert list((other.root / "run/multus-pod-ips/pods").glob("*.json")) == []
    # The kubelet's retry succeeds once the first pod's DEL released the address.
    assert holder.delete_pod("smf-a", fixed, fixed=True).status == 0
    retried = other.cni("ADD", "smf-b", ip=fixed, fixed=True)
    assert retried.status == 0, (retried.stdout, other.agent_log())
    assert other.addresses("multus1") == {fixed}


def test_a_fixed_address_asked_twice_on_one_node_is_refused_while_its_pod_lives(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode], fixed: str
) -> None:
    node = new_node(nodes, emulator, vpc)
    assert node.add_pod("amf-a", fixed, fixed=True).status == 0

    refused = node.add_pod("amf-b", fixed, fixed=True)

    assert refused.status == 1
    assert refused.json["code"] == ADDRESS_IN_USE, refused.json
    assert f"fixed address {fixed} is held by pod default/pod-amf-a" in refused.json["msg"]
    assert "on this node" in refused.json["msg"]
    # The first pod keeps its address, and a retried ADD of its own container is no clash.
    assert node.addresses("multus1") == {fixed}
    assert node.cni("ADD", "amf-a", ip=fixed, fixed=True).status == 0
    assert node.delete_pod("amf-a", fixed, fixed=True).status == 0
    retried = node.cni("ADD", "amf-b", ip=fixed, fixed=True)
    assert retried.status == 0, (retried.stdout, node.agent_log())
    assert node.addresses("multus1") == {fixed}


@pytest.mark.parametrize("ip", ["10.0.4.47", "10.0.4.64"])  # just below / above 10.0.4.48/28
def test_a_fixed_address_outside_the_static_range_is_refused(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode], ip: str
) -> None:
    node = new_node(nodes, emulator, vpc)

    refused = node.add_pod("misconfigured-static", ip, fixed=True)

    assert refused.status == 1
    assert refused.json["code"] == 7, refused.json
    expected = "10.0.4.48/28" if ip == "10.0.4.47" else "10.0.4.32/27"  # outside everything
    assert expected in refused.json["msg"], refused.json
    assert node.addresses("multus1") == set()


def test_every_ec2_action_the_agent_calls_is_granted_to_the_node_role(
    emulator: Ec2Emulator, vpc: EmulatedVpc, nodes: list[PodIpNode]
) -> None:
    # By name here; tests/integration/test_iam_call_level.py evaluates each call (ENI tags and
    # subnet) against the synthesized node role policy.
    node = PodIpNode.bootstrap(emulator, vpc, AZ, CLUSTER)
    nodes.append(node)
    emulator.proxy.reset()  # the agent's calls only, not the bootstrap's
    node.start_agent()
    assert node.add_pod("granted", "10.0.4.38").status == 0
    assert node.delete_pod("granted", "10.0.4.38").status == 0
    node.stop_agent()

    called = {f"ec2:{call.action}" for call in emulator.proxy.calls}
    assert called == set(POD_IP_ACTIONS) | set(POD_IP_READ_ACTIONS)
    # Only this node's ENIs in Multus subnets, which carry the cluster tag the policy requires.
    changed = {
        call.params["NetworkInterfaceId"]
        for call in emulator.proxy.calls
        if call.action.endswith("PrivateIpAddresses")
    }
    assert changed == {node.enis["multus1"]}
    tags = emulator.ec2.describe_network_interfaces(NetworkInterfaceIds=list(changed))[
        "NetworkInterfaces"
    ][0]["TagSet"]
    assert {"Key": CLUSTER_TAG_KEY, "Value": CLUSTER} in tags
