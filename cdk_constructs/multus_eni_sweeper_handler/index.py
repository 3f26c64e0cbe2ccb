"""Deletes the cluster's Multus ENIs that outlived their node (cdk_constructs/multus_eni_sweeper).

Runs on a schedule. Lists the available ENIs that carry the cluster's owner tag, reads the
instance each was made for from its instance tag, and deletes those whose instance is gone:
shutting down, terminated, or no longer known to EC2 (it lists a terminated instance for about
an hour). An ENI of a pending or running instance is one its bootstrap has created and is about
to attach; one of a stopping or stopped instance may be attached when it starts again: both
stay. An ENI without an instance tag was not made by our bootstrap and is left alone.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import boto3
from botocore.exceptions import ClientError

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

#: Instance states whose ENIs stay (EC2 API reference, InstanceState).
ALIVE_STATES = frozenset({"pending", "running", "stopping", "stopped"})
#: EC2 answers for an ENI deleted or attached meanwhile: the next sweep decides again.
SKIPPED_ERRORS = frozenset({"InvalidNetworkInterfaceID.NotFound", "InvalidNetworkInterface.InUse"})
#: DescribeInstances takes at most 200 values per filter (EC2 API reference, Filter).
FILTER_VALUES_LIMIT = 200


def handler(event: dict[str, Any], context: Any) -> dict[str, list[str]]:
    del event, context
    deleted = sweep(
        boto3.client("ec2"),
        cluster=os.environ["CLUSTER_NAME"],
        owner_tag=os.environ["OWNER_TAG_KEY"],
        instance_tag=os.environ["INSTANCE_TAG_KEY"],
    )
    return {"deleted": deleted}


def sweep(ec2: Any, *, cluster: str, owner_tag: str, instance_tag: str) -> list[str]:
    """Deletes the leftover ENIs; returns their IDs."""
    leftovers = _available_enis(ec2, cluster, owner_tag, instance_tag)
    alive = _alive_instances(ec2, sorted(set(leftovers.values())))
    deleted = []
    for eni_id, instance_id in sorted(leftovers.items()):
        if instance_id in alive:
            continue
        try:
            ec2.delete_network_interface(NetworkInterfaceId=eni_id)
        except ClientError as error:
            code = error.response["Error"]["Code"]
            if code not in SKIPPED_ERRORS:
                raise
            LOG.info("%s of %s: %s, left to the next sweep", eni_id, instance_id, code)
            continue
        LOG.info("deleted %s, left behind by %s", eni_id, instance_id)
        deleted.append(eni_id)
    return deleted


def _available_enis(ec2: Any, cluster: str, owner_tag: str, instance_tag: str) -> dict[str, str]:
    """ENI ID -> the instance it was made for, of the cluster's available ENIs."""
    filters = [
        {"Name": f"tag:{owner_tag}", "Values": [cluster]},
        {"Name": "status", "Values": ["available"]},
    ]
    found = {}
    for page in ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters):
        for eni in page["NetworkInterfaces"]:
            tags = {tag["Key"]: tag["Value"] for tag in eni.get("TagSet", [])}
            if instance_tag in tags:
                found[eni["NetworkInterfaceId"]] = tags[instance_tag]
    return found


def _alive_instances(ec2: Any, instance_ids: list[str]) -> set[str]:
    """Those of `instance_ids` that EC2 knows in a state whose ENIs stay. By filter, not by
    InstanceIds, which fails the whole call for one ID EC2 no longer knows."""
    alive: set[str] = set()
    for start in range(0, len(instance_ids), FILTER_VALUES_LIMIT):
        chunk = instance_ids[start : start + FILTER_VALUES_LIMIT]
        filters = [{"Name": "instance-id", "Values": chunk}]
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page["Reservations"]:
                alive.update(
                    instance["InstanceId"]
                    for instance in reservation["Instances"]
                    if instance["State"]["Name"] in ALIVE_STATES
                )
    return alive
