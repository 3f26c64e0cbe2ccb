"""The teardown handler against moto (EC2) and a fake Kubernetes API: what it leaves behind."""

from __future__ import annotations

import base64
import datetime
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.auth
import pytest

from cdk_constructs.karpenter_teardown_handler import index as handler
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from testing_support.fake_kubernetes import (
    RESPONSE_PATH,
    FakeKubernetes,
    is_eks_token,
    pem_base64,
    running_fake_kubernetes,
    self_signed_authority,
)
from tests.moto_helpers import moto_ec2_fixtures

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


aws, ec2 = moto_ec2_fixtures(REGION)


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


def test_instances_without_karpenters_nodepool_tag_are_never_terminated(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    """The system node group's instances carry the cluster tag too, but no NodePool tag."""
    system_node = ec2.run_instances(
        ImageId="ami-12c6146b",
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=subnet_id,
        TagSpecifications=tags({f"kubernetes.io/cluster/{CLUSTER}": "owned"}, "instance"),
    )["Instances"][0]["InstanceId"]
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})

    assert run_until_complete(delete_event(kubernetes.url))
    assert state(ec2, system_node) == "running"


def test_every_instance_state_but_terminated_is_a_leftover(ec2: Any) -> None:
    """EC2 still lists terminated instances for a while; any other state is an instance that
    exists (EC2's InstanceStateName values, as botocore's model lists them)."""
    sent: list[dict[str, Any]] = []
    ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstances", lambda params, **_: sent.append(params)
    )
    handler.karpenter_instances(ec2, CLUSTER)

    (params,) = sent
    every_state = ec2.meta.service_model.shape_for("InstanceStateName").enum
    assert {f["Name"]: sorted(f["Values"]) for f in params["Filters"]} == {
        f"tag:kubernetes.io/cluster/{CLUSTER}": ["owned"],
        "tag-key": ["karpenter.sh/nodepool"],
        "instance-state-name": sorted(set(every_state) - {"terminated"}),
    }


def test_a_stopped_karpenter_instance_is_terminated_too(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    stopped = launch(ec2, subnet_id, CLUSTER)
    ec2.stop_instances(InstanceIds=[stopped])
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})

    assert run_until_complete(delete_event(kubernetes.url))
    assert state(ec2, stopped) == "terminated"


def test_only_available_multus_enis_of_this_cluster_are_deleted(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    """An ENI with the cluster tag but no Multus network tag is not the bootstrap's; an attached
    one belongs to a live instance (here one Karpenter does not own)."""
    not_multus = ec2.create_network_interface(
        SubnetId=subnet_id,
        TagSpecifications=tags({CLUSTER_TAG_KEY: CLUSTER}, "network-interface"),
    )["NetworkInterface"]["NetworkInterfaceId"]
    attached = leaked_eni(ec2, subnet_id, CLUSTER)
    other_instance = ec2.run_instances(
        ImageId="ami-12c6146b", InstanceType="m5.large", MinCount=1, MaxCount=1, SubnetId=subnet_id
    )["Instances"][0]["InstanceId"]
    ec2.attach_network_interface(
        NetworkInterfaceId=attached, InstanceId=other_instance, DeviceIndex=1
    )
    leaked = leaked_eni(ec2, subnet_id, CLUSTER)
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})

    assert not run_until_complete(delete_event(kubernetes.url))  # the attached one stays
    assert eni_ids(ec2) >= {not_multus, attached}
    assert leaked not in eni_ids(ec2)


def test_objects_already_being_deleted_are_not_deleted_again(
    ec2: Any, kubernetes: FakeKubernetes
) -> None:
    kubernetes.add(NODEPOOLS, "multus", deletionTimestamp="2026-11-30T12:00:00Z")
    kubernetes.add(NODECLASSES, "multus", deletionTimestamp="2026-11-30T12:00:00Z")

    handler.is_complete(delete_event(kubernetes.url))
    assert kubernetes.deleted == []


def test_delete_sets_the_bounds_from_the_minutes_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: 1_000_000.5)
    event = delete_event("http://127.0.0.1:9")
    # TimeoutMinutes 30, ForceAfterMinutes 20, as epoch seconds
    assert event["Data"] == {"Deadline": "1001800", "ForceAfter": "1001200"}
    assert event["PhysicalResourceId"] == f"{CLUSTER}-karpenter-teardown"


def test_ec2_takes_over_from_the_exact_force_second(
    ec2: Any, subnet_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = launch(ec2, subnet_id, CLUSTER)
    unreachable = delete_event("http://127.0.0.1:9")
    monkeypatch.setattr(time, "time", lambda: 5000.0)
    forced = {**unreachable, "Data": {"ForceAfter": "5000", "Deadline": "9000"}}
    assert handler.is_complete(forced)["IsComplete"]
    assert state(ec2, node) == "terminated"


def test_the_failure_is_reported_at_the_deadline_second(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch(ec2, subnet_id, CLUSTER, protected=True)
    event = delete_event(kubernetes.url)
    monkeypatch.setattr(time, "time", lambda: 5000.0)
    event["Data"] = {"ForceAfter": "4000", "Deadline": "5001"}
    assert not handler.is_complete(event)["IsComplete"]
    assert kubernetes.responses == []
    event["Data"] = {"ForceAfter": "4000", "Deadline": "5000"}
    assert not handler.is_complete(event)["IsComplete"]
    assert [r["Status"] for r in kubernetes.responses] == ["FAILED"]


def test_failure_response_echoes_the_request_as_cloudformation_requires(
    kubernetes: FakeKubernetes,
) -> None:
    """StackId, RequestId and LogicalResourceId are copied from the request; the body goes with
    an empty Content-Type, as AWS's cfn-response module sends it to the presigned URL."""
    event = delete_event(kubernetes.url)
    handler.fail(event, "left: i-0123")
    (response,) = kubernetes.responses
    assert response == {
        "Status": "FAILED",
        "Reason": "left: i-0123",
        "PhysicalResourceId": event["PhysicalResourceId"],
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
    }
    assert kubernetes.response_content_types == [""]


def test_failure_response_fits_cloudformations_4096_bytes_whatever_is_left(
    kubernetes: FakeKubernetes,
) -> None:
    """The reason is cut to 2000 characters: the rest of the 4096 bytes is for what the response
    must echo (a PhysicalResourceId of up to 1 KB, the stack ARN, a 255-character logical ID)."""
    event = delete_event(kubernetes.url)
    event["PhysicalResourceId"] = "p" * 1024
    event["LogicalResourceId"] = "L" * 255
    handler.fail(event, "r" * 2000)
    handler.fail(event, "r" * 2001 + "beyond")
    whole, cut = kubernetes.responses
    assert whole["Reason"] == cut["Reason"] == "r" * 2000
    assert len(json.dumps(cut).encode()) <= 4096


def test_each_kind_lists_up_to_twenty_ids_then_counts_the_rest() -> None:
    twenty = [f"i-{n:017d}" for n in range(20)]
    assert handler.Leftovers(instances=twenty).describe() == "instances " + ", ".join(twenty)
    shown = handler.Leftovers(instances=[*twenty, "i-99999999999999999"]).describe()
    assert shown == "instances " + ", ".join(twenty) + " and 1 more"


def test_token_is_what_aws_eks_get_token_makes_in_the_functions_region(
    ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """awscli's `eks get-token`: an STS GetCallerIdentity URL presigned for 60 s with the
    x-k8s-aws-id header signed, base64url without padding after "k8s-aws-v1.". Lambda sets
    AWS_REGION: the token is made for the function's region."""
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    signing_time = datetime.datetime(2026, 11, 30, 12, 0, 0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: signing_time)
    sts = boto3.client(
        "sts", region_name="eu-west-1", endpoint_url="https://sts.eu-west-1.amazonaws.com"
    )

    def name_the_cluster(request: Any, **_: Any) -> None:
        request.headers["x-k8s-aws-id"] = CLUSTER

    sts.meta.events.register("before-sign.sts.GetCallerIdentity", name_the_cluster)
    url = sts.generate_presigned_url("get_caller_identity", ExpiresIn=60, HttpMethod="GET")

    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    assert handler.eks_token(CLUSTER) == "k8s-aws-v1." + encoded


def returns_within_seconds(bound: float, call: Callable[[], object]) -> bool:
    """False when `call` is still waiting after `bound` seconds (a generous bound for a loaded
    machine: the handler's HTTP timeout is patched to 0.2 s here; without one it waits for ever)."""
    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(bound)
    return not worker.is_alive()


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port that accepts connections and never answers (an API behind a dropped route)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_an_api_that_never_answers_does_not_hold_the_poll(
    ec2: Any, silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request gives up (an OSError, which the poll records and lets EC2 decide)."""
    monkeypatch.setattr(handler, "HTTP_TIMEOUT_SECONDS", 0.2)
    api = handler.KubernetesApi(handler.Cluster(CLUSTER, silent_endpoint, ""))
    errors: list[OSError] = []

    def ask() -> None:
        try:
            api.delete_node_pools_and_classes()
        except OSError as error:
            errors.append(error)

    assert returns_within_seconds(30, ask)
    assert len(errors) == 1


def test_a_response_url_that_never_answers_does_not_hold_the_poll(
    silent_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler, "HTTP_TIMEOUT_SECONDS", 0.2)
    event = delete_event(silent_endpoint, ResponseURL=silent_endpoint + RESPONSE_PATH)
    # returns (the failure is logged, not raised) instead of waiting for ever
    assert returns_within_seconds(30, lambda: handler.fail(event, "left: i-0123"))


def test_the_reason_names_each_kind_left_and_why_kubernetes_could_not_be_asked() -> None:
    left = handler.Leftovers(
        node_claims=["multus-x7k2p"],
        node_classes=["multus"],
        instances=["i-0123"],
        network_interfaces=["eni-0456 (available)"],
        kubernetes_error="connection refused",
    )
    assert left.describe().split("; ") == [
        "NodeClaims multus-x7k2p",
        "EC2NodeClasses multus",
        "instances i-0123",
        "ENIs eni-0456 (available)",
        "(Kubernetes API: connection refused)",
    ]


def test_the_api_servers_certificate_is_checked_against_the_clusters_ca(ec2: Any) -> None:
    with running_fake_kubernetes(tls=True) as kubernetes:
        kubernetes.add(NODEPOOLS, "multus")
        event = delete_event(kubernetes.url)
        properties = event["ResourceProperties"]
        impostor = pem_base64(self_signed_authority("kubernetes")[0])

        event["ResourceProperties"] = {**properties, "ClusterCertificateAuthority": impostor}
        handler.is_complete(event)
        assert kubernetes.deleted == []

        trusted = kubernetes.certificate_authority
        event["ResourceProperties"] = {**properties, "ClusterCertificateAuthority": trusted}
        handler.is_complete(event)
        assert kubernetes.deleted == [(NODEPOOLS, "multus")]
