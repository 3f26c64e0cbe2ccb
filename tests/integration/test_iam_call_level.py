"""Call-level IAM: every EC2 call the node bootstrap, the Multus pod IP agent, the
CIDR-reservation handler and the Karpenter teardown handler make, evaluated against the
synthesized policy of the role that makes it.

The bootstrap, the agent (both on the node role) and the teardown run against the emulator
(moto_server behind the recording proxy), which notes for each call the EC2 state IAM would
consult (tags, subnet and VPC of the ENIs, attachments). The reservation handler runs
in-process against moto, its boto3 calls recorded through a botocore event hook. The policies
come from the default app's templates, with the Multus subnets and security group resolved to
the emulator's IDs (one security group per network).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cdk_constructs import karpenter_teardown
from cdk_constructs.subnet_cidr_reservation import HANDLER_DIR
from cdk_constructs.subnet_cidr_reservation_handler import index as handler
from config import parse_config
from multus_pod_ips.agent.address_family import IPV4
from node_bootstrap import render_user_data
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    FAILURE_TAG_KEY,
    INSTANCE_TAG_KEY,
    OWNER_TAG_KEY,
)
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
    bootstrap_script_actions,
    denied,
    node_role_statements,
    physical_ids,
    resolver,
    resources,
    subnet_ids,
)
from testing_support.iam_evaluator import AuthorizationRequest, evaluate
from testing_support.iam_reference import role_statements
from testing_support.multus_emulator import (
    REGION,
    Ec2Emulator,
    EmulatedVpc,
    RecordedCall,
    running_emulator,
)
from testing_support.pod_ip_node import EMULATOR_RANGES, PodIpNode, pod_ip_vpc, wait_until
from testing_support.teardown_emulation import TeardownRun, destroy_a_cluster
from tests.conftest import REPO, SynthesizedApp
from tests.moto_helpers import fake_aws_credentials

pytestmark = pytest.mark.integration

CONFIG = parse_config({})
CLUSTER = CONFIG.cluster_name
# The stack names EnvironmentStage gives them.
NETWORK_STACK, CLUSTER_STACK = f"{CONFIG.name}-network", f"{CONFIG.name}-cluster"


# --- the synthesized policies, resolved to the emulator's resources --------------------------


@pytest.fixture(scope="module")
def templates(default_app: SynthesizedApp) -> dict[str, dict[str, Any]]:
    return default_app.templates_by_stack_name()


@pytest.fixture(scope="module")
def node_statements(templates: dict[str, dict[str, Any]], vpc: EmulatedVpc) -> list[dict[str, Any]]:
    ids = physical_ids(templates[NETWORK_STACK], vpc, CONFIG.name)
    return node_role_statements(templates, CLUSTER_STACK, ids)


@pytest.fixture(scope="module")
def handler_statements(
    templates: dict[str, dict[str, Any]], handler_run: HandlerRun
) -> list[dict[str, Any]]:
    network = templates[NETWORK_STACK]
    (function,) = [
        f
        for f in resources(network, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "index.on_event"
    ]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    first_multus_subnet = (CONFIG.multus.networks[0].name, CONFIG.availability_zones[0])
    ids = subnet_ids(network, {first_multus_subnet: handler_run.subnet_id})
    return role_statements(network, role_id, resolver(templates, NETWORK_STACK, ids))


# --- the bootstrap's calls ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def emulator() -> Iterator[Ec2Emulator]:
    with running_emulator() as started:
        started.proxy.state_probe = started.ec2_state
        yield started


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    """The config's Multus networks, their Whereabouts ranges reserved as the agent expects."""
    assert list(EMULATOR_RANGES) == [network.name for network in CONFIG.multus.networks]
    return pod_ip_vpc(emulator)


@pytest.fixture(scope="module")
def bootstrap_calls(emulator: Ec2Emulator, vpc: EmulatedVpc) -> list[tuple[str, RecordedCall]]:
    """(instance, call) for the three paths that between them make every bootstrap call:
    a fresh node, a re-run after an interrupted run, and a failed attachment setting (which
    tags its instance with the reason)."""
    user_data = render_user_data(vpc.bootstrap_props(CLUSTER))
    leftover = (vpc.networks[-1], len(vpc.networks))
    return bootstrap_path_calls(emulator, vpc, user_data, CLUSTER, leftover)


def test_the_bootstrap_paths_make_every_ec2_call_in_the_script(
    bootstrap_calls: list[tuple[str, RecordedCall]],
) -> None:
    assert {call.action for _, call in bootstrap_calls} == bootstrap_script_actions()


def test_the_node_role_allows_every_bootstrap_call(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    requests = bootstrap_requests(bootstrap_calls)
    assert denied(node_statements, (request for _, request in requests)) == []
    # Tag-on-create's implied ec2:CreateTags is evaluated too.
    assert "ec2:CreateTags" in {request.action for _, request in requests}


# --- the pod IP agent's calls ------------------------------------------------------------------


@pytest.fixture(scope="module")
def agent_run(emulator: Ec2Emulator, vpc: EmulatedVpc) -> AgentRun:
    """One agent on a bootstrapped node: start-up, pods added on both networks, one deleted,
    then a reconcile pass that repairs a lost DEL and an address gone from its ENI."""
    node = PodIpNode.bootstrap(emulator, vpc, "us-west-2a", CLUSTER)
    emulator.proxy.reset()  # the agent's calls only, not the bootstrap's
    node.start_agent()
    try:
        for container, ip, interface in (
            ("kept", "10.0.4.33", "multus1"),
            ("deleted", "10.0.4.34", "multus1"),
            ("lost-del", "10.0.6.33", "multus2"),
        ):
            assert node.add_pod(container, ip, interface).status == 0, node.agent_log()
        assert node.delete_pod("deleted", "10.0.4.34").status == 0, node.agent_log()
        node.remove_netns("lost-del")  # the pod goes, its DEL never arrives
        emulator.ec2.unassign_private_ip_addresses(  # behind the agent's back
            NetworkInterfaceId=node.enis["multus1"], PrivateIpAddresses=["10.0.4.33"]
        )
        assert wait_until(
            lambda: (
                node.addresses("multus1") == {"10.0.4.33"} and node.addresses("multus2") == set()
            )
        ), node.agent_log()
    finally:
        node.stop_agent()
    return AgentRun(node.instance_id, emulator.proxy.calls)


def _agent_actions() -> set[str]:
    """The agent's calls on an IPv4-only node without pod-routed ranges: its reads, and the
    IPv4 family's changes (test_iam_call_level_dual_stack.py covers the IPv6 ones; the route
    calls of a network with pod_routed_ranges, which the default app has none of, are evaluated
    against their policy in tests/integration/multus_pod_ips/test_pod_routed_ranges.py)."""
    agent = REPO / "multus_pod_ips" / "agent"
    source = "".join(
        path.read_text() for path in agent.glob("*.py") if path.name != "pod_routes.py"
    )
    return set(re.findall(r'\.call\(\s*"(\w+)"', source)) | {
        IPV4.assign_action,
        IPV4.unassign_action,
    }


def test_the_agent_run_makes_every_ec2_call_in_the_agent(agent_run: AgentRun) -> None:
    assert {call.action for call in agent_run.calls} == _agent_actions()
    # Both kinds of Assign: a pod's (takes the address along) and the reconcile's (does not).
    assigns = [c.params for c in agent_run.calls if c.action == "AssignPrivateIpAddresses"]
    assert {params["AllowReassignment"] for params in assigns} == {"true", "false"}


def test_the_node_role_allows_every_agent_call(
    agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    requests = agent_requests(agent_run)
    assert denied(node_statements, requests) == []
    assert len(requests) == len(agent_run.calls)  # one authorization per call


# --- one node, another node's ENIs --------------------------------------------------------------

OTHER_NODE = "i-0feedfacefeedface"  # any instance but the one whose ENIs these are
READS = {"ec2:DescribeNetworkInterfaces", "ec2:DescribeInstanceTypes"}


def test_no_node_may_change_another_nodes_multus_enis_or_addresses(
    agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    """Each call the agent made on its own node's ENIs, made with another node's credentials
    (ec2:SourceInstanceARN of that node): every Assign and Unassign is denied, since the ENI's
    multus-eni/instance-id tag names the first node (Service Authorization Reference, EC2:
    network-interface carries aws:ResourceTag; IAM user guide: a single-valued key such as
    ec2:SourceInstanceARN compared with a policy variable)."""
    other = replace(agent_run, instance_id=OTHER_NODE)
    changes = [r for r in agent_requests(other) if r.action not in READS]
    assert {r.action for r in changes} == {
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    }
    assert len(denied(node_statements, changes)) == len(changes)


def test_no_node_may_create_attach_modify_or_delete_enis_for_another(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    """The bootstrap's calls replayed with another node's credentials: creating an ENI tagged
    with the first node's ID, attaching, modifying and deleting its ENIs, tagging its instance:
    all denied; only the reads remain."""
    replayed = bootstrap_requests([(OTHER_NODE, call) for _, call in bootstrap_calls])
    changes = [request for action, request in replayed if f"ec2:{action}" not in READS]
    assert {r.action for r in changes} >= {
        "ec2:CreateNetworkInterface",
        "ec2:AttachNetworkInterface",
        "ec2:ModifyNetworkInterfaceAttribute",
        "ec2:DeleteNetworkInterface",
        "ec2:CreateTags",
    }
    assert len(denied(node_statements, changes)) == len(changes)


@pytest.mark.parametrize("written", ["*", "i-*", "", None])
def test_a_node_cannot_create_an_eni_whose_instance_tag_is_not_its_own_id(
    bootstrap_calls: list[tuple[str, RecordedCall]],
    node_statements: list[dict[str, Any]],
    written: str | None,
) -> None:
    """A node's own create with the instance tag rewritten (a wildcard, empty, left out) is
    denied, with its tag-on-create: the tag is compared with StringEquals, in which `*` is a
    character (IAM user guide, condition operators), so no ENI can be made that every node may
    change."""
    instance, create = next(
        (i, c) for i, c in bootstrap_calls if c.action == "CreateNetworkInterface"
    )
    params = dict(create.params)
    (key_name,) = [k for k, v in params.items() if v == INSTANCE_TAG_KEY]
    value_name = key_name.replace(".Key", ".Value")
    assert params[value_name] == instance  # as the bootstrap writes it
    if written is None:
        del params[key_name], params[value_name]
    else:
        params[value_name] = written
    requests = bootstrap_requests([(instance, replace(create, params=params))])
    assert len(requests) == 2  # the create and its tag-on-create
    assert len(denied(node_statements, [r for _, r in requests])) == 2
    assert denied(node_statements, [r for _, r in bootstrap_requests([(instance, create)])]) == []


# --- the handler's calls -----------------------------------------------------------------------


@dataclass(frozen=True)
class HandlerRun:
    """The EC2 calls a custom resource handler made against moto."""

    calls: list[Ec2Call]
    subnet_id: str  # the moto subnet standing in for the first Multus subnet


@pytest.fixture(scope="module")
def handler_calls(handler_run: HandlerRun) -> list[Ec2Call]:
    return handler_run.calls


@pytest.fixture(scope="module")
def handler_run() -> HandlerRun:
    """Create, retried create, update within the subnet, delete and delete-when-gone."""
    calls: list[Ec2Call] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append(Ec2Call(model.name, {k: str(v) for k, v in params["body"].items()}))

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        fake_aws_credentials(patch, REGION)
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        assert session is not None
        session.events.register("before-call.ec2", record)
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc_id = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"]
        calls.clear()  # the setup calls above are the test's, not the handler's

        def props(cidr: str) -> dict[str, str]:
            return {"SubnetId": subnet, "Cidr": cidr, "ReservationType": "explicit"}

        created = handler.on_event(
            {"RequestType": "Create", "ResourceProperties": props("10.0.4.32/27")}
        )
        handler.on_event({"RequestType": "Create", "ResourceProperties": props("10.0.4.32/27")})
        updated = handler.on_event(
            {
                "RequestType": "Update",
                "PhysicalResourceId": created["PhysicalResourceId"],
                "ResourceProperties": props("10.0.4.0/26"),
                "OldResourceProperties": props("10.0.4.32/27"),
            }
        )
        for _ in range(2):
            handler.on_event(
                {
                    "RequestType": "Delete",
                    "PhysicalResourceId": updated["PhysicalResourceId"],
                    "ResourceProperties": props("10.0.4.0/26"),
                }
            )
        boto3.DEFAULT_SESSION = None
    return HandlerRun(calls, subnet)


def _handler_actions() -> set[str]:
    source = (Path(HANDLER_DIR) / "index.py").read_text()
    methods = set(re.findall(r"ec2\.(\w+)\(", source))
    return {"".join(part.title() for part in method.split("_")) for method in methods}


def test_the_handler_paths_make_every_ec2_call_in_the_handler(handler_calls: list[Ec2Call]) -> None:
    assert {call.action for call in handler_calls} == _handler_actions()


def test_the_handler_role_allows_every_handler_call(
    handler_calls: list[Ec2Call], handler_statements: list[dict[str, Any]]
) -> None:
    requests = (r for call in handler_calls for r in authorization_requests(call, Caller(REGION)))
    assert denied(handler_statements, requests) == []


# --- the teardown's calls ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def teardown_run(templates: dict[str, dict[str, Any]]) -> TeardownRun:
    """A destroy on an emulator of its own (the teardown terminates and deletes what it finds
    of the cluster, which the other runs here must keep)."""
    (resource,) = resources(templates[CLUSTER_STACK], "Custom::KarpenterTeardown").values()
    with running_emulator() as own:
        own.proxy.state_probe = own.ec2_state
        run = destroy_a_cluster(own, own.create_multus_vpc(), CLUSTER, resource["Properties"])
    assert run.complete
    return run


@pytest.fixture(scope="module")
def teardown_statements(templates: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    cluster = templates[CLUSTER_STACK]
    (function,) = [
        f
        for f in resources(cluster, "AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "index.is_complete"
    ]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return role_statements(cluster, role_id, resolver(templates, CLUSTER_STACK, {}))


def _teardown_requests(run: TeardownRun) -> list[tuple[RecordedCall, AuthorizationRequest]]:
    return [
        (call, request)
        for call in run.calls
        for request in authorization_requests(
            Ec2Call(call.action, call.params, call.observed), Caller(REGION)
        )
    ]


def _teardown_actions() -> set[str]:
    source = (REPO / karpenter_teardown.HANDLER_DIR / "index.py").read_text()
    methods = set(re.findall(r"ec2\.(\w+)\b", source)) - {"get_paginator"}
    methods |= set(re.findall(r'get_paginator\("(\w+)"\)', source))
    return {"".join(part.title() for part in method.split("_")) for method in methods}


def test_the_teardown_run_makes_every_ec2_call_in_the_handler(teardown_run: TeardownRun) -> None:
    assert {call.action for call in teardown_run.calls} == _teardown_actions()


def test_the_teardown_role_allows_every_teardown_call(
    teardown_run: TeardownRun, teardown_statements: list[dict[str, Any]]
) -> None:
    requests = _teardown_requests(teardown_run)
    assert denied(teardown_statements, (request for _, request in requests)) == []
    deleted = {
        c.params["NetworkInterfaceId"] for c, _ in requests if c.action == "DeleteNetworkInterface"
    }
    assert len(deleted) == 2  # the leaked Multus ENI and the leaked VPC CNI ENI


TEARDOWN_SIDS = [
    "DescribeWhatIsLeft",
    "TerminateKarpenterInstancesOfThisCluster",
    "DeleteMultusEnisOfThisCluster",
    "DeleteVpcCniEnisOfThisCluster",
]


def test_the_teardown_statements_under_test_are_the_synthesized_ones(
    teardown_statements: list[dict[str, Any]],
) -> None:
    assert sorted(_sids(teardown_statements)) == sorted(TEARDOWN_SIDS)


@pytest.mark.parametrize("sid", TEARDOWN_SIDS)
def test_removing_any_teardown_statement_denies_a_teardown_call(
    sid: str, teardown_run: TeardownRun, teardown_statements: list[dict[str, Any]]
) -> None:
    remaining = [s for s in teardown_statements if s.get("Sid") != sid]
    assert any(
        not evaluate(remaining, request).allowed for _, request in _teardown_requests(teardown_run)
    ), f"nothing needs {sid}"


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param(
            {"cluster.k8s.amazonaws.com/name": "other-cluster"}, id="other-clusters-vpc-cni-eni"
        ),
        pytest.param({"cluster.k8s.amazonaws.com/name": CLUSTER}, id="no-vpc-cni-instance-tag"),
        pytest.param({CLUSTER_TAG_KEY: CLUSTER}, id="cluster-tag-but-no-multus-network"),
        pytest.param({}, id="untagged"),
    ],
)
def test_the_teardown_deletes_only_enis_tagged_for_this_cluster(
    tags: dict[str, str], teardown_run: TeardownRun, teardown_statements: list[dict[str, Any]]
) -> None:
    """IAM allows ec2:DeleteNetworkInterface to condition on aws:ResourceTag of the
    network-interface (IAM service reference, Amazon EC2); both delete statements do."""
    deletes = [c for c in teardown_run.calls if c.action == "DeleteNetworkInterface"]
    for call in deletes:
        state: Ec2State = call.observed
        retagged = replace(state, eni_tags={eni: tags for eni in state.eni_tags})
        (request,) = authorization_requests(
            Ec2Call(call.action, call.params, retagged), Caller(REGION)
        )
        assert not evaluate(teardown_statements, request).allowed, call


def test_the_teardown_terminates_only_karpenters_instances_of_this_cluster(
    teardown_run: TeardownRun, teardown_statements: list[dict[str, Any]]
) -> None:
    terminations = [c for c in teardown_run.calls if c.action == "TerminateInstances"]
    assert terminations
    for call in terminations:
        state: Ec2State = call.observed
        other = replace(
            state,
            instance_tags={
                i: {"kubernetes.io/cluster/other": "owned"} for i in state.instance_tags
            },
        )
        (request,) = authorization_requests(
            Ec2Call(call.action, call.params, other), Caller(REGION)
        )
        assert not evaluate(teardown_statements, request).allowed


# --- every statement is needed, and the scoping holds ------------------------------------------


def _sids(statements: list[dict[str, Any]]) -> list[str]:
    return [str(s["Sid"]) for s in statements if s.get("Sid")]


NODE_SIDS = [
    "CreateMultusEniInMultusSubnets",
    "CreateMultusEniTaggedAsOwned",
    "TagMultusEniOnlyWhileCreating",
    "ManageOwnedMultusEnis",
    "AttachMultusEnisToCallingInstanceOnly",
    "TagCallingInstanceWithBootstrapFailureOnly",
    "ReadNetworkInterfacesInRegion",
]
# The pod IP agent's statements, in the node role's policy too; the agent also reads ENIs
# through the bootstrap's read statement.
POD_IP_SIDS = ["ManageMultusPodIpsOnClusterEnis", "ReadInstanceTypeLimitsInRegion"]
HANDLER_SIDS = ["ReserveInMultusSubnets", "ReadAndReleaseReservationsInRegion"]


def test_the_statements_under_test_are_the_synthesized_ones(
    node_statements: list[dict[str, Any]], handler_statements: list[dict[str, Any]]
) -> None:
    assert sorted(_sids(node_statements)) == sorted(NODE_SIDS + POD_IP_SIDS)
    assert sorted(_sids(handler_statements)) == sorted(HANDLER_SIDS)


@pytest.mark.parametrize("sid", NODE_SIDS)
def test_removing_any_node_statement_denies_a_bootstrap_call(
    sid: str,
    bootstrap_calls: list[tuple[str, RecordedCall]],
    node_statements: list[dict[str, Any]],
) -> None:
    remaining = [s for s in node_statements if s.get("Sid") != sid]
    denied = [
        request
        for _, request in bootstrap_requests(bootstrap_calls)
        if not evaluate(remaining, request).allowed
    ]
    assert denied, f"nothing needs {sid}"


@pytest.mark.parametrize(
    ("sid", "denied_actions"),
    [
        (
            "ManageMultusPodIpsOnClusterEnis",
            {"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"},
        ),
        ("ReadInstanceTypeLimitsInRegion", {"ec2:DescribeInstanceTypes"}),
        ("ReadNetworkInterfacesInRegion", {"ec2:DescribeNetworkInterfaces"}),
    ],
)
def test_removing_a_statement_the_agent_needs_denies_exactly_its_agent_calls(
    sid: str,
    denied_actions: set[str],
    agent_run: AgentRun,
    node_statements: list[dict[str, Any]],
) -> None:
    remaining = [s for s in node_statements if s.get("Sid") != sid]
    denied = {
        request.action
        for request in agent_requests(agent_run)
        if not evaluate(remaining, request).allowed
    }
    assert denied == denied_actions


@pytest.mark.parametrize("sid", HANDLER_SIDS)
def test_removing_any_handler_statement_denies_a_handler_call(
    sid: str, handler_calls: list[Ec2Call], handler_statements: list[dict[str, Any]]
) -> None:
    remaining = [s for s in handler_statements if s.get("Sid") != sid]
    assert any(
        not evaluate(remaining, request).allowed
        for call in handler_calls
        for request in authorization_requests(call, Caller(REGION))
    ), f"nothing needs {sid}"


def _first(calls: list[tuple[str, RecordedCall]], action: str) -> tuple[str, RecordedCall]:
    return next((i, c) for i, c in calls if c.action == action)


def test_a_node_cannot_attach_an_eni_to_another_instance(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    instance, attach = _first(bootstrap_calls, "AttachNetworkInterface")
    call = Ec2Call(attach.action, attach.params, attach.observed)
    (own,) = authorization_requests(call, Caller(REGION, instance))
    (other,) = authorization_requests(call, Caller(REGION, "i-0another0node000"))
    assert evaluate(node_statements, own).allowed
    decision = evaluate(node_statements, other)
    assert not decision.allowed
    assert f"instance/{attach.params['InstanceId']}" in decision.reason


def _without_tags(params: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in params.items() if not k.startswith("Tag.")}


@pytest.mark.parametrize(
    ("tags", "allowed"),
    [
        pytest.param({FAILURE_TAG_KEY: "reason"}, True, id="failure-key"),
        pytest.param({"karpenter.sh/nodepool": "other"}, False, id="another-key"),
        pytest.param({FAILURE_TAG_KEY: "reason", "Name": "x"}, False, id="failure-and-another-key"),
        pytest.param({}, False, id="no-tag"),
    ],
)
def test_a_failed_node_tags_its_instance_with_the_failure_key_only(
    tags: dict[str, str],
    allowed: bool,
    bootstrap_calls: list[tuple[str, RecordedCall]],
    node_statements: list[dict[str, Any]],
) -> None:
    """CreateTags on an instance takes aws:RequestTag/${TagKey} and aws:TagKeys (Service
    Authorization Reference, Amazon EC2, CreateTags: resource type instance): ForAllValues on
    aws:TagKeys admits no other key, and a request without the key is refused too."""
    instance, tagging = _first(bootstrap_calls, "CreateTags")
    assert tagging.params["ResourceId.1"] == instance
    assert tagging.params["Tag.1.Key"] == FAILURE_TAG_KEY
    params = _without_tags(tagging.params)
    for n, (key, value) in enumerate(tags.items(), start=1):
        params |= {f"Tag.{n}.Key": key, f"Tag.{n}.Value": value}
    (request,) = authorization_requests(
        Ec2Call(tagging.action, params, tagging.observed), Caller(REGION, instance)
    )
    assert evaluate(node_statements, request).allowed is allowed


def test_a_failed_node_cannot_tag_another_instance_or_an_eni(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    """ec2:SourceInstanceARN (the instance whose credentials sign the request) must be the
    tagged instance's ARN, as for the attach statements."""
    instance, tagging = _first(bootstrap_calls, "CreateTags")
    _, attach = _first(bootstrap_calls, "AttachNetworkInterface")
    call = Ec2Call(tagging.action, tagging.params, tagging.observed)
    (other,) = authorization_requests(call, Caller(REGION, "i-0another0node000"))
    decision = evaluate(node_statements, other)
    assert not decision.allowed
    assert f"instance/{instance}" in decision.reason
    on_eni = {**tagging.params, "ResourceId.1": attach.params["NetworkInterfaceId"]}
    (eni_request,) = authorization_requests(
        Ec2Call(tagging.action, on_eni, Ec2State()), Caller(REGION, instance)
    )
    assert not evaluate(node_statements, eni_request).allowed


def test_enis_without_the_owner_tag_are_out_of_reach(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    instance, modify = _first(bootstrap_calls, "ModifyNetworkInterfaceAttribute")
    state: Ec2State = modify.observed
    # A primary ENI Karpenter launched: cluster tag, but no owner tag.
    karpenter_eni = replace(
        state,
        eni_tags={eni: {CLUSTER_TAG_KEY: CLUSTER} for eni in state.eni_tags},
    )
    for observed, allowed in ((state, True), (karpenter_eni, False)):
        (request,) = authorization_requests(
            Ec2Call(modify.action, modify.params, observed), Caller(REGION, instance)
        )
        assert evaluate(node_statements, request).allowed is allowed


def test_enis_can_only_be_created_with_the_owner_tag(
    bootstrap_calls: list[tuple[str, RecordedCall]], node_statements: list[dict[str, Any]]
) -> None:
    instance, create = _first(bootstrap_calls, "CreateNetworkInterface")
    untagged = {k: v for k, v in create.params.items() if not k.startswith("TagSpecification")}
    (request,) = authorization_requests(
        Ec2Call(create.action, untagged, create.observed), Caller(REGION, instance)
    )
    assert not evaluate(node_statements, request).allowed


def _agent_eni_requests(
    run: AgentRun, changed: Callable[[Ec2State], Ec2State] = lambda state: state
) -> list[tuple[RecordedCall, AuthorizationRequest]]:
    """The agent's Assign and Unassign calls as IAM sees them, in the recorded EC2 state as
    `changed` alters it."""
    caller = Caller(REGION, run.instance_id)
    return [
        (call, request)
        for call in run.calls
        if call.action in {"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"}
        for request in authorization_requests(
            Ec2Call(call.action, call.params, changed(call.observed)), caller
        )
    ]


def _with_eni_tags(tags: dict[str, str]) -> Callable[[Ec2State], Ec2State]:
    return lambda state: replace(state, eni_tags={eni: tags for eni in state.eni_tags})


@pytest.mark.parametrize(
    "tags",
    [
        pytest.param({CLUSTER_TAG_KEY: CLUSTER}, id="cluster-tag-only"),  # a primary ENI
        pytest.param(
            {CLUSTER_TAG_KEY: "other-cluster", OWNER_TAG_KEY: "other-cluster"},
            id="other-clusters-multus-eni",
        ),
    ],
)
def test_pod_ips_go_only_on_enis_with_this_clusters_owner_tag(
    tags: dict[str, str], agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    recorded = _agent_eni_requests(agent_run)
    assert recorded and all(evaluate(node_statements, r).allowed for _, r in recorded)
    for call, request in _agent_eni_requests(agent_run, _with_eni_tags(tags)):
        decision = evaluate(node_statements, request)
        assert not decision.allowed, call
        assert f"network-interface/{call.params['NetworkInterfaceId']}" in decision.reason


def test_pod_ips_go_only_on_enis_in_the_multus_subnets(
    agent_run: AgentRun, vpc: EmulatedVpc, node_statements: list[dict[str, Any]]
) -> None:
    """The subnet condition holds on its own: an ENI with the owner tag in a node subnet."""
    node_subnet = vpc.private_subnets["us-west-2a"]

    def in_node_subnet(state: Ec2State) -> Ec2State:
        placement = {
            eni: EniPlacement(node_subnet, where.vpc_id, where.availability_zone)
            for eni, where in state.eni_placement.items()
        }
        return replace(state, eni_placement=placement)

    moved = _agent_eni_requests(agent_run, in_node_subnet)
    assert moved
    for call, request in moved:
        assert request.resources[0].context["ec2:Subnet"] == Caller(REGION).arn(
            f"subnet/{node_subnet}"
        )
        assert not evaluate(node_statements, request).allowed, call


def test_instance_type_limits_are_readable_only_in_the_clusters_region(
    agent_run: AgentRun, node_statements: list[dict[str, Any]]
) -> None:
    (describe,) = [c for c in agent_run.calls if c.action == "DescribeInstanceTypes"]
    call = Ec2Call(describe.action, describe.params, describe.observed)
    for region, allowed in ((REGION, True), ("eu-west-1", False)):
        (request,) = authorization_requests(call, Caller(region, agent_run.instance_id))
        assert evaluate(node_statements, request).allowed is allowed


def _create_in_groups(
    bootstrap_calls: list[tuple[str, RecordedCall]], network: str, groups: list[str]
) -> tuple[AuthorizationRequest, ...]:
    """The bootstrap's CreateNetworkInterface of `network`, with its groups swapped for `groups`."""
    instance, create = next(
        (instance, call)
        for instance, call in bootstrap_calls
        if call.action == "CreateNetworkInterface"
        and any(value == network for key, value in call.params.items() if key.endswith("Value"))
    )
    params = {k: v for k, v in create.params.items() if not k.startswith("SecurityGroupId.")}
    params |= {f"SecurityGroupId.{n}": group for n, group in enumerate(groups, start=1)}
    return tuple(
        authorization_requests(
            Ec2Call(create.action, params, create.observed), Caller(REGION, instance)
        )
    )


def test_each_bootstrap_eni_is_created_in_its_own_networks_group(
    bootstrap_calls: list[tuple[str, RecordedCall]], vpc: EmulatedVpc
) -> None:
    for network in vpc.networks:
        create = next(
            call
            for _, call in bootstrap_calls
            if call.action == "CreateNetworkInterface"
            and call.params["SubnetId"] == vpc.multus_subnets[network, "us-west-2a"]
        )
        groups = [v for k, v in create.params.items() if k.startswith("SecurityGroupId.")]
        assert groups == [vpc.security_group_ids[network]]


def test_the_policy_admits_any_multus_group_but_no_other(
    bootstrap_calls: list[tuple[str, RecordedCall]],
    vpc: EmulatedVpc,
    emulator: Ec2Emulator,
    node_statements: list[dict[str, Any]],
) -> None:
    """What the ENI policy promises: Multus ENIs only in the Multus subnets and the Multus
    groups. It cannot promise that an ENI of multus1's subnet gets multus1's group: IAM
    authorizes CreateNetworkInterface on each subnet and security-group resource on its own
    (Service Authorization Reference, Amazon EC2: CreateNetworkInterface lists subnet and
    security-group as separate resource types, and no condition key of one names the other),
    so a node could put multus2's group on multus1's ENI. That pairing is the bootstrap's
    (rendered per interface from the network plan, tested above and on the emulator)."""
    first, second = vpc.networks
    crossed = _create_in_groups(bootstrap_calls, first, [vpc.security_group_ids[second]])
    assert denied(node_statements, crossed) == []
    foreign = emulator.ec2.create_security_group(
        GroupName="not-multus", Description="another group of the VPC", VpcId=vpc.vpc_id
    )["GroupId"]
    outside = _create_in_groups(bootstrap_calls, first, [vpc.security_group_ids[first], foreign])
    refused = denied(node_statements, outside)
    assert len(refused) == 1
    assert f"security-group/{foreign}" in refused[0]
