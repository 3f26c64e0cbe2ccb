"""The launch, with the real Karpenter: a pending pod of each pool's kind makes Karpenter create a
NodeClaim and a CreateFleet whose launch template has the AMI the pool's alias resolves to, a
node subnet (never a Multus subnet), the pool's security groups, the node role's instance
profile, IMDSv2 with hop limit 1, an instance type inside the pool's requirements with enough
ENIs for its networks, and our user data with Karpenter's NodeConfig after it; the node
registers, our startup-taint remover's own script clears the startup taint, the pod binds."""

from __future__ import annotations

import email
from typing import Any

import pytest

from config.instance_types import category
from config.node_labels import MULTUS_NOT_READY_TAINT
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import wait_for
from tests.karpenter_box.pools import (
    create_pod,
    delete_pod,
    get_pod,
    launched,
    node_of,
    node_pools,
    pool_networks,
    pool_pod,
    taint_keys,
)

pytestmark = pytest.mark.karpenter_box

BOXES = ("default_box", "five_g_core_box")
BIND_SECONDS = 90.0


def requirement_values(node_pool: dict[str, Any], key: str) -> set[str] | None:
    for requirement in node_pool["spec"]["template"]["spec"]["requirements"]:
        if requirement["key"] == key and requirement["operator"] == "In":
            return set(requirement["values"])
    return None


def mime_parts(user_data: str) -> list[tuple[str, str]]:
    message = email.message_from_string(user_data)
    return [
        (part.get_content_type(), bytes(part.get_payload(decode=True)).decode())
        for part in message.walk()
        if not part.is_multipart()
    ]


@pytest.mark.parametrize("box_fixture", BOXES)
def test_launch_of_each_pool(box_fixture: str, request: pytest.FixtureRequest) -> None:
    box: KarpenterBox = request.getfixturevalue(box_fixture)
    for pool_name, node_pool in node_pools(box).items():
        pod = pool_pod(f"launch-{pool_name}", node_pool)
        create_pod(box, pod)
        try:
            check_launch(box, pool_name, node_pool, pod["metadata"]["name"])
        finally:
            delete_pod(box, pod["metadata"]["name"])


def node_role_name(box: KarpenterBox) -> str:
    (role,) = box.world.app.logical_ids("AWS::IAM::Role", "KarpenterNodeRole")
    return box.world.ids[role]


def check_launch(box: KarpenterBox, pool_name: str, node_pool: dict[str, Any], pod: str) -> None:
    vpc = box.world.vpc.vpc
    launch = launched(box, pool_name)
    instance, template = launch.instance, launch.launch_template
    # The AMI the alias resolves to, for the instance's architecture.
    assert instance["ImageId"] in box.world.images.values()
    assert template["ImageId"] == instance["ImageId"]
    # A node subnet, never a Multus subnet.
    assert instance["SubnetId"] in vpc.private_subnets.values()
    assert instance["SubnetId"] not in vpc.multus_subnets.values()
    # IMDSv2, one hop: no pod reaches the node role through IMDS over eth0.
    metadata = template["MetadataOptions"]
    assert metadata["HttpTokens"] == "required"
    assert metadata["HttpPutResponseHopLimit"] == 1
    # The node role's instance profile (Karpenter creates it for spec.role).
    iam = box.emulator.moto_client("iam")
    profiles = iam.list_instance_profiles_for_role(RoleName=node_role_name(box))
    names = {p["InstanceProfileName"] for p in profiles["InstanceProfiles"]}
    assert template["IamInstanceProfile"]["Name"] in names
    # Inside the pool's requirements, with an ENI for each network besides the primary.
    family = instance["InstanceType"].split(".")[0]
    families = requirement_values(node_pool, "karpenter.k8s.aws/instance-family")
    assert families is None or family in families
    categories = requirement_values(node_pool, "karpenter.k8s.aws/instance-category")
    assert categories is None or category(family) in categories
    (described,) = box.emulator.ec2.describe_instance_types(
        InstanceTypes=[instance["InstanceType"]]
    )["InstanceTypes"]
    assert described["NetworkInfo"]["MaximumNetworkInterfaces"] >= 1 + len(pool_networks(node_pool))
    # Our parts first, Karpenter's NodeConfig after them (its merge, AL2023).
    parts = mime_parts(launch.user_data)
    kinds = [kind for kind, _ in parts]
    assert kinds[0] == "text/x-shellscript" and "MULTUS_NETWORKS" in parts[0][1]
    assert kinds[-1] == "application/node.eks.aws"
    assert "kind: NodeConfig" in parts[-1][1]
    # The node registers with the startup taint, which the remover's own script clears.
    startup = [t["key"] for t in launch.claim["spec"].get("startupTaints", [])]
    assert startup == [MULTUS_NOT_READY_TAINT.key]

    def node() -> dict[str, Any] | None:
        return node_of(box, launch.claim)

    registered = wait_for(node, BIND_SECONDS, "the instance's Node", lambda: box.kubelet.errors)
    name = registered["metadata"]["name"]
    wait_for(
        lambda: MULTUS_NOT_READY_TAINT.key not in taint_keys(node() or registered),
        BIND_SECONDS,
        f"the startup taint removed from {name}",
        lambda: [c.output()[-500:] for c in box.kubelet.containers.values()],
    )
    bound = wait_for(
        lambda: get_pod(box, pod)["spec"].get("nodeName"),
        BIND_SECONDS,
        f"pod {pod} bound",
        lambda: get_pod(box, pod).get("status"),
    )
    assert bound == name
