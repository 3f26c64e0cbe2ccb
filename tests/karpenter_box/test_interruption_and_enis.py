"""Two things only Karpenter's own code decides. An EC2 scheduled change on the interruption
queue (the AWS Health event EventBridge forwards) makes Karpenter cordon, drain and delete the
node and its instance, and launch a replacement for the pod it ran. And Karpenter's
reservedENIs: a size whose default card has no interface left once reservedENIs are taken gets
0 pods, so Karpenter never launches it (config/pod_enis.py refuses such a pool at synth; here
the pool is narrowed in the cluster to what the config now refuses)."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest

from config.pod_enis import pod_interfaces
from testing_support.karpenter_box.app_world import QUEUE_NAME
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import instance_id, wait_for
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS,
    claims,
    create_pod,
    delete_pod,
    deployment,
    get_pod,
    launched,
    launched_names,
    node_pools,
    pool_pod,
    settle,
)

pytestmark = pytest.mark.karpenter_box

NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
#: Karpenter batches pending pods for up to 10 s (BATCH_MAX_DURATION) before it decides; three
#: batches without a NodeClaim is a decision.
NO_LAUNCH_SECONDS = 35.0


def scheduled_change(instance: str) -> dict[str, Any]:
    """An AWS Health scheduled change for the instance, as EventBridge puts it on the queue
    (Karpenter's messages/scheduledchange: source aws.health, service EC2, category
    scheduledChange)."""
    now = datetime.datetime.now(datetime.UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": "123456789012",
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [],
        "detail": {
            "eventArn": f"arn:aws:health:us-west-2::event/EC2/{uuid.uuid4()}",
            "service": "EC2",
            "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
            "eventTypeCategory": "scheduledChange",
            "startTime": now.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "endTime": (now + datetime.timedelta(days=1)).strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "eventDescription": [{"language": "en_US", "latestDescription": "retirement"}],
            "affectedEntities": [{"entityValue": instance}],
        },
    }


def instance_state(box: KarpenterBox, instance: str) -> str:
    (reservation,) = box.emulator.ec2.describe_instances(InstanceIds=[instance])["Reservations"]
    return str(reservation["Instances"][0]["State"]["Name"])


def test_a_scheduled_change_on_the_queue_replaces_the_node(default_box: KarpenterBox) -> None:
    box = default_box
    (name, pool) = next(iter(node_pools(box).items()))
    box.api.create("/apis/apps/v1/namespaces/default/deployments", deployment("interrupted", pool))
    try:
        names: set[str] = wait_for(
            lambda: launched_names(box, name),
            LAUNCH_SECONDS,
            "a registered claim",
            lambda: claims(box, name),
        )
        claim = next(c for c in claims(box, name) if c["metadata"]["name"] in names)
        instance = instance_id(claim["status"]["providerID"])
        sqs = box.emulator.moto_client("sqs")
        url = sqs.get_queue_url(QueueName=QUEUE_NAME)["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(scheduled_change(instance)))
        wait_for(
            lambda: instance_state(box, instance) in ("shutting-down", "terminated"),
            LAUNCH_SECONDS,
            f"instance {instance} terminated by Karpenter",
            lambda: (instance_state(box, instance), box.controller_log()[-1500:]),
        )
        wait_for(
            lambda: (
                claim["metadata"]["name"] not in {c["metadata"]["name"] for c in claims(box, name)}
            ),
            LAUNCH_SECONDS,
            f"NodeClaim {claim['metadata']['name']} gone",
            lambda: claims(box, name),
        )
        wait_for(
            lambda: launched_names(box, name) - names,
            LAUNCH_SECONDS,
            "a replacement NodeClaim registered",
            lambda: claims(box, name),
        )
        # The queue's message is consumed (Karpenter deletes what it handled).
        attributes = sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        assert attributes["ApproximateNumberOfMessages"] == "0"
    finally:
        box.api.delete("/apis/apps/v1/namespaces/default/deployments/interrupted")


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
    three_by_three_box: KarpenterBox,
) -> None:
    box = three_by_three_box
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
