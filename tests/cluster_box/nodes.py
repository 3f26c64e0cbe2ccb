"""Playing the parts nothing in the box runs: the kubelet that registers a Node (with the
labels and taints Karpenter gives it through the kubelet's flags) and reports it Ready, and the
kubelet's side of a pod's life (Running and Ready once bound; gone once the API server marked it
for deletion). The node lifecycle controller leaves such Nodes Ready for an hour
(control_plane.NODE_GRACE), so no heartbeat is sent."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.objects import delete_objects
from tests.cluster_box.objects import manifests_in_order
from tests.helpers import pool_nodes

CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "20Gi"}
WAIT_SECONDS = 60.0


def register_node(
    plane: ControlPlane,
    name: str,
    labels: dict[str, str],
    taints: list[dict[str, Any]],
    *,
    capacity: Mapping[str, str] = CAPACITY,
    allocatable: Mapping[str, str] | None = None,
) -> None:
    """The Node as the kubelet registers it, Ready, reporting `capacity` and `allocatable`
    (default: all of the capacity)."""
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**labels, "kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64"},
        },
        "spec": {"taints": taints},
    }
    plane.kubectl("create", "-f", "-", stdin=json.dumps(node))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "status": {
            "capacity": dict(capacity),
            "allocatable": dict(capacity if allocatable is None else allocatable),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }
    plane.kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
    )


# The labels Karpenter puts on every node it launches, besides the pool's (kubernetes-sigs/karpenter
# pkg/apis/v1/labels.go: WellKnownLabels, set from the instance type it chose).
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "m6i.2xlarge"
# EKS managed node groups take taint effects in their API's spelling (AWS::EKS::Nodegroup Taint).
NODEGROUP_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def karpenter_node(
    node_pool: dict[str, Any], zone: str
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The labels and taints a node Karpenter launches for the pool in `zone` registers with:
    the pool's template labels and taints, its startup taints, and for each requirement with
    the In operator the first value (what the chosen instance satisfies)."""
    labels, taints = pool_nodes(node_pool)
    for requirement in node_pool["spec"]["template"]["spec"].get("requirements", []):
        if requirement["operator"] == "In" and requirement.get("values"):
            labels.setdefault(requirement["key"], requirement["values"][0])
    labels.update(
        {
            ZONE_LABEL: zone,
            "node.kubernetes.io/instance-type": INSTANCE_TYPE,
            "karpenter.sh/registered": "true",
        }
    )
    return labels, taints


def system_node(template: dict[str, Any], zone: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """A node of the template's (one) EKS managed node group, as EKS registers it."""
    (group,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    ]
    labels = {"kubernetes.io/os": "linux", ZONE_LABEL: zone, **group.get("Labels", {})}
    taints = [
        {"key": t["Key"], "value": t.get("Value", ""), "effect": NODEGROUP_EFFECTS[t["Effect"]]}
        for t in group.get("Taints", [])
    ]
    return labels, taints


def remove_taint(plane: ControlPlane, node: str, key: str) -> None:
    """What the startup-taint remover does once the node is ready (without its checks)."""
    current = json.loads(plane.kubectl("get", "node", node, "-o", "json"))
    taints = [t for t in current["spec"].get("taints", []) if t["key"] != key]
    plane.kubectl(
        "patch", "node", node, "--type=merge", "-p", json.dumps({"spec": {"taints": taints}})
    )


def delete_app(plane: ControlPlane, template: dict[str, Any], nodes: list[str]) -> None:
    """The app's objects gone but its CRDs and Namespaces, and its nodes: the box is ready for
    another app."""
    for node in nodes:
        plane.kubectl("delete", "node", node, "--wait=false", "--ignore-not-found")
    for objects in reversed(manifests_in_order(template)):
        delete_objects(plane, objects)


def pods(plane: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(plane.kubectl("get", "pods", "-A", "-o", "json"))[
        "items"
    ]
    return items


def owner(pod: dict[str, Any]) -> str:
    """The name of the DaemonSet or Deployment that owns the pod (a Deployment's pods belong
    to its ReplicaSet, named <deployment>-<pod template hash>)."""
    references = pod["metadata"].get("ownerReferences", [])
    if not references:
        return ""
    name = str(references[0]["name"])
    return name.rsplit("-", 1)[0] if references[0]["kind"] == "ReplicaSet" else name


def bound(plane: ControlPlane) -> dict[str, set[str]]:
    """Node -> the owners of the pods the scheduler bound there."""
    found: dict[str, set[str]] = {}
    for pod in pods(plane):
        node = pod["spec"].get("nodeName")
        if node:
            found.setdefault(node, set()).add(owner(pod))
    return found


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_SECONDS) -> bool:
    """Whether `condition` held within `timeout` seconds (polled every half second)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def run_bound_pods(plane: ControlPlane) -> None:
    """The kubelet's part: every bound pod Running and Ready, every pod marked for deletion
    gone (as the kubelet deletes it once its containers stopped)."""
    for pod in pods(plane):
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp"):
            plane.kubectl(
                "delete", "pod", "-n", namespace, name, "--grace-period=0", "--force", check=False
            )
        elif pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") != "Running":
            ready = {"type": "Ready", "status": "True"}
            status = {"status": {"phase": "Running", "conditions": [ready]}}
            plane.kubectl(
                "patch",
                "pod",
                "-n",
                namespace,
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                json.dumps(status),
                check=False,
            )
