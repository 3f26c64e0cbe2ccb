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

from testing_support.karpenter_box.app_world import QUEUE_NAME
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import instance_id, wait_for
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS,
    claims,
    deployment,
    launched_names,
    node_pools,
    registered_claims,
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
        names = registered_claims(box, name)
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
