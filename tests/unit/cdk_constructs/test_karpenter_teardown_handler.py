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
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

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
from tests.moto_helpers import Fault, failing_calls, moto_ec2_fixtures

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
# What the VPC CNI puts on the ENIs it creates (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go:
# eniNodeTagKey, eniClusterTagKey, eniDescriptionPrefix + instance ID).
VPC_CNI_INSTANCE_TAG = "node.k8s.amazonaws.com/instance_id"
VPC_CNI_CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
VPC_CNI_DESCRIPTION_PREFIX = "aws-K8S-"
TAG_PROPERTIES = {
    # Karpenter's instance tags (its controller policy requires them on every launch)
    "KarpenterClusterTagKey": f"kubernetes.io/cluster/{CLUSTER}",
    "NodePoolTagKey": "karpenter.sh/nodepool",
    "MultusClusterTagKey": CLUSTER_TAG_KEY,
    "MultusNetworkTagKey": NETWORK_TAG_KEY,
    "VpcCniClusterTagKey": VPC_CNI_CLUSTER_TAG,
    "VpcCniInstanceTagKey": VPC_CNI_INSTANCE_TAG,
    "VpcCniDescriptionPrefix": VPC_CNI_DESCRIPTION_PREFIX,
}
TAGS = handler.TagKeys.of(TAG_PROPERTIES)


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


def vpc_cni_eni(
    ec2: Any,
    subnet_id: str,
    cluster: str | None = CLUSTER,
    *,
    description: str = f"{VPC_CNI_DESCRIPTION_PREFIX}i-0123456789abcdef0",
    instance_tag: bool = True,
) -> str:
    """An ENI as the VPC CNI creates it for a node (tags and description), not attached; with
    `cluster` None as it creates them when aws-node has no CLUSTER_NAME."""
    pairs = {"node.k8s.amazonaws.com/createdAt": "2026-11-30T12:00:00Z"}
    if cluster is not None:
        pairs[VPC_CNI_CLUSTER_TAG] = cluster
    if instance_tag:
        pairs[VPC_CNI_INSTANCE_TAG] = "i-0123456789abcdef0"
    eni = ec2.create_network_interface(
        SubnetId=subnet_id,
        Description=description,
        TagSpecifications=tags(pairs, "network-interface"),
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
            **TAG_PROPERTIES,
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
    handler.karpenter_instances(ec2, TAGS)

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
    assert handler.Leftovers(forced=False, instances=twenty).describe() == "instances " + ", ".join(
        twenty
    )
    shown = handler.Leftovers(forced=False, instances=[*twenty, "i-99999999999999999"]).describe()
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
        forced=False,
        node_claims=["multus-x7k2p"],
        node_classes=["multus"],
        instances=["i-0123"],
        network_interfaces=["eni-0456 (available)"],
        vpc_cni_network_interfaces=["eni-0789 (available)"],
        kubernetes_error="connection refused",
        ec2_error="RequestLimitExceeded",
    )
    assert left.describe().split("; ") == [
        "NodeClaims multus-x7k2p",
        "EC2NodeClasses multus",
        "instances i-0123",
        "ENIs eni-0456 (available)",
        "VPC CNI ENIs eni-0789 (available)",
        "(Kubernetes API: connection refused)",
        "(EC2, polling again: RequestLimitExceeded)",
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


# --- the VPC CNI's leaked ENIs ------------------------------------------------------------------


def test_available_vpc_cni_enis_of_this_cluster_are_deleted(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    """The VPC CNI's own cleanup finds its leaked ENIs by status available, its instance tag and
    its description (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go, getLeakedENIs), scoped to the
    cluster by its cluster tag; they keep the cluster security group and the subnets from being
    deleted (aws/aws-k8s-tester#416, aws/aws-cdk#18650)."""
    leaked = vpc_cni_eni(ec2, subnet_id)
    other_cluster = vpc_cni_eni(ec2, subnet_id, OTHER_CLUSTER)
    no_cluster_name = vpc_cni_eni(ec2, subnet_id, None)
    not_the_cnis = vpc_cni_eni(ec2, subnet_id, description="an operator's own ENI")
    no_instance_tag = vpc_cni_eni(ec2, subnet_id, instance_tag=False)
    on_a_live_node = vpc_cni_eni(ec2, subnet_id)
    node = ec2.run_instances(
        ImageId="ami-12c6146b", InstanceType="m5.large", MinCount=1, MaxCount=1, SubnetId=subnet_id
    )["Instances"][0]["InstanceId"]
    ec2.attach_network_interface(NetworkInterfaceId=on_a_live_node, InstanceId=node, DeviceIndex=1)
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})

    assert run_until_complete(delete_event(kubernetes.url))
    left = eni_ids(ec2)
    assert leaked not in left
    assert {other_cluster, no_cluster_name, not_the_cnis, no_instance_tag, on_a_live_node} <= left


def test_vpc_cni_enis_wait_until_no_karpenter_instance_is_left(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    stuck = launch(ec2, subnet_id, CLUSTER, protected=True)
    leaked = vpc_cni_eni(ec2, subnet_id)
    event = delete_event(kubernetes.url)
    event["Data"] = {**event["Data"], "Deadline": str(time.time() - 1)}

    assert not handler.is_complete(event)["IsComplete"]
    assert leaked in eni_ids(ec2)
    (response,) = kubernetes.responses
    assert stuck in response["Reason"]
    assert f"VPC CNI ENIs {leaked} (available)" in response["Reason"]


# --- transient errors: poll again; permanent ones: fail at once ---------------------------------

# EC2's throttling answer, among its client errors (EC2 API reference, "Error codes for the
# Amazon EC2 API"): the code, not a 5xx status, makes it transient.
THROTTLED: Fault = ("RequestLimitExceeded", 400)
SERVER_ERROR: Fault = ("InternalError", 500)
UNAVAILABLE: Fault = ("Unavailable", 503)
REFUSED: Fault = EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/")
TIMED_OUT: Fault = ReadTimeoutError(endpoint_url="https://ec2.us-west-2.amazonaws.com/")
TRANSIENT_FAULTS = {
    "throttled": THROTTLED,
    "server-error": SERVER_ERROR,
    "unavailable": UNAVAILABLE,
    "connection-refused": REFUSED,
    "read-timeout": TIMED_OUT,
}
# Every EC2 call the handler makes (one poll of the scenario below makes each).
EC2_CALLS = [
    "DescribeInstances",
    "TerminateInstances",
    "DescribeNetworkInterfaces",
    "DeleteNetworkInterface",
]


@pytest.fixture
def everything_to_remove(
    ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> tuple[str, list[str]]:
    """An orphaned Karpenter instance, a leaked Multus ENI and a leaked VPC CNI ENI; the
    Karpenter CRDs are gone, so one poll makes every EC2 call of the handler."""
    kubernetes.missing_collections.update({NODEPOOLS, NODECLAIMS, NODECLASSES})
    return launch(ec2, subnet_id, CLUSTER), [
        leaked_eni(ec2, subnet_id, CLUSTER),
        vpc_cni_eni(ec2, subnet_id),
    ]


@pytest.mark.parametrize("operation", EC2_CALLS)
@pytest.mark.parametrize("fault", TRANSIENT_FAULTS.values(), ids=TRANSIENT_FAULTS.keys())
def test_a_transient_ec2_error_on_any_call_means_poll_again(
    operation: str,
    fault: Fault,
    ec2: Any,
    kubernetes: FakeKubernetes,
    everything_to_remove: tuple[str, list[str]],
) -> None:
    """The Provider framework answers FAILED for any exception isComplete raises, and polls
    again only on IsComplete false (aws-cdk-lib custom-resources provider-framework
    runtime/framework.ts isComplete, cfn-response.ts safeHandler and Retry): throttling, 5xx,
    a refused connection and a timeout are answered "not complete", never raised."""
    node, enis = everything_to_remove
    event = delete_event(kubernetes.url)
    with failing_calls("ec2", operation, fault) as answered:
        assert handler.is_complete(event) == {"IsComplete": False}
    # made, failed, and the poll stopped there (two ENIs to delete: one attempt)
    assert answered == [operation]
    assert kubernetes.responses == []  # nothing answered to CloudFormation before the bound

    assert run_until_complete(event)  # the next polls finish the job
    assert state(ec2, node) == "terminated"
    assert not set(enis) & eni_ids(ec2)


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS.values(), ids=TRANSIENT_FAULTS.keys())
def test_a_transient_error_at_the_deadline_fails_listing_what_is_known(
    fault: Fault, ec2: Any, kubernetes: FakeKubernetes, subnet_id: str
) -> None:
    stuck = launch(ec2, subnet_id, CLUSTER, protected=True)
    event = delete_event(kubernetes.url)
    event["Data"] = {**event["Data"], "Deadline": str(time.time() - 1)}
    with failing_calls("ec2", "DescribeNetworkInterfaces", fault):
        assert not handler.is_complete(event)["IsComplete"]
    (response,) = kubernetes.responses
    assert response["Status"] == "FAILED"
    assert stuck in response["Reason"]
    assert "(EC2, polling again: " in response["Reason"]


@pytest.mark.parametrize("operation", EC2_CALLS)
def test_a_refused_permission_fails_the_delete_at_once(
    operation: str,
    ec2: Any,
    kubernetes: FakeKubernetes,
    everything_to_remove: tuple[str, list[str]],
) -> None:
    """No later poll can change a refused permission: raised, so the framework answers FAILED
    with it now instead of after the whole bound."""
    event = delete_event(kubernetes.url)
    with (
        failing_calls("ec2", operation, ("UnauthorizedOperation", 403)),
        pytest.raises(ClientError, match="UnauthorizedOperation"),
    ):
        handler.is_complete(event)


# EC2's common client errors that say the caller or the request is wrong, not the resource's
# state (EC2 API reference, "Error codes for the Amazon EC2 API").
PERMANENT_CODES = [
    "UnauthorizedOperation",
    "AuthFailure",
    "InvalidParameter",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "MissingParameter",
    "UnknownParameter",
]


@pytest.mark.parametrize("code", PERMANENT_CODES)
def test_a_permanent_refusal_about_one_eni_fails_the_delete(
    code: str, ec2: Any, kubernetes: FakeKubernetes, everything_to_remove: tuple[str, list[str]]
) -> None:
    event = delete_event(kubernetes.url)
    with (
        failing_calls("ec2", "DeleteNetworkInterface", (code, 400)),
        pytest.raises(ClientError, match=code),
    ):
        handler.is_complete(event)


def test_a_refusal_about_the_state_of_one_eni_waits_for_the_next_poll(
    ec2: Any, kubernetes: FakeKubernetes, everything_to_remove: tuple[str, list[str]]
) -> None:
    """InvalidNetworkInterface.InUse: attached again since it was listed; the other ENI still
    goes in the same poll."""
    _, enis = everything_to_remove
    event = delete_event(kubernetes.url)
    with failing_calls(
        "ec2", "DeleteNetworkInterface", ("InvalidNetworkInterface.InUse", 400)
    ) as answered:
        assert not handler.is_complete(event)["IsComplete"]
    assert len(answered) == 2
    assert set(enis) <= eni_ids(ec2)
    assert kubernetes.responses == []


KUBERNETES_CALLS = [
    ("GET", NODEPOOLS),
    ("DELETE", f"{NODEPOOLS}/multus"),
    ("GET", NODECLASSES),
    ("DELETE", f"{NODECLASSES}/multus"),
    ("GET", NODECLAIMS),
]


@pytest.mark.parametrize(("method", "path"), KUBERNETES_CALLS)
@pytest.mark.parametrize("status", [429, 500, 503])
def test_a_failing_kubernetes_call_means_poll_again_even_with_nothing_left_in_ec2(
    method: str, path: str, status: int, ec2: Any, kubernetes: FakeKubernetes
) -> None:
    """429 (API priority and fairness) and 5xx: the EC2NodeClass may still hold Karpenter's
    instance profiles, so an API that does not answer is no "nothing left" before ForceAfter."""
    kubernetes.add(NODEPOOLS, "multus")
    kubernetes.add(NODECLASSES, "multus")
    event = delete_event(kubernetes.url)
    kubernetes.failing[method, path] = status

    assert not handler.is_complete(event)["IsComplete"]
    assert kubernetes.responses == []
    del kubernetes.failing[method, path]
    assert run_until_complete(event)
    assert kubernetes.names(NODEPOOLS) == kubernetes.names(NODECLASSES) == []


@pytest.mark.parametrize("seconds_past_force", [-1, 0])
def test_an_unreachable_api_with_nothing_in_ec2_completes_from_the_force_second(
    seconds_past_force: int, ec2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_port = "http://127.0.0.1:9"  # connection refused
    event = delete_event(closed_port)
    monkeypatch.setattr(time, "time", lambda: 5000.0)
    event["Data"] = {"ForceAfter": str(5000 - seconds_past_force), "Deadline": "9000"}
    assert handler.is_complete(event)["IsComplete"] is (seconds_past_force == 0)


@pytest.mark.parametrize(("status", "transient"), [(499, False), (500, True), (503, True)])
def test_a_server_error_is_any_5xx_and_nothing_below(status: int, transient: bool) -> None:
    """5xx: the server failed, the same request may succeed (RFC 9110, 15.6); a 4xx other than
    EC2's throttling code is the request's own fault."""
    error = ClientError(
        {"Error": {"Code": "SomeError"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "DescribeInstances",
    )
    assert handler.is_transient(error) is transient
