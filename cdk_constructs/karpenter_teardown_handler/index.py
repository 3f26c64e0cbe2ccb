"""Lambda handlers behind the KarpenterTeardown custom resource (custom_resources.Provider).

Karpenter's instances and the Multus ENIs of the node bootstrap are not CloudFormation
resources, so nothing else removes them before the cluster and network go. This resource is
deleted first (it depends on the Karpenter controller, the node role's access entry and the
in-cluster charts), and on delete:

1. deletes every NodePool and EC2NodeClass through the Kubernetes API, so the still running
   controller drains and terminates its nodes (bounded by the NodePool's
   terminationGracePeriod) and removes the instance profiles it created;
2. terminates through EC2 any instance tagged for this cluster by Karpenter that no NodeClaim
   accounts for any more (Karpenter gone, or the drain past its time);
3. once no such instance is left, deletes the available ENIs the node bootstrap tagged for this
   cluster (those whose node died before DeleteOnTermination was set);
4. completes when no NodeClaim, EC2NodeClass, tagged instance or tagged ENI remains, and fails
   listing what is left once the configured bound has passed.

Create and Update do nothing; the physical ID never changes, so updates never tear down.

Resource properties: ClusterName, ClusterEndpoint, ClusterCertificateAuthority (base64 PEM),
TimeoutMinutes, ForceAfterMinutes (when EC2 termination stops waiting for Karpenter).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError
from botocore.model import ServiceId
from botocore.signers import RequestSigner

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

# Tags Karpenter puts on every instance it launches (its controller policy requires them;
# its deletion statement, and ours, condition on these two).
KARPENTER_CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
NODEPOOL_TAG = "karpenter.sh/nodepool"
# Tag keys the node bootstrap puts on every Multus ENI (node_bootstrap.renderer).
CLUSTER_TAG = "eks:eks-cluster-name"
MULTUS_NETWORK_TAG = "multus-eni/network"

NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
EC2NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
# A custom resource response may hold 4 KB: list this many IDs per kind at most.
MAX_LISTED = 20
MAX_REASON_CHARS = 2000
HTTP_TIMEOUT_SECONDS = 10


def on_event(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    props = event["ResourceProperties"]
    LOG.info("%s teardown resource of %s", event["RequestType"], props["ClusterName"])
    if event["RequestType"] != "Delete":
        return {"PhysicalResourceId": f"{props['ClusterName']}-karpenter-teardown"}
    now = time.time()
    return {
        # a delete may not change it (the Provider framework refuses)
        "PhysicalResourceId": event["PhysicalResourceId"],
        "Data": {
            "Deadline": str(int(now + 60 * int(props["TimeoutMinutes"]))),
            "ForceAfter": str(int(now + 60 * int(props["ForceAfterMinutes"]))),
        },
    }


def is_complete(event: dict[str, Any], _context: object = None) -> dict[str, Any]:
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    data = event["Data"]
    leftovers = teardown_step(
        cluster=Cluster(
            props["ClusterName"], props["ClusterEndpoint"], props["ClusterCertificateAuthority"]
        ),
        force=time.time() >= float(data["ForceAfter"]),
    )
    if leftovers.empty:
        LOG.info("teardown complete: nothing of %s left", props["ClusterName"])
        return {"IsComplete": True}
    LOG.info("waiting for: %s", leftovers.describe())
    if time.time() >= float(data["Deadline"]):
        fail(event, f"Teardown of {props['ClusterName']} timed out; left: {leftovers.describe()}")
    return {"IsComplete": False}


@dataclass(frozen=True)
class Cluster:
    """The EKS cluster's API endpoint and CA, as DescribeCluster returns them."""

    name: str
    endpoint: str
    certificate_authority: str


@dataclass
class Leftovers:
    """What still exists; `kubernetes_error` when the API could not be asked."""

    node_claims: list[str] = field(default_factory=list)
    node_classes: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    network_interfaces: list[str] = field(default_factory=list)
    kubernetes_error: str | None = None

    @property
    def empty(self) -> bool:
        return not (
            self.node_claims or self.node_classes or self.instances or self.network_interfaces
        )

    def describe(self) -> str:
        parts = [
            f"{label} {_listing(items)}"
            for label, items in (
                ("NodeClaims", self.node_claims),
                ("EC2NodeClasses", self.node_classes),
                ("instances", self.instances),
                ("ENIs", self.network_interfaces),
            )
            if items
        ]
        if self.kubernetes_error:
            parts.append(f"(Kubernetes API: {self.kubernetes_error})")
        return "; ".join(parts)


def _listing(items: list[str]) -> str:
    shown = ", ".join(sorted(items)[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def teardown_step(cluster: Cluster, force: bool) -> Leftovers:
    """One pass: ask Karpenter to let go, take over what it no longer accounts for, sweep ENIs."""
    leftovers = Leftovers()
    try:
        kubernetes = KubernetesApi(cluster)
        leftovers.node_claims, leftovers.node_classes = kubernetes.delete_node_pools_and_classes()
    except (OSError, ValueError, urllib.error.URLError) as error:
        # Unreachable API or a cluster that never came up: EC2 alone decides.
        leftovers.kubernetes_error = str(error)
        LOG.warning("Kubernetes API unavailable: %s", error)
    ec2 = boto3.client("ec2")
    leftovers.instances = karpenter_instances(ec2, cluster.name)
    # Karpenter accounts for an instance through its NodeClaim; without NodeClaims (or when
    # the drain has had its time) what is left is ours to terminate.
    karpenter_done = leftovers.kubernetes_error is None and not leftovers.node_claims
    if leftovers.instances and (karpenter_done or force):
        terminate(ec2, leftovers.instances)
        leftovers.instances = karpenter_instances(ec2, cluster.name)
    leftovers.network_interfaces = multus_network_interfaces(ec2, cluster.name)
    if not leftovers.instances:
        sweep(ec2, leftovers.network_interfaces)
        leftovers.network_interfaces = multus_network_interfaces(ec2, cluster.name)
    return leftovers


def karpenter_instances(ec2: Any, cluster_name: str) -> list[str]:
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{KARPENTER_CLUSTER_TAG_PREFIX}{cluster_name}", "Values": ["owned"]},
            {"Name": "tag-key", "Values": [NODEPOOL_TAG]},
            {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES},
        ]
    )
    return [
        instance["InstanceId"]
        for page in pages
        for reservation in page["Reservations"]
        for instance in reservation["Instances"]
    ]


def multus_network_interfaces(ec2: Any, cluster_name: str) -> list[str]:
    pages = ec2.get_paginator("describe_network_interfaces").paginate(
        Filters=[
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_name]},
            {"Name": "tag-key", "Values": [MULTUS_NETWORK_TAG]},
        ]
    )
    return [
        f"{eni['NetworkInterfaceId']} ({eni['Status']})"
        for page in pages
        for eni in page["NetworkInterfaces"]
    ]


def terminate(ec2: Any, instance_ids: list[str]) -> None:
    # One call per instance: EC2 refuses a whole batch when one member is protected.
    for instance_id in instance_ids:
        try:
            ec2.terminate_instances(InstanceIds=[instance_id])
            LOG.info("terminating %s", instance_id)
        except ClientError as error:
            LOG.warning("cannot terminate %s: %s", instance_id, error)


def sweep(ec2: Any, network_interfaces: list[str]) -> None:
    for described in network_interfaces:
        eni_id, status = described.split(" ", 1)
        if status != "(available)":
            continue
        try:
            ec2.delete_network_interface(NetworkInterfaceId=eni_id)
            LOG.info("deleted leaked Multus ENI %s", eni_id)
        except ClientError as error:
            LOG.warning("cannot delete %s: %s", eni_id, error)


class KubernetesApi:
    """The few Kubernetes calls the teardown needs, authenticated like `aws eks get-token`."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self._token = eks_token(cluster.name)
        self._context = (
            ssl.create_default_context(
                cadata=base64.b64decode(cluster.certificate_authority).decode()
            )
            if cluster.certificate_authority
            else None
        )

    def delete_node_pools_and_classes(self) -> tuple[list[str], list[str]]:
        """Deletes what is not yet being deleted; returns the NodeClaims and EC2NodeClasses left."""
        for collection in (NODEPOOLS, EC2NODECLASSES):
            for item in self._list(collection):
                if "deletionTimestamp" not in item["metadata"]:
                    LOG.info("deleting %s/%s", collection, item["metadata"]["name"])
                    self._request("DELETE", f"{collection}/{item['metadata']['name']}")
        return (
            [item["metadata"]["name"] for item in self._list(NODECLAIMS)],
            [item["metadata"]["name"] for item in self._list(EC2NODECLASSES)],
        )

    def _list(self, collection: str) -> list[dict[str, Any]]:
        body = self._request("GET", collection)
        return list(body.get("items", [])) if body else []

    def _request(self, method: str, path: str) -> dict[str, Any] | None:
        """JSON body of the answer; None when the object or its CRD is gone (404)."""
        request = urllib.request.Request(
            self._cluster.endpoint.rstrip("/") + path,
            method=method,
            headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(
                request, timeout=HTTP_TIMEOUT_SECONDS, context=self._context
            ) as response:
                return dict(json.loads(response.read() or b"{}"))
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise ValueError(f"{method} {path}: HTTP {error.code} {error.read()[:300]!r}") from None


def eks_token(cluster_name: str) -> str:
    """A bearer token for EKS: a presigned STS GetCallerIdentity URL naming the cluster."""
    session = boto3.session.Session()
    region = session.region_name or os.environ["AWS_REGION"]
    signer = RequestSigner(
        ServiceId("sts"), region, "sts", "v4", session.get_credentials(), session.events
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {"x-k8s-aws-id": cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=60,
        operation_name="",
    )
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def fail(event: dict[str, Any], reason: str) -> None:
    """Answers CloudFormation FAILED with `reason` through the request's presigned URL.

    The Provider framework's own timeout answer always says "Operation timed out" and an
    exception here would only be retried, so the teardown reports its leftovers itself; the
    framework's later timeout answer finds the resource already failed.
    """
    LOG.error(reason)
    body = json.dumps(
        {
            "Status": "FAILED",
            "Reason": reason[:MAX_REASON_CHARS],
            "PhysicalResourceId": event["PhysicalResourceId"],
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""}
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS):
            pass
    except OSError as error:
        LOG.error("could not report the failure: %s", error)
