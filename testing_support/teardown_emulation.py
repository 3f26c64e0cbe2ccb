"""The Karpenter teardown handler against the EC2 emulator and the fake Kubernetes API.

A cluster as a destroy finds it: Karpenter nodes the bootstrap gave their Multus ENIs (attached
with DeleteOnTermination), one of them no NodeClaim accounts for any more (the teardown
terminates it through EC2), a VPC CNI ENI attached to a node, and what leaks outside
CloudFormation: an available Multus ENI whose node died before DeleteOnTermination was set and
an available VPC CNI ENI whose node went before the CNI could delete it. The handler's EC2
calls go through the emulator's proxy, signed with credentials of their own (the teardown
role's); the fake API server plays the Karpenter controller, which terminates its nodes when
their NodePool is deleted. The handler gets the resource properties of the synthesized
template, so the tag contract under test is the deployed one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials

from cdk_constructs.karpenter_teardown_handler import index as handler
from node_bootstrap import render_user_data
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from testing_support.fake_kubernetes import RESPONSE_PATH, FakeKubernetes, running_fake_kubernetes
from testing_support.multus_emulator import REGION, Ec2Emulator, EmulatedVpc, RecordedCall

TEARDOWN_CREDENTIALS = Credentials(
    access_key="ASIAKARPENTERTEARDOWN",
    secret_key="tEaRdOwNk/K7MDENG+bPxRfiCYTEARDOWNKEY0",
    token="IQoJb3JpZ2luX2VjTEARDOWN+session/token==",
)
NODE_POOL = "multus"
# A teardown that can finish does so within a few polls here (moto terminates at once).
MAX_POLLS = 4


@dataclass(frozen=True)
class TeardownRun:
    """What the handler did: its EC2 calls, whether it completed, what it answered."""

    calls: list[RecordedCall]
    complete: bool
    responses: list[dict[str, Any]]
    vpc_enis_before: set[str]
    vpc_enis_after: set[str]


def _tag_specs(resource: str, tags: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": resource, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


def vpc_enis(emulator: Ec2Emulator, vpc: EmulatedVpc) -> set[str]:
    enis = emulator.ec2.describe_network_interfaces(
        Filters=[{"Name": "vpc-id", "Values": [vpc.vpc_id]}]
    )["NetworkInterfaces"]
    return {eni["NetworkInterfaceId"] for eni in enis}


def karpenter_node(emulator: Ec2Emulator, vpc: EmulatedVpc, az: str, cluster: str) -> str:
    """An instance tagged as Karpenter tags its nodes, with its Multus ENIs from the bootstrap."""
    node = emulator.launch_instance(
        vpc,
        az,
        cluster,
        tags={f"kubernetes.io/cluster/{cluster}": "owned", "karpenter.sh/nodepool": NODE_POOL},
    )
    run = emulator.run_bootstrap(render_user_data(vpc.bootstrap_props(cluster)), node)
    assert run.returncode == 0, run.output
    return node


def vpc_cni_eni(
    emulator: Ec2Emulator, vpc: EmulatedVpc, az: str, cluster: str, attach_to: str | None = None
) -> str:
    """An ENI as the VPC CNI creates it (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go: tags and
    description); attached, as the CNI attaches it, with DeleteOnTermination."""
    instance = attach_to or "i-0vanished0node00"
    eni = emulator.ec2.create_network_interface(
        SubnetId=vpc.private_subnets[az],
        Description=f"aws-K8S-{instance}",
        TagSpecifications=_tag_specs(
            "network-interface",
            {
                "node.k8s.amazonaws.com/instance_id": instance,
                "node.k8s.amazonaws.com/createdAt": "2026-11-30T12:00:00Z",
                "cluster.k8s.amazonaws.com/name": cluster,
            },
        ),
    )["NetworkInterface"]["NetworkInterfaceId"]
    if attach_to:
        attachment = emulator.ec2.attach_network_interface(
            NetworkInterfaceId=eni, InstanceId=attach_to, DeviceIndex=len(vpc.networks) + 1
        )["AttachmentId"]
        # what the CNI's ModifyNetworkInterfaceAttribute sets right after attaching
        emulator.proxy.delete_on_termination.add(attachment)
    return str(eni)


def leaked_multus_eni(emulator: Ec2Emulator, vpc: EmulatedVpc, az: str, cluster: str) -> str:
    """A Multus ENI of a node that died before DeleteOnTermination was set: detached."""
    network = vpc.networks[0]
    return str(
        emulator.ec2.create_network_interface(
            SubnetId=vpc.multus_subnets[network, az],
            Groups=[vpc.security_group_ids[network]],
            TagSpecifications=_tag_specs(
                "network-interface", {CLUSTER_TAG_KEY: cluster, NETWORK_TAG_KEY: network}
            ),
        )["NetworkInterface"]["NetworkInterfaceId"]
    )


@contextmanager
def signed_as_the_teardown(emulator: Ec2Emulator) -> Iterator[None]:
    """boto3 clients of the default session go to the emulator's proxy, signed with the
    teardown role's credentials (the proxy refuses any other signature meanwhile)."""
    signer = emulator.proxy.signer
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ENDPOINT_URL_EC2": emulator.proxy.url,
            "AWS_ACCESS_KEY_ID": TEARDOWN_CREDENTIALS.access_key,
            "AWS_SECRET_ACCESS_KEY": TEARDOWN_CREDENTIALS.secret_key,
            "AWS_SESSION_TOKEN": TEARDOWN_CREDENTIALS.token,
            "AWS_DEFAULT_REGION": REGION,
        }.items():
            patch.setenv(name, value)
        patch.setattr(boto3, "DEFAULT_SESSION", None)
        emulator.proxy.signer = TEARDOWN_CREDENTIALS
        try:
            yield
        finally:
            emulator.proxy.signer = signer


def _play_karpenter(kubernetes: FakeKubernetes, emulator: Ec2Emulator, nodes: list[str]) -> None:
    kubernetes.add(handler.NODEPOOLS, NODE_POOL)
    kubernetes.add(handler.EC2NODECLASSES, NODE_POOL)
    for index, _ in enumerate(nodes):
        kubernetes.add(handler.NODECLAIMS, f"{NODE_POOL}-{index}")

    def controller(collection: str, _name: str) -> None:
        if collection == handler.NODEPOOLS:
            emulator.terminate_instances(nodes)
            kubernetes.objects[handler.NODECLAIMS].clear()

    kubernetes.on_delete = controller


def destroy_a_cluster(
    emulator: Ec2Emulator, vpc: EmulatedVpc, cluster: str, properties: Mapping[str, str]
) -> TeardownRun:
    """Builds the cluster described above in `vpc`, then polls the handler's delete (with the
    template's `properties`, pointed at the fake API) until it completes or MAX_POLLS pass."""
    nodes = [karpenter_node(emulator, vpc, az, cluster) for az in ("us-west-2a", "us-west-2b")]
    karpenter_node(emulator, vpc, "us-west-2a", cluster)  # no NodeClaim: EC2 terminates it
    vpc_cni_eni(emulator, vpc, "us-west-2a", cluster, attach_to=nodes[0])
    vpc_cni_eni(emulator, vpc, "us-west-2b", cluster)
    leaked_multus_eni(emulator, vpc, "us-west-2b", cluster)
    before = vpc_enis(emulator, vpc)
    with running_fake_kubernetes() as kubernetes, signed_as_the_teardown(emulator):
        _play_karpenter(kubernetes, emulator, nodes)
        event: dict[str, Any] = {
            "RequestType": "Delete",
            "StackId": f"arn:aws:cloudformation:{REGION}:123456789012:stack/cluster/1",
            "RequestId": "request-1",
            "LogicalResourceId": "Teardown",
            "PhysicalResourceId": f"{cluster}-karpenter-teardown",
            "ResponseURL": kubernetes.url + RESPONSE_PATH,
            "ResourceProperties": {
                **properties,
                "ClusterName": cluster,
                "ClusterEndpoint": kubernetes.url,
                "ClusterCertificateAuthority": "",
            },
        }
        event.update(handler.on_event(event))
        emulator.proxy.reset()
        complete = any(handler.is_complete(event)["IsComplete"] for _ in range(MAX_POLLS))
        calls = emulator.proxy.calls
        responses = list(kubernetes.responses)
    return TeardownRun(calls, complete, responses, before, vpc_enis(emulator, vpc))
