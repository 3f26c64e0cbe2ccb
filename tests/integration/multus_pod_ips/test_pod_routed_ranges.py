"""Routes that follow a pod: the agent and plugin as processes against the emulator.

A UPF pod answers for a UE pool (10.45.0.0/16) that is in no subnet; the VPC reaches it only
through a route in the network's route tables to the ENI of the node where the pod runs
(EC2 API reference, CreateRoute/ReplaceRoute: NetworkInterfaceId as the target). The pod asks
for the range in its network annotation's cni-args, which Multus merges into each plugin's
configuration as args.cni (multus-cni pkg/types/conf.go, LoadDelegateNetConf ->
addCNIArgsInConfList -> injectCNIArgs). The route must point at the node of the pod's latest
ADD, whatever the order of the old node's DEL; and the node role's policy must allow exactly
those calls on those route tables (Service Authorization Reference: CreateRoute and ReplaceRoute
take the route-table resource only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_iam as iam

from stacks.multus_eni_policy import grant_multus_eni_management
from testing_support.iam_call_level import AgentRun, agent_requests, denied, resources
from testing_support.iam_reference import TemplateResolver, role_statements
from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    REGION,
    Ec2Emulator,
    EmulatedVpc,
    Fault,
)
from testing_support.pod_ip_node import PodIpNode, pod_ip_vpc

pytestmark = pytest.mark.integration

CLUSTER = "telco-cluster"
AZ = AVAILABILITY_ZONES[0]
UE_POOL = "10.45.0.0/16"


@pytest.fixture(scope="module")
def emulator_with_probe(emulator: Ec2Emulator) -> Ec2Emulator:
    emulator.proxy.state_probe = emulator.ec2_state
    return emulator


@pytest.fixture(scope="module")
def vpc(emulator_with_probe: Ec2Emulator) -> EmulatedVpc:
    return pod_ip_vpc(emulator_with_probe)


@pytest.fixture(scope="module")
def route_tables(emulator: Ec2Emulator, vpc: EmulatedVpc) -> list[str]:
    """One route table per multus1 subnet (AZ), as the network stack makes them."""
    tables = []
    for az in AVAILABILITY_ZONES:
        table = emulator.ec2.create_route_table(VpcId=vpc.vpc_id)["RouteTable"]["RouteTableId"]
        emulator.ec2.associate_route_table(
            RouteTableId=table, SubnetId=vpc.multus_subnets["multus1", az]
        )
        tables.append(table)
    return tables


@pytest.fixture
def nodes(emulator: Ec2Emulator) -> Iterator[list[PodIpNode]]:
    started: list[PodIpNode] = []
    emulator.proxy.reset()
    yield started
    for node in started:
        node.stop_agent()
    emulator.proxy.reset()


def routed_node(
    nodes: list[PodIpNode], emulator: Ec2Emulator, vpc: EmulatedVpc, route_tables: list[str]
) -> PodIpNode:
    node = PodIpNode.bootstrap(
        emulator,
        vpc,
        AZ,
        CLUSTER,
        routed_ranges={"multus1": [UE_POOL]},
        route_tables={"multus1": route_tables},
    )
    nodes.append(node)
    node.start_agent()
    return node


def upf_network(node: PodIpNode, asked: list[str]) -> dict[str, Any]:
    """The NAD's plugin entry (podRoutedRanges: the network's ranges) with the pod's cni-args
    merged in as Multus does (args.cni)."""
    return {
        "cniVersion": "0.3.1",
        "name": "n6-test",
        "type": "multus-pod-ip",
        "master": "multus1",
        "agentSocket": str(node.socket_path),
        "podRoutedRanges": [UE_POOL],
        "args": {"cni": {"podRoutedRanges": asked}},
    }


def add_upf(node: PodIpNode, container: str, ip: str, asked: list[str] | None = None) -> Any:
    node.netns(container)
    return node.cni(
        "ADD", container, ip=ip, config=upf_network(node, [UE_POOL] if asked is None else asked)
    )


def targets(emulator: Ec2Emulator, route_tables: list[str]) -> list[str | None]:
    """The ENI each route table sends the UE pool to (None: no such route)."""
    found = []
    for table in route_tables:
        (described,) = emulator.ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"]
        routes = [r for r in described["Routes"] if r.get("DestinationCidrBlock") == UE_POOL]
        found.append(routes[0].get("NetworkInterfaceId") if routes else None)
    return found


@pytest.mark.parametrize("old_node_deletes_first", [False, True])
def test_the_ue_pool_route_follows_the_upf_pod_to_its_new_node(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    route_tables: list[str],
    nodes: list[PodIpNode],
    old_node_deletes_first: bool,
) -> None:
    first = routed_node(nodes, emulator, vpc, route_tables)
    second = routed_node(nodes, emulator, vpc, route_tables)

    added = add_upf(first, "upf-a", "10.0.4.50")
    assert added.status == 0, (added.stdout, first.agent_log())
    # Both AZs' tables: a data-network host in either subnet reaches the pool through its own.
    assert targets(emulator, route_tables) == [first.enis["multus1"]] * 2

    # The pod moves (a new sandbox on the other node); the old node's DEL comes before or after.
    if old_node_deletes_first:
        assert first.delete_pod("upf-a", "10.0.4.50").status == 0
    moved = add_upf(second, "upf-b", "10.0.4.51")
    assert moved.status == 0, (moved.stdout, second.agent_log())
    if not old_node_deletes_first:
        assert first.delete_pod("upf-a", "10.0.4.50").status == 0
    assert targets(emulator, route_tables) == [second.enis["multus1"]] * 2
    # The DEL never touched a route (no DeleteRoute: it cannot be made conditional on its target).
    assert "DeleteRoute" not in {call.action for call in emulator.proxy.calls}


def test_a_create_that_loses_the_race_to_another_node_replaces_the_route(
    emulator: Ec2Emulator, vpc: EmulatedVpc, route_tables: list[str], nodes: list[PodIpNode]
) -> None:
    node = routed_node(nodes, emulator, vpc, route_tables)
    for table, target in zip(route_tables, targets(emulator, route_tables), strict=True):
        if target is not None:  # no route yet: ReplaceRoute fails, CreateRoute follows
            emulator.ec2.delete_route(RouteTableId=table, DestinationCidrBlock=UE_POOL)
    # The first CreateRoute finds the route another node has just created (EC2 carries the
    # request out here only to have a route to replace; its answer is the race's).
    emulator.proxy.reset(
        [Fault("RouteAlreadyExists", 400, action="CreateRoute", after_forward=True)]
    )

    added = add_upf(node, "upf-race", "10.0.4.52")

    assert added.status == 0, (added.stdout, node.agent_log())
    first_table = [
        (call.action, call.status)
        for call in emulator.proxy.calls
        if call.params.get("RouteTableId") == route_tables[0]
    ]
    assert first_table == [("ReplaceRoute", 400), ("CreateRoute", 400), ("ReplaceRoute", 200)]
    assert targets(emulator, route_tables) == [node.enis["multus1"]] * 2


@pytest.mark.parametrize("nad_offers_it", [False, True])
def test_a_range_the_network_does_not_route_is_refused_before_any_ec2_call(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    route_tables: list[str],
    nodes: list[PodIpNode],
    nad_offers_it: bool,
) -> None:
    """Refused by the plugin (the NAD does not offer it) or, should a NAD offer more than the
    agent's configuration, by the agent."""
    node = routed_node(nodes, emulator, vpc, route_tables)
    emulator.proxy.reset()
    network = upf_network(node, ["10.46.0.0/16"])
    if nad_offers_it:
        network["podRoutedRanges"] = [UE_POOL, "10.46.0.0/16"]
    node.netns("upf-other")

    refused = node.cni("ADD", "upf-other", ip="10.0.4.53", config=network)

    assert refused.status == 1
    assert refused.json["code"] == 7
    assert "10.46.0.0/16" in refused.json["msg"] and UE_POOL in refused.json["msg"]
    assert emulator.proxy.calls == []


def test_the_node_role_allows_the_route_calls_only_in_the_networks_route_tables(
    emulator: Ec2Emulator, vpc: EmulatedVpc, route_tables: list[str], nodes: list[PodIpNode]
) -> None:
    node = routed_node(nodes, emulator, vpc, route_tables)
    emulator.proxy.reset()
    assert add_upf(node, "upf-iam", "10.0.4.54").status == 0
    calls = [c for c in emulator.proxy.calls if c.action in {"CreateRoute", "ReplaceRoute"}]
    assert calls
    statements = node_role_statements(vpc, route_tables)

    allowed = agent_requests(AgentRun(node.instance_id, calls))
    assert denied(statements, allowed) == []

    other_table = emulator.ec2.create_route_table(VpcId=vpc.vpc_id)["RouteTable"]["RouteTableId"]
    elsewhere = [
        type(call)(
            call.action,
            {**call.params, "RouteTableId": other_table},
            call.status,
            call.received_at,
            call.observed,
        )
        for call in calls
    ]
    refused = agent_requests(AgentRun(node.instance_id, elsewhere))
    assert len(denied(statements, refused)) == len(refused)


def node_role_statements(vpc: EmulatedVpc, route_tables: list[str]) -> list[dict[str, Any]]:
    """The node role's Multus policy as the cluster stack composes it, for these IDs."""
    stack = Stack(App(), "Policy", env=Environment(account="123456789012", region=REGION))
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    grant_multus_eni_management(
        stack,
        role,
        cluster_name=CLUSTER,
        multus_subnet_ids=list(vpc.multus_subnets.values()),
        security_group_ids=list(vpc.security_group_ids.values()),
        pod_route_table_ids=route_tables,
    )
    template = App.of(stack).synth().get_stack_by_name("Policy").template  # type: ignore[union-attr]
    (role_id,) = resources(template, "AWS::IAM::Role")
    return role_statements(template, role_id, TemplateResolver(template, REGION, {}))
