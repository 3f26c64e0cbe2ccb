"""What the Karpenter box's tests do with a pool: a pending pod of its kind, and what Karpenter
launched for it, read back from the cluster and from the emulator as AWS would show it."""

from __future__ import annotations

import base64
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from config.node_labels import network_label
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import instance_id, wait_for

NODEPOOL_LABEL = "karpenter.sh/nodepool"
LAUNCH_SECONDS = 150.0


def node_pools(box: KarpenterBox) -> dict[str, dict[str, Any]]:
    return {
        o["metadata"]["name"]: o
        for _, objects in box.world.manifests()
        for o in objects
        if o["kind"] == "NodePool"
    }


def pool_networks(node_pool: dict[str, Any]) -> list[str]:
    """The networks a pool's nodes attach, from the labels its template gives them."""
    prefix = network_label("")
    labels = node_pool["spec"]["template"].get("metadata", {}).get("labels", {})
    return [key.removeprefix(prefix) for key in labels if key.startswith(prefix)]


def pool_pod(
    name: str, node_pool: dict[str, Any], cpu: str = "1", memory: str = "1Gi"
) -> dict[str, Any]:
    """A pod of the pool's kind: it selects the pool's networks (as the NADs' users do),
    tolerates the pool's taints and asks for `cpu` and `memory`."""
    spec = node_pool["spec"]["template"]["spec"]
    tolerations = [
        {"key": t["key"], "operator": "Exists", "effect": t["effect"]}
        for t in spec.get("taints", [])
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {
                NODEPOOL_LABEL: node_pool["metadata"]["name"],
                **{network_label(n): "true" for n in pool_networks(node_pool)},
            },
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "nf",
                    "image": "public.ecr.aws/docker/library/busybox:1.37.0",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


@dataclass(frozen=True)
class Launch:
    """A NodeClaim Karpenter launched, its instance and its launch template, from the emulator."""

    claim: dict[str, Any]
    instance: dict[str, Any]
    launch_template: dict[str, Any]
    fleet_request: dict[str, str]

    @property
    def user_data(self) -> str:
        return base64.b64decode(self.launch_template["UserData"]).decode()


def deployment(name: str, node_pool: dict[str, Any]) -> dict[str, Any]:
    """One replica of a pod of the pool's kind, behind a Deployment (the real controllers
    recreate it when Karpenter drains its node)."""
    pod = pool_pod(name, node_pool)
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod["spec"]},
        },
    }


def launched_names(box: KarpenterBox, pool: str) -> set[str]:
    return {c["metadata"]["name"] for c in claims(box, pool) if c.get("status", {}).get("nodeName")}


def registered_claims(box: KarpenterBox, pool: str) -> set[str]:
    """The names of the pool's NodeClaims whose node registered, once there is one."""
    names: set[str] = wait_for(
        lambda: launched_names(box, pool),
        LAUNCH_SECONDS,
        f"a registered NodeClaim of pool {pool}",
        lambda: claims(box, pool),
    )
    return names


def create_pod(box: KarpenterBox, pod: dict[str, Any]) -> None:
    box.api.create(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", pod)


def get_pod(box: KarpenterBox, name: str, namespace: str = "default") -> dict[str, Any]:
    return dict(box.api.get(f"/api/v1/namespaces/{namespace}/pods/{name}"))


def delete_pod(box: KarpenterBox, name: str, namespace: str = "default") -> None:
    box.api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}")


def claims(box: KarpenterBox, pool: str) -> list[dict[str, Any]]:
    return [
        claim
        for claim in box.api.items("/apis/karpenter.sh/v1/nodeclaims")
        if claim["metadata"].get("labels", {}).get(NODEPOOL_LABEL) == pool
    ]


def launched(box: KarpenterBox, pool: str, known: AbstractSet[str] = frozenset()) -> Launch:
    """The first NodeClaim of `pool` not in `known` whose instance EC2 runs."""

    def found() -> dict[str, Any] | None:
        for claim in claims(box, pool):
            if claim["metadata"]["name"] not in known and claim.get("status", {}).get("providerID"):
                return claim
        return None

    claim = wait_for(
        found,
        LAUNCH_SECONDS,
        f"a launched NodeClaim of pool {pool}",
        lambda: [c["metadata"]["name"] for c in claims(box, pool)] or box.controller_log()[-2000:],
    )
    ec2 = box.emulator.ec2
    (reservation,) = ec2.describe_instances(
        InstanceIds=[instance_id(claim["status"]["providerID"])]
    )["Reservations"]
    instance = reservation["Instances"][0]
    fleets = [
        c.params for c in box.emulator.proxy.calls if c.action == "CreateFleet" and c.status == 200
    ]
    (request,) = [
        params
        for params in fleets
        if instance["InstanceType"] in {v for k, v in params.items() if k.endswith("InstanceType")}
        and "DryRun" not in params
    ][-1:]
    name = request["LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"]
    (version,) = ec2.describe_launch_template_versions(LaunchTemplateName=name)[
        "LaunchTemplateVersions"
    ]
    return Launch(claim, instance, version["LaunchTemplateData"], request)


def node_of(box: KarpenterBox, claim: dict[str, Any]) -> dict[str, Any] | None:
    for node in box.api.items("/api/v1/nodes"):
        if node["spec"].get("providerID") == claim["status"]["providerID"]:
            return dict(node)
    return None


def taint_keys(node: dict[str, Any]) -> list[str]:
    return [t["key"] for t in node["spec"].get("taints", [])]


def settle(seconds: float) -> None:
    """A pause in which something must NOT happen (what the test then checks is unchanged)."""
    time.sleep(seconds)


def cordon(box: KarpenterBox, nodes: AbstractSet[str], unschedulable: bool = True) -> None:
    """Cordoned, a node gets node.kubernetes.io/unschedulable (the node lifecycle controller),
    which no pool pod tolerates: neither the scheduler nor Karpenter's simulation places a pod
    there, so the next pending pod gets a node of its own."""
    for node in nodes:
        box.api.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": unschedulable}})


def node_names(box: KarpenterBox) -> set[str]:
    return {node["metadata"]["name"] for node in box.api.items("/api/v1/nodes")}
