"""Playing the parts nothing in the box runs: the kubelet that registers a Node (with the
labels and taints Karpenter gives it through the kubelet's flags) and reports it Ready, and the
kubelet's side of a pod's life (Running and Ready once bound; gone once the API server marked it
for deletion). The node lifecycle controller leaves such Nodes Ready for an hour
(control_plane.NODE_GRACE), so no heartbeat is sent."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from typing import Any

from testing_support.cluster_box.control_plane import ControlPlane

CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "20Gi"}
WAIT_SECONDS = 60.0


def register_node(
    plane: ControlPlane, name: str, labels: dict[str, str], taints: list[dict[str, Any]]
) -> None:
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
            "capacity": CAPACITY,
            "allocatable": CAPACITY,
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


def pods(plane: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(plane.kubectl("get", "pods", "-A", "-o", "json"))[
        "items"
    ]
    return items


def owner(pod: dict[str, Any]) -> str:
    """The name of the DaemonSet (or other controller) that owns the pod."""
    references = pod["metadata"].get("ownerReferences", [])
    return str(references[0]["name"]) if references else ""


def bound(plane: ControlPlane) -> dict[str, set[str]]:
    """Node -> the owners of the pods the scheduler bound there."""
    found: dict[str, set[str]] = {}
    for pod in pods(plane):
        node = pod["spec"].get("nodeName")
        if node:
            found.setdefault(node, set()).add(owner(pod))
    return found


def wait_until(condition: Callable[[], bool]) -> bool:
    """Whether `condition` held within WAIT_SECONDS (polled every half second)."""
    deadline = time.monotonic() + WAIT_SECONDS
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
