"""examples/three-az-three-networks.json (one pool attaching three Multus networks, so
Karpenter's reservedENIs is 3), with the real Karpenter, in this order:

1. reservedENIs: a size whose default card has no interface left once reservedENIs are taken
   gets 0 pods, so Karpenter never launches it (config/pod_enis.py refuses such a pool at synth;
   here the pool is narrowed in the cluster to what the config now refuses);
2. teardown: the teardown custom resource's handler (cdk_constructs/karpenter_teardown_handler,
   driven with the template's properties) against this Karpenter: it deletes the NodePools and
   EC2NodeClasses, Karpenter's finalizers drain and terminate the instances in the emulator, the
   sweep deletes the leaked Multus ENI, and nothing of the cluster's is left there. Deviations:
   the handler's EKS token (a presigned STS URL) is a token of a service account bound to the
   teardown's ClusterRole (the access entry maps the handler's role to its group, which the box
   cannot), and its EC2 calls are signed with the teardown credentials of
   testing_support/teardown_emulation.py.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cdk_constructs.karpenter_teardown_handler import index as handler
from config.pod_enis import pod_interfaces
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from testing_support.iam_call_level import resolver
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import instance_id
from testing_support.multus_emulator import NODE_CREDENTIALS, REGION
from testing_support.teardown_emulation import TEARDOWN_CREDENTIALS, leaked_multus_eni
from tests.karpenter_box.pools import (
    claims,
    create_pod,
    delete_pod,
    deployment,
    get_pod,
    launched,
    node_pools,
    pool_pod,
    registered_claims,
    settle,
)

pytestmark = pytest.mark.karpenter_box

NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
#: Karpenter batches pending pods for up to 10 s (BATCH_MAX_DURATION) before it decides; three
#: batches without a NodeClaim is a decision.
NO_LAUNCH_SECONDS = 35.0
TEARDOWN_SECONDS = 240.0
POLL_SECONDS = 5.0


@pytest.fixture(scope="module")
def box(three_by_three_box: KarpenterBox) -> KarpenterBox:
    return three_by_three_box


def narrow(box: KarpenterBox, pool: str, instance_type: str) -> list[dict[str, Any]]:
    """Narrows the pool to one instance type; returns its requirements before."""
    node_pool = box.api.get(f"{NODEPOOLS}/{pool}")
    before: list[dict[str, Any]] = node_pool["spec"]["template"]["spec"]["requirements"]
    requirements = [
        r
        for r in before
        if not r["key"].startswith(
            ("karpenter.k8s.aws/instance-", "node.kubernetes.io/instance-type")
        )
    ] + [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}]
    patch = {"spec": {"template": {"spec": {"requirements": requirements}}}}
    box.api.merge_patch(f"{NODEPOOLS}/{pool}", patch)
    return before


def default_card_interfaces(box: KarpenterBox, instance_type: str) -> int:
    (described,) = box.emulator.ec2.describe_instance_types(InstanceTypes=[instance_type])[
        "InstanceTypes"
    ]
    return int(described["NetworkInfo"]["MaximumNetworkInterfaces"])


def test_reserved_enis_leave_a_size_no_pods_and_karpenter_never_launches_it(
    box: KarpenterBox,
) -> None:
    reserved = int(box.environment["RESERVED_ENIS"])
    assert reserved == 3
    (name, pool) = next(iter(node_pools(box).items()))
    # c5.large: 3 interfaces, all reserved -> 0 pods (config/pod_enis.py's model, from EC2's
    # description of the size); c5.xlarge: 4 -> one interface for pods.
    assert pod_interfaces(default_card_interfaces(box, "c5.large"), reserved) == 0
    assert pod_interfaces(default_card_interfaces(box, "c5.xlarge"), reserved) == 1
    known = {c["metadata"]["name"] for c in claims(box, name)}
    before = narrow(box, name, "c5.large")
    pod = pool_pod("zero-pod-size", pool, cpu="100m", memory="128Mi")
    create_pod(box, pod)
    try:
        settle(NO_LAUNCH_SECONDS)
        assert {c["metadata"]["name"] for c in claims(box, name)} == known
        assert not get_pod(box, "zero-pod-size")["spec"].get("nodeName")
        narrow(box, name, "c5.xlarge")
        launch = launched(box, name, known)
        assert launch.instance["InstanceType"] == "c5.xlarge"
    finally:
        delete_pod(box, "zero-pod-size")
        box.api.merge_patch(
            f"{NODEPOOLS}/{name}", {"spec": {"template": {"spec": {"requirements": before}}}}
        )


def teardown_properties(box: KarpenterBox) -> dict[str, str]:
    """The teardown resource's properties as the template gives them, resolved, pointed at the
    box's API server and CA."""
    app = box.world.app
    (teardown,) = [
        resource
        for resource in app.cluster["Resources"].values()
        if resource["Type"] == "Custom::KarpenterTeardown"
    ]
    resolve = resolver(dict(app.templates), app.cluster_stack, box.world.ids).resolve
    properties = {
        key: str(resolve(value))
        for key, value in teardown["Properties"].items()
        if key not in ("ServiceToken", "ClusterEndpoint", "ClusterCertificateAuthority")
    }
    ca = box.plane.pki.ca_cert.read_bytes()
    return {
        **properties,
        "ClusterName": box.world.cluster_name,
        "ClusterEndpoint": box.plane.server,
        "ClusterCertificateAuthority": base64.b64encode(ca).decode(),
    }


def teardown_token(box: KarpenterBox) -> str:
    """A token of a service account bound to the teardown's own ClusterRole."""
    plane = box.plane
    plane.kubectl("create", "serviceaccount", "karpenter-teardown", "-n", "kube-system")
    plane.kubectl(
        "create", "clusterrolebinding", "karpenter-teardown-box",
        "--clusterrole=karpenter-teardown", "--serviceaccount=kube-system:karpenter-teardown",
    )  # fmt: skip
    return plane.kubectl("create", "token", "karpenter-teardown", "-n", "kube-system").strip()


def cluster_instances(box: KarpenterBox, states: tuple[str, ...]) -> list[str]:
    reservations = box.emulator.ec2.describe_instances(
        Filters=[
            {"Name": "tag-key", "Values": [f"kubernetes.io/cluster/{box.world.cluster_name}"]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
    )["Reservations"]
    return [i["InstanceId"] for r in reservations for i in r["Instances"]]


def multus_enis(box: KarpenterBox) -> list[str]:
    enis = box.emulator.ec2.describe_network_interfaces(
        Filters=[{"Name": f"tag:{CLUSTER_TAG_KEY}", "Values": [box.world.cluster_name]}]
    )["NetworkInterfaces"]
    return [eni["NetworkInterfaceId"] for eni in enis if NETWORK_TAG_KEY in str(eni["TagSet"])]


@pytest.fixture
def teardown_environment(box: KarpenterBox, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The handler's boto3 reaches the emulator's proxy as the teardown role; the proxy also
    takes the nodes' signatures (the bootstrap's) beside the controller's."""
    for name, value in {
        "AWS_ENDPOINT_URL_EC2": box.emulator.proxy.url,
        "AWS_ACCESS_KEY_ID": TEARDOWN_CREDENTIALS.access_key,
        "AWS_SECRET_ACCESS_KEY": TEARDOWN_CREDENTIALS.secret_key,
        "AWS_SESSION_TOKEN": TEARDOWN_CREDENTIALS.token,
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setattr("boto3.DEFAULT_SESSION", None)
    accepted = box.emulator.proxy.also_accepted
    box.emulator.proxy.also_accepted = [*accepted, TEARDOWN_CREDENTIALS, NODE_CREDENTIALS]
    yield
    box.emulator.proxy.also_accepted = accepted


def test_teardown_drains_through_karpenter_and_leaves_nothing_of_the_cluster(
    box: KarpenterBox, teardown_environment: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (name, pool) = next(iter(node_pools(box).items()))
    box.api.create("/apis/apps/v1/namespaces/default/deployments", deployment("torn-down", pool))
    names = registered_claims(box, name)
    claim = next(c for c in claims(box, name) if c["metadata"]["name"] in names)
    instance = instance_id(claim["status"]["providerID"])
    # The node's bootstrap, from the user data Karpenter merged into its launch template, gives
    # it its Multus ENIs (attached with DeleteOnTermination); one more leaked before that.
    run = box.emulator.run_bootstrap(box.fleets.user_data(instance), instance)
    assert run.returncode == 0, run.output
    attached = multus_enis(box)
    assert len(attached) == 3
    az = box.world.app.config.availability_zones[0]
    leaked = leaked_multus_eni(box.emulator, box.world.vpc.vpc, az, box.world.cluster_name)
    token = teardown_token(box)
    monkeypatch.setattr(handler, "eks_token", lambda _cluster: token)
    event: dict[str, Any] = {
        "RequestType": "Delete",
        "StackId": f"arn:aws:cloudformation:{REGION}:123456789012:stack/cluster/1",
        "RequestId": "request-1",
        "LogicalResourceId": "Teardown",
        "PhysicalResourceId": f"{box.world.cluster_name}-karpenter-teardown",
        "ResourceProperties": teardown_properties(box),
    }
    event.update(handler.on_event(event))
    deadline = time.monotonic() + TEARDOWN_SECONDS
    while not handler.is_complete(event)["IsComplete"]:
        assert time.monotonic() < deadline, box.controller_log()[-3000:]
        time.sleep(POLL_SECONDS)
    # Karpenter did the draining: its NodeClaims, NodePools and EC2NodeClasses are gone, their
    # finalizers done; the instances are terminated in EC2, the Multus ENIs deleted with them
    # (DeleteOnTermination) or swept (the leaked one).
    for collection in (handler.NODECLAIMS, handler.NODEPOOLS, handler.EC2NODECLASSES):
        assert box.api.items(collection) == [], collection
    assert cluster_instances(box, ("pending", "running", "stopping", "stopped")) == []
    assert instance in cluster_instances(box, ("shutting-down", "terminated"))
    assert multus_enis(box) == []
    assert leaked not in multus_enis(box)
    # Karpenter's own AWS resources go with its EC2NodeClasses: launch templates, profiles.
    templates = box.emulator.ec2.describe_launch_templates(
        Filters=[{"Name": "tag:karpenter.k8s.aws/cluster", "Values": [box.world.cluster_name]}]
    )["LaunchTemplates"]
    assert templates == []
