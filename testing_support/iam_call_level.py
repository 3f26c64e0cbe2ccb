"""Call-level IAM for any app: its synthesized policies resolved to the emulator's resources,
and the EC2 calls recorded there as the IAM requests they make (shared by the call-level tests
of the default app and of the examples)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stacks.network_stack import multus_security_group_name
from testing_support.ec2_iam_requests import Caller, Ec2Call, authorization_requests
from testing_support.iam_evaluator import AuthorizationRequest, evaluate
from testing_support.iam_reference import TemplateResolver, exported_values, role_statements
from testing_support.multus_emulator import REGION, EmulatedVpc, RecordedCall


def denied(statements: list[dict[str, Any]], requests: Iterable[AuthorizationRequest]) -> list[str]:
    """Each request the statements do not allow, with the evaluator's reason."""
    return [
        f"{request.describe()}: {decision.reason}"
        for request in requests
        if not (decision := evaluate(statements, request)).allowed
    ]


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def subnet_ids(network: dict[str, Any], subnets: dict[tuple[str, str], str]) -> dict[str, str]:
    """Template logical IDs of the Multus subnets -> emulator IDs, by (network, AZ)."""
    ids = {}
    for logical_id, subnet in resources(network, "AWS::EC2::Subnet").items():
        props = subnet["Properties"]
        names = [t["Value"] for t in props["Tags"] if t["Key"] == "aws-cdk:subnet-name"]
        key = (names[0], props["AvailabilityZone"])
        if key in subnets:
            ids[logical_id] = subnets[key]
    return ids


def physical_ids(network: dict[str, Any], vpc: EmulatedVpc, app_name: str) -> dict[str, str]:
    """Template logical IDs of the Multus subnets and of each network's security group (by its
    Name tag, which names the app) -> emulator IDs."""
    ids = subnet_ids(network, vpc.multus_subnets)
    names = {multus_security_group_name(app_name, n): n for n in vpc.security_group_ids}
    for logical_id, group in resources(network, "AWS::EC2::SecurityGroup").items():
        tags = {t["Key"]: t["Value"] for t in group["Properties"].get("Tags", [])}
        if tags.get("Name") in names:
            ids[logical_id] = vpc.security_group_ids[names[tags["Name"]]]
    assert len(ids) == len(vpc.multus_subnets) + len(vpc.security_group_ids)
    return ids


def resolver(
    templates: dict[str, dict[str, Any]], name: str, physical_ids: dict[str, str]
) -> TemplateResolver:
    exports = exported_values(templates, REGION, physical_ids)
    return TemplateResolver(templates[name], REGION, exports, physical_ids)


def node_role_statements(
    templates: dict[str, dict[str, Any]], cluster_stack: str, physical_ids: dict[str, str]
) -> list[dict[str, Any]]:
    """The statements of the cluster stack's Karpenter node role, resolved to `physical_ids`."""
    cluster = templates[cluster_stack]
    (role_id,) = [k for k in resources(cluster, "AWS::IAM::Role") if "KarpenterNodeRole" in k]
    return role_statements(cluster, role_id, resolver(templates, cluster_stack, physical_ids))


def bootstrap_requests(
    calls: Sequence[tuple[str, RecordedCall]],
) -> list[tuple[str, AuthorizationRequest]]:
    """(action, request) for each IAM request of each (instance, call) of the bootstrap."""
    return [
        (call.action, request)
        for instance, call in calls
        for request in authorization_requests(
            Ec2Call(call.action, call.params, call.observed), Caller(REGION, instance)
        )
    ]


@dataclass(frozen=True)
class AgentRun:
    """The EC2 calls the pod IP agent made, and the node whose credentials (node role) it used."""

    instance_id: str
    calls: list[RecordedCall]


def agent_requests(run: AgentRun) -> list[AuthorizationRequest]:
    caller = Caller(REGION, run.instance_id)
    return [
        request
        for call in run.calls
        for request in authorization_requests(
            Ec2Call(call.action, call.params, call.observed), caller
        )
    ]
