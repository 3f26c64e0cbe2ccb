"""The Multus ENI sweeper's handler on moto's EC2: an available ENI of the cluster is deleted
once its instance is terminated or unknown to EC2, and kept while the instance is pending or
running (its bootstrap created it and is about to attach it); ENIs of another cluster, without
an instance tag, or attached, stay. Every EC2 call it makes is allowed by the synthesized policy
of its role in the default app, and its delete is refused on an ENI without the cluster's owner
tag (evaluated call by call)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from cdk_constructs.multus_eni_sweeper_handler import index as handler
from config import parse_config
from node_bootstrap.renderer import INSTANCE_TAG_KEY, OWNER_TAG_KEY
from testing_support.ec2_iam_requests import Caller, Ec2Call, Ec2State, authorization_requests
from testing_support.iam_call_level import denied
from tests.conftest import SynthesizedApp
from tests.helpers import function_role_statements
from tests.moto_helpers import moto_ec2_fixtures, recorded_ec2_calls

REGION = "us-west-2"
CLUSTER = parse_config({}).cluster_name
GONE = "i-0123456789abcdef0"  # an instance EC2 no longer lists

aws, ec2 = moto_ec2_fixtures(REGION)


@pytest.fixture
def subnet_id(ec2: Any) -> str:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"])


def instance(ec2: Any, subnet_id: str) -> str:
    launched = ec2.run_instances(ImageId="ami-12345678", MinCount=1, MaxCount=1, SubnetId=subnet_id)
    return str(launched["Instances"][0]["InstanceId"])


def multus_eni(ec2: Any, subnet_id: str, instance_id: str | None, cluster: str = CLUSTER) -> str:
    tags = {OWNER_TAG_KEY: cluster, **({INSTANCE_TAG_KEY: instance_id} if instance_id else {})}
    created = ec2.create_network_interface(
        SubnetId=subnet_id,
        TagSpecifications=[
            {
                "ResourceType": "network-interface",
                "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            }
        ],
    )
    return str(created["NetworkInterface"]["NetworkInterfaceId"])


def sweep() -> list[str]:
    return handler.sweep(
        boto3.client("ec2", region_name=REGION),
        cluster=CLUSTER,
        owner_tag=OWNER_TAG_KEY,
        instance_tag=INSTANCE_TAG_KEY,
    )


def enis(ec2: Any) -> set[str]:
    return {
        eni["NetworkInterfaceId"] for eni in ec2.describe_network_interfaces()["NetworkInterfaces"]
    }


def test_an_eni_whose_instance_is_terminated_or_gone_is_deleted(ec2: Any, subnet_id: str) -> None:
    terminated = instance(ec2, subnet_id)
    left_by_terminated = multus_eni(ec2, subnet_id, terminated)
    left_by_gone = multus_eni(ec2, subnet_id, GONE)
    ec2.terminate_instances(InstanceIds=[terminated])

    assert sorted(sweep()) == sorted([left_by_terminated, left_by_gone])
    assert {left_by_terminated, left_by_gone}.isdisjoint(enis(ec2))


def test_an_eni_of_a_running_instance_and_enis_not_ours_to_judge_stay(
    ec2: Any, subnet_id: str
) -> None:
    running = instance(ec2, subnet_id)
    kept = {
        multus_eni(ec2, subnet_id, running),  # created, about to be attached
        multus_eni(ec2, subnet_id, GONE, cluster="another-cluster"),
        multus_eni(ec2, subnet_id, None),  # no instance tag: not our bootstrap's
    }
    attached = multus_eni(ec2, subnet_id, GONE)
    ec2.attach_network_interface(NetworkInterfaceId=attached, InstanceId=running, DeviceIndex=1)
    kept.add(attached)

    assert sweep() == []
    assert kept <= enis(ec2)


def test_an_eni_deleted_meanwhile_is_left_to_the_next_sweep(
    ec2: Any, subnet_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    multus_eni(ec2, subnet_id, GONE)
    original = handler._available_enis

    def listed_then_deleted(client: Any, *args: Any) -> dict[str, str]:
        found = original(client, *args)
        for eni_id in found:
            client.delete_network_interface(NetworkInterfaceId=eni_id)
        return found

    monkeypatch.setattr(handler, "_available_enis", listed_then_deleted)
    assert sweep() == []


def test_every_call_is_allowed_by_the_synthesized_policy(
    ec2: Any, subnet_id: str, default_app: SynthesizedApp
) -> None:
    eni_id = multus_eni(ec2, subnet_id, GONE)
    with recorded_ec2_calls() as calls:
        assert sweep() == [eni_id]
    assert [action for action, _ in calls] == [
        "DescribeNetworkInterfaces",
        "DescribeInstances",
        "DeleteNetworkInterface",
    ]
    statements = function_role_statements(
        default_app.templates_by_stack_name(),
        default_app.stage.cluster.stack_name,
        "MultusEniSweeperHandler",
    )

    def requests(owner: str) -> list[Any]:
        state = Ec2State(eni_tags={eni_id: {OWNER_TAG_KEY: owner, INSTANCE_TAG_KEY: GONE}})
        return [
            request
            for action, body in calls
            for request in authorization_requests(
                Ec2Call(action, {k: str(v) for k, v in body.items()}, state), Caller(REGION)
            )
        ]

    assert denied(statements, requests(CLUSTER)) == []
    # the delete names the ENI: one of another cluster is refused
    refused = denied(statements, requests("another-cluster"))
    assert len(refused) == 1 and "DeleteNetworkInterface" in refused[0]
