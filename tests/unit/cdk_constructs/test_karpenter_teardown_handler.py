"""The teardown handler against moto (EC2) and a fake Kubernetes API: what it leaves behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.core.models import MockAWS

from cdk_constructs.karpenter_teardown_handler import index as handler
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from testing_support.fake_kubernetes import (
    RESPONSE_PATH,
    FakeKubernetes,
    is_eks_token,
    running_fake_kubernetes,
)
from tests.moto_helpers import moto_for_module

REGION = "us-west-2"
CLUSTER = "eks-telco"
OTHER_CLUSTER = "eks-other"
NODEPOOLS, NODECLAIMS, NODECLASSES = (
    handler.NODEPOOLS,
    handler.NODECLAIMS,
    handler.EC2NODECLASSES,
)
# moto terminates an instance at once, so a teardown that can finish does so in one poll here;
# two more show that waiting changes nothing.
MAX_POLLS = 3


@pytest.fixture(scope="module")
def aws() -> Iterator[MockAWS]:
    with moto_for_module(REGION) as mock:
        yield mock


@pytest.fixture
def ec2(aws: MockAWS) -> Any:
    aws.reset()  # every test starts from an empty account
    return boto3.client("ec2", region_name=REGION)


@pytest.fixture
def kubernetes() -> Iterator[FakeKubernetes]:
    with running_fake_kubernetes() as fake:
        yield fake


@pytest.fixture
def subnet_id(ec2: Any) -> str:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return str(ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.4.0/24")["Subnet"]["SubnetId"])


def tags(pairs: dict[str, str], resource: str) -> list[dict[str, Any]]:
    return [{"ResourceType": resource, "Tags": [{"Key": k, "Value": v} for k, v in pairs.items()]}]


def launch(ec2: Any, subnet_id: str, cluster: str, *, protected: bool = False) -> str:
    """An instance tagged the way Karpenter tags its nodes."""
    instance = ec2.run_instances(
        ImageId="ami-12c6146b",
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=subnet_id,
        TagSpecifications=tags(
            {
                CLUSTER_TAG_KEY: cluster,
                f"kubernetes.io/cluster/{cluster}": "owned",
                "karpenter.sh/nodepool": "multus",
            },
            "instance",
        ),
    )["Instances"][0]
    if protected:
        ec2.modify_instance_attribute(
            InstanceId=instance["InstanceId"], DisableApiTermination={"Value": True}
        )
    return str(instance["InstanceId"])


def leaked_eni(ec2: Any, subnet_id: str, cluster: str) -> str:
    """An available ENI tagged the way the node bootstrap tags the Multus ENIs."""
    eni = ec2.create_network_interface(
        SubnetId=subnet_id,
        TagSpecifications=tags(
            {CLUSTER_TAG_KEY: cluster, NETWORK_TAG_KEY: "multus1"}, "network-interface"
        ),
    )["NetworkInterface"]
    return str(eni["NetworkInterfaceId"])


def state(ec2: Any, instance_id: str) -> str:
    reservation = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]
    return str(reservation["Instances"][0]["State"]["Name"])


def eni_ids(ec2: Any) -> set[str]:
    return {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}


def delete_event(endpoint: str, **overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": "Delete",
        "StackId": "arn:aws:cloudformation:us-west-2:123456789012:stack/x-cluster/1",
        "RequestId": "request-1",
        "LogicalResourceId": "Teardown",
        "PhysicalResourceId": f"{CLUSTER}-karpenter-teardown",
        "ResponseURL": endpoint + RESPONSE_PATH,
        "ResourceProperties": {
            "ClusterName": CLUSTER,
            "ClusterEndpoint": endpoint,
            "ClusterCertificateAuthority": "",
            "TimeoutMinutes": "30",
            "ForceAfterMinutes": "20",
        },
    }
    event.update(handler.on_event(event))
    event.update(overrides)
    return event


def run_until_complete(event: dict[str, Any]) -> bool:
    """Polls like the Provider's waiter (without the wait); True once complete."""
    return any(handler.is_complete(event)["IsComplete"] for _ in range(MAX_POLLS))


def karpenter_cluster(kubernetes: FakeKubernetes, ec2: Any, instance_id: str) -> None:
    """One NodePool, its EC2NodeClass and one NodeClaim for `instance_id`; deleting the
    NodePool makes the fake controller drain: NodeClaim deleted, instance terminated."""
    kubernetes.add(NODEPOOLS, "multus")
    kubernetes.add(NODECLASSES, "multus")
    kubernetes.add(NODECLAIMS, "multus-x7k2p", labels={"karpenter.sh/nodepool": "multus"})

    def controller(collection: str, _name: str) -> None:
        if collection == NODEPOOLS:
            kubernetes.objects[NODECLAIMS].clear()
            ec2.terminate_instances(InstanceIds=[instance_id])

    kubernetes.on_delete = controller


def test_delete_lets_karpenter_drain_then_sweeps_leaked_enis_of_this_cluster_only(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    node = launch(ec2, subnet_id, CLUSTER)
    other_node = launch(ec2, subnet_id, OTHER_CLUSTER)
    leaked = leaked_eni(ec2, subnet_id, CLUSTER)
    other_leaked = leaked_eni(ec2, subnet_id, OTHER_CLUSTER)
    karpenter_cluster(kubernetes, ec2, node)

    assert run_until_complete(delete_event(kubernetes.url))

    assert (NODEPOOLS, "multus") in kubernetes.deleted
    assert (NODECLASSES, "multus") in kubernetes.deleted
    assert kubernetes.names(NODECLAIMS) == []
    assert state(ec2, node) == "terminated"
    assert leaked not in eni_ids(ec2)
    assert state(ec2, other_node) == "running"
    assert other_leaked in eni_ids(ec2)
    assert kubernetes.responses == []  # success is the Provider framework's answer


def test_nodeclaims_being_drained_are_waited_for_not_cut_short(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    node = launch(ec2, subnet_id, CLUSTER)
    kubernetes.add(NODEPOOLS, "multus")
    kubernetes.add(NODECLAIMS, "multus-x7k2p")  # the controller is still draining it

    assert not run_until_complete(delete_event(kubernetes.url))
    assert state(ec2, node) == "running"


def test_instances_no_nodeclaim_accounts_for_are_terminated_through_ec2(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    orphans = [launch(ec2, subnet_id, CLUSTER) for _ in range(2)]
    leaked = leaked_eni(ec2, subnet_id, CLUSTER)
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})  # CRDs gone

    assert run_until_complete(delete_event(kubernetes.url))

    assert [state(ec2, i) for i in orphans] == ["terminated", "terminated"]
    assert leaked not in eni_ids(ec2)


def test_unreachable_api_waits_for_the_drain_time_then_terminates(ec2: Any, subnet_id: str) -> None:
    node = launch(ec2, subnet_id, CLUSTER)
    closed_port = "http://127.0.0.1:9"

    assert not run_until_complete(delete_event(closed_port))
    assert state(ec2, node) == "running"

    forced = delete_event(closed_port)
    forced["Data"] = {**forced["Data"], "ForceAfter": str(time.time() - 1)}
    assert run_until_complete(forced)
    assert state(ec2, node) == "terminated"


def test_an_instance_that_will_not_terminate_fails_the_delete_naming_it(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    stuck = launch(ec2, subnet_id, CLUSTER, protected=True)
    leaked = leaked_eni(ec2, subnet_id, CLUSTER)
    event = delete_event(kubernetes.url)

    assert not run_until_complete(event)
    assert kubernetes.responses == []  # before the bound: keep waiting

    event["Data"] = {**event["Data"], "Deadline": str(time.time() - 1)}
    assert not handler.is_complete(event)["IsComplete"]
    (response,) = kubernetes.responses
    assert response["Status"] == "FAILED"
    assert stuck in response["Reason"]
    assert leaked in response["Reason"]  # not swept while an instance may still use it
    assert response["PhysicalResourceId"] == f"{CLUSTER}-karpenter-teardown"
    assert {response["RequestId"], response["LogicalResourceId"]} == {"request-1", "Teardown"}


def test_create_and_update_touch_nothing_and_keep_one_physical_id(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    node = launch(ec2, subnet_id, CLUSTER)
    kubernetes.add(NODEPOOLS, "multus")
    for request in ("Create", "Update"):
        event = {**delete_event(kubernetes.url), "RequestType": request}
        answer = handler.on_event(event)
        assert answer["PhysicalResourceId"] == f"{CLUSTER}-karpenter-teardown"
        assert handler.is_complete(event) == {"IsComplete": True}
    assert kubernetes.deleted == []
    assert state(ec2, node) == "running"


def test_token_is_a_presigned_sts_url_naming_the_cluster(ec2: Any) -> None:
    token = handler.eks_token(CLUSTER)
    assert is_eks_token(token)
    assert not is_eks_token(token.replace("k8s-aws-v1.", "k8s-aws-v2."))
