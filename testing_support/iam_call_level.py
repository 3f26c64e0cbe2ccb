"""Call-level IAM for any app: its synthesized policies resolved to the emulator's resources,
and the EC2 calls recorded there as the IAM requests they make (shared by the call-level tests
of the default app and of the examples)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import node_bootstrap
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    INSTANCE_TAG_KEY,
    NETWORK_TAG_KEY,
    NO_MANAGE_TAG_KEY,
    OWNER_TAG_KEY,
    SCRIPT_NAME,
)
from stacks.network_stack import multus_security_group_name
from testing_support.ec2_iam_requests import Caller, Ec2Call, authorization_requests
from testing_support.iam_evaluator import AuthorizationRequest, evaluate
from testing_support.iam_reference import TemplateResolver, exported_values, role_statements
from testing_support.multus_emulator import REGION, Ec2Emulator, EmulatedVpc, Fault, RecordedCall


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


def _owned_leftover_eni(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    cluster: str,
    instance_id: str,
    leftover: tuple[str, int],
) -> None:
    """As an interrupted run leaves it: created and tagged by the bootstrap, attached at the
    (network, device index) of `leftover`."""
    network, device_index = leftover
    tags = {
        CLUSTER_TAG_KEY: cluster,
        OWNER_TAG_KEY: cluster,
        NETWORK_TAG_KEY: network,
        INSTANCE_TAG_KEY: instance_id,
        NO_MANAGE_TAG_KEY: "true",
    }
    eni = emulator.ec2.create_network_interface(
        SubnetId=vpc.multus_subnets[network, "us-west-2a"],
        Groups=[vpc.security_group_ids[network]],
        TagSpecifications=[
            {
                "ResourceType": "network-interface",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ],
    )["NetworkInterface"]["NetworkInterfaceId"]
    emulator.ec2.attach_network_interface(
        NetworkInterfaceId=eni, InstanceId=instance_id, DeviceIndex=device_index
    )


def bootstrap_path_calls(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    user_data: str,
    cluster: str,
    leftover: tuple[str, int],
) -> list[tuple[str, RecordedCall]]:
    """(instance, call) for the three paths of `user_data` that between them make every
    bootstrap call: a fresh node, a re-run after an interrupted run (which left an ENI of
    `leftover`: one of the user-data's (network, device index)), and a failed attachment
    setting."""
    runs = []

    fresh = emulator.launch_instance(vpc, "us-west-2a", cluster)
    runs.append((fresh, emulator.run_bootstrap(user_data, fresh)))

    interrupted = emulator.launch_instance(vpc, "us-west-2a", cluster)
    _owned_leftover_eni(emulator, vpc, cluster, interrupted, leftover)
    runs.append((interrupted, emulator.run_bootstrap(user_data, interrupted)))

    failing = emulator.launch_instance(vpc, "us-west-2b", cluster)
    fault = Fault(
        "InternalError",
        status=400,
        action="ModifyNetworkInterfaceAttribute",
        with_param="Attachment.DeleteOnTermination",
    )
    runs.append((failing, emulator.run_bootstrap(user_data, failing, faults=[fault])))

    assert [run.returncode for _, run in runs] == [0, 0, 1], [run.output for _, run in runs]
    return [(instance, call) for instance, run in runs for call in run.ec2_calls]


def bootstrap_script_actions() -> set[str]:
    """The EC2 actions the bootstrap script calls."""
    script = (Path(node_bootstrap.__file__).parent / SCRIPT_NAME).read_text()
    return set(re.findall(r"ec2_call (\w+)", script))


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
