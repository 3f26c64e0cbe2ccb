"""Lambda handlers behind the KarpenterTeardown custom resource (custom_resources.Provider).

Karpenter's instances, the Multus ENIs of the node bootstrap and the ENIs the VPC CNI leaks are
not CloudFormation resources, so nothing else removes them before the cluster and network go.
This resource is deleted first (it depends on the Karpenter controller, the node role's access
entry and the in-cluster charts), and on delete:

1. deletes every NodePool and EC2NodeClass through the Kubernetes API, so the still running
   controller drains and terminates its nodes (bounded by the NodePool's
   terminationGracePeriod) and removes the instance profiles it created;
2. terminates through EC2 any instance tagged for this cluster by Karpenter that no NodeClaim
   accounts for any more (Karpenter gone, or the drain past its time);
3. once no such instance is left, deletes the available ENIs the node bootstrap tagged for this
   cluster (those whose node died before DeleteOnTermination was set) and the available ENIs
   the VPC CNI tagged for it (detached but never deleted, e.g. when their node went first);
4. completes when no NodeClaim, EC2NodeClass, tagged instance or tagged ENI remains, and fails
   listing what is left once the configured bound has passed.

Errors: the Provider framework answers FAILED to CloudFormation for every exception isComplete
raises; only its own Retry, which it raises when isComplete answers IsComplete false, means
"poll again" (aws-cdk-lib custom-resources/lib/provider-framework/runtime/framework.ts and
cfn-response.ts, safeHandler). So a throttled, 5xx, refused or timed-out EC2 call is logged and
answered "not complete"; so is a Kubernetes API that does not answer, until ForceAfter, when EC2
alone decides. An error no later poll can change (access denied, a request EC2 calls invalid) is
raised and fails the delete at once. A refusal about one resource (a termination-protected
instance, an ENI in use) leaves that resource listed until the bound.

Create and Update do nothing; the physical ID never changes, so updates never tear down.

Resource properties: ClusterName, ClusterEndpoint, ClusterCertificateAuthority (base64 PEM),
TimeoutMinutes, ForceAfterMinutes (when EC2 termination stops waiting for Karpenter), and the
tag contract of what it removes (TagKeys): KarpenterClusterTagKey, NodePoolTagKey,
MultusClusterTagKey, MultusNetworkTagKey, VpcCniClusterTagKey, VpcCniInstanceTagKey,
VpcCniDescriptionPrefix.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.model import ServiceId
from botocore.signers import RequestSigner

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
EC2NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
# A custom resource response may hold 4 KB: list this many IDs per kind at most.
MAX_LISTED = 20
MAX_REASON_CHARS = 2000
HTTP_TIMEOUT_SECONDS = 10
# A poll must end well inside the function's 2 minutes (a Lambda timeout is an error, which the
# framework answers FAILED): short connect/read timeouts, few attempts, and a poll stops at the
# first call that fails transiently; the next poll is 30 s on.
EC2_CONFIG = Config(
    connect_timeout=5, read_timeout=10, retries={"mode": "standard", "total_max_attempts": 3}
)
# EC2's answer to a throttled request (EC2 API reference, "Error codes for the Amazon EC2 API").
EC2_THROTTLING_CODE = "RequestLimitExceeded"
# Refusals of a call about one resource that no later poll can change: the role may not make
# it, or EC2 calls the request itself wrong (EC2 API reference, "Common client error codes").
PERMANENT_CODES = frozenset(
    {
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidParameter",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "MissingParameter",
        "UnknownParameter",
    }
)
# Errors of a call that never got EC2's answer: refused or dropped connections, timeouts.
UNANSWERED = (BotocoreConnectionError, HTTPClientError)


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
        Cluster(
            props["ClusterName"], props["ClusterEndpoint"], props["ClusterCertificateAuthority"]
        ),
        TagKeys.of(props),
        force=time.time() >= float(data["ForceAfter"]),
        ec2=boto3.client("ec2", config=EC2_CONFIG),
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


@dataclass(frozen=True)
class TagKeys:
    """The tags that mark what the teardown may remove, as the construct passes them."""

    karpenter_cluster: str  # kubernetes.io/cluster/<name>=owned on Karpenter's instances
    node_pool: str  # on every instance Karpenter launches
    multus_cluster: str  # value: the cluster name, on the node bootstrap's Multus ENIs
    multus_network: str  # on the Multus ENIs only
    vpc_cni_cluster: str  # value: the cluster name, on the VPC CNI's ENIs
    vpc_cni_instance: str  # on every ENI the VPC CNI creates
    vpc_cni_description_prefix: str

    @classmethod
    def of(cls, props: dict[str, Any]) -> TagKeys:
        return cls(
            karpenter_cluster=props["KarpenterClusterTagKey"],
            node_pool=props["NodePoolTagKey"],
            multus_cluster=props["MultusClusterTagKey"],
            multus_network=props["MultusNetworkTagKey"],
            vpc_cni_cluster=props["VpcCniClusterTagKey"],
            vpc_cni_instance=props["VpcCniInstanceTagKey"],
            vpc_cni_description_prefix=props["VpcCniDescriptionPrefix"],
        )


@dataclass
class Leftovers:
    """What still exists, and what could not be asked this poll (`forced`: past ForceAfter)."""

    forced: bool
    node_claims: list[str] = field(default_factory=list)
    node_classes: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)
    network_interfaces: list[str] = field(default_factory=list)
    vpc_cni_network_interfaces: list[str] = field(default_factory=list)
    # The Kubernetes API did not answer: unknown until `forced`, then EC2 alone decides.
    kubernetes_error: str | None = None
    # An EC2 call failed transiently: this poll saw only part of what is left.
    ec2_error: str | None = None

    @property
    def empty(self) -> bool:
        unknown = self.ec2_error or (self.kubernetes_error and not self.forced)
        return not (
            unknown
            or self.node_claims
            or self.node_classes
            or self.instances
            or self.network_interfaces
            or self.vpc_cni_network_interfaces
        )

    def describe(self) -> str:
        parts = [
            f"{label} {_listing(items)}"
            for label, items in (
                ("NodeClaims", self.node_claims),
                ("EC2NodeClasses", self.node_classes),
                ("instances", self.instances),
                ("ENIs", self.network_interfaces),
                ("VPC CNI ENIs", self.vpc_cni_network_interfaces),
            )
            if items
        ]
        if self.kubernetes_error:
            parts.append(f"(Kubernetes API: {self.kubernetes_error})")
        if self.ec2_error:
            parts.append(f"(EC2, polling again: {self.ec2_error})")
        return "; ".join(parts)


def _listing(items: list[str]) -> str:
    shown = ", ".join(sorted(items)[:MAX_LISTED])
    more = len(items) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


def is_transient(error: Exception) -> bool:
    """Throttling, a server error (5xx), or no answer at all: the same call may succeed later."""
    if isinstance(error, ClientError):
        code = error.response["Error"]["Code"]
        status: int = error.response["ResponseMetadata"]["HTTPStatusCode"]
        return code == EC2_THROTTLING_CODE or status >= 500
    return isinstance(error, UNANSWERED)


def is_permanent(error: ClientError) -> bool:
    return error.response["Error"]["Code"] in PERMANENT_CODES


def teardown_step(cluster: Cluster, tags: TagKeys, force: bool, ec2: Any) -> Leftovers:
    """One pass: ask Karpenter to let go, take over what it no longer accounts for, sweep ENIs."""
    leftovers = Leftovers(forced=force)
    try:
        kubernetes = KubernetesApi(cluster)
        leftovers.node_claims, leftovers.node_classes = kubernetes.delete_node_pools_and_classes()
    except (OSError, ValueError, urllib.error.URLError) as error:
        # Unreachable or refusing API: poll again; once forced, EC2 alone decides.
        leftovers.kubernetes_error = str(error)
        LOG.warning("Kubernetes API unavailable: %s", error)
    try:
        _ec2_step(ec2, cluster.name, tags, leftovers)
    except (ClientError, *UNANSWERED) as error:
        if not is_transient(error):
            raise
        leftovers.ec2_error = str(error)
        LOG.warning("EC2 did not answer, polling again: %s", error)
    return leftovers


def _ec2_step(ec2: Any, cluster_name: str, tags: TagKeys, leftovers: Leftovers) -> None:
    leftovers.instances = karpenter_instances(ec2, tags)
    # Karpenter accounts for an instance through its NodeClaim; without NodeClaims (or when
    # the drain has had its time) what is left is ours to terminate.
    karpenter_done = leftovers.kubernetes_error is None and not leftovers.node_claims
    if leftovers.instances and (karpenter_done or leftovers.forced):
        terminate(ec2, leftovers.instances)
        leftovers.instances = karpenter_instances(ec2, tags)
    leftovers.network_interfaces = multus_network_interfaces(ec2, cluster_name, tags)
    leftovers.vpc_cni_network_interfaces = vpc_cni_network_interfaces(ec2, cluster_name, tags)
    if not leftovers.instances:
        # Only once no instance of ours is left: until then an ENI may be on its way to one.
        sweep(ec2, [*leftovers.network_interfaces, *leftovers.vpc_cni_network_interfaces])
        leftovers.network_interfaces = multus_network_interfaces(ec2, cluster_name, tags)
        leftovers.vpc_cni_network_interfaces = vpc_cni_network_interfaces(ec2, cluster_name, tags)


def karpenter_instances(ec2: Any, tags: TagKeys) -> list[str]:
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{tags.karpenter_cluster}", "Values": ["owned"]},
            {"Name": "tag-key", "Values": [tags.node_pool]},
            {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES},
        ]
    )
    return [
        instance["InstanceId"]
        for page in pages
        for reservation in page["Reservations"]
        for instance in reservation["Instances"]
    ]


def multus_network_interfaces(ec2: Any, cluster_name: str, tags: TagKeys) -> list[str]:
    """Every Multus ENI of the cluster, attached or not: an attached one outlives the sweep
    only while its instance lives."""
    return _network_interfaces(
        ec2,
        [
            {"Name": f"tag:{tags.multus_cluster}", "Values": [cluster_name]},
            {"Name": "tag-key", "Values": [tags.multus_network]},
        ],
    )


def vpc_cni_network_interfaces(ec2: Any, cluster_name: str, tags: TagKeys) -> list[str]:
    """The VPC CNI's available ENIs of the cluster, found as its own leaked-ENI cleanup finds
    them (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go, getLeakedENIs): its instance tag, its
    cluster tag and its description. Attached ones belong to live nodes and go with them."""
    return _network_interfaces(
        ec2,
        [
            {"Name": f"tag:{tags.vpc_cni_cluster}", "Values": [cluster_name]},
            {"Name": "tag-key", "Values": [tags.vpc_cni_instance]},
            {"Name": "description", "Values": [f"{tags.vpc_cni_description_prefix}*"]},
            {"Name": "status", "Values": ["available"]},
        ],
    )


def _network_interfaces(ec2: Any, filters: list[dict[str, Any]]) -> list[str]:
    pages = ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters)
    return [
        f"{eni['NetworkInterfaceId']} ({eni['Status']})"
        for page in pages
        for eni in page["NetworkInterfaces"]
    ]


def terminate(ec2: Any, instance_ids: list[str]) -> None:
    # One call per instance: EC2 refuses a whole batch when one member is protected.
    for instance_id in instance_ids:
        _per_resource(
            f"terminate {instance_id}", partial(ec2.terminate_instances, InstanceIds=[instance_id])
        )


def sweep(ec2: Any, network_interfaces: list[str]) -> None:
    for described in network_interfaces:
        eni_id, status = described.split(" ", 1)
        if status == "(available)":
            _per_resource(
                f"delete leaked ENI {eni_id}",
                partial(ec2.delete_network_interface, NetworkInterfaceId=eni_id),
            )


def _per_resource(what: str, call: Callable[[], object]) -> None:
    """One call about one resource: a refusal about that resource leaves it listed for the next
    poll; a transient error ends this poll, a permanent one fails the delete (both raised)."""
    try:
        call()
        LOG.info("%s: done", what)
    except (ClientError, *UNANSWERED) as error:
        if is_transient(error) or (isinstance(error, ClientError) and is_permanent(error)):
            raise
        LOG.warning("cannot %s: %s", what, error)


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

    Raising would fail the delete too (the framework answers FAILED for any exception), but
    with the whole stack trace as the reason, uncut, where CloudFormation takes a response of
    at most 4096 bytes; the framework's own timeout answer only says "Operation timed out".
    So the teardown reports its leftovers itself; the framework's later answers find the
    resource already failed.
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
