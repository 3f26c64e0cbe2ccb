"""What EKS and the kubelet would have done before and beside the kubectl handler: the system
node group's nodes registered (as EKS registers a managed node group's nodes: the group's labels
and taints, Ready), and the kubelet's side of each pod bound to them (Running and Ready; gone
once marked for deletion), so that `helm upgrade --install --wait` of the Karpenter controller
sees its Deployment become available as on a real cluster. No container runs; the node
lifecycle controller's grace of an hour (cluster_box.control_plane.NODE_GRACE) keeps the nodes
Ready without heartbeats."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from testing_support.karpenter_box.kube_api import ApiError, KubeApi

POLL_SECONDS = 0.5
CAPACITY = {"cpu": "2", "memory": "4Gi", "pods": "29", "ephemeral-storage": "20Gi"}
# AWS::EKS::Nodegroup Taint effects in EKS's API spelling.
NODEGROUP_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


def system_nodes(template: Mapping[str, Any], zones: list[str]) -> list[dict[str, Any]]:
    """The Node objects of the template's managed node group at its desired size, one per
    zone in turn."""
    groups = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    ]
    nodes: list[dict[str, Any]] = []
    for group in groups:
        size = int(group.get("ScalingConfig", {}).get("DesiredSize", 1))
        taints = [
            {"key": t["Key"], "effect": NODEGROUP_EFFECTS[t["Effect"]]}
            | ({"value": t["Value"]} if "Value" in t else {})
            for t in group.get("Taints", [])
        ]
        for index in range(size):
            name = f"ip-10-0-{len(nodes)}-10.ec2.internal"
            zone = zones[index % len(zones)]
            labels = {
                **group.get("Labels", {}),
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "eks.amazonaws.com/nodegroup": "system",
                "node.kubernetes.io/instance-type": (group.get("InstanceTypes") or ["m5.large"])[0],
            }
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"taints": taints},
                }
            )
    return nodes


def register(api: KubeApi, node: Mapping[str, Any]) -> None:
    api.create("/api/v1/nodes", node)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    api.request(
        "PATCH",
        f"/api/v1/nodes/{node['metadata']['name']}/status",
        {"status": {"capacity": CAPACITY, "allocatable": CAPACITY, "conditions": [ready]}},
        "application/merge-patch+json",
    )


@dataclass
class PodPlayer:
    """The kubelet's part for every pod: Running and Ready once bound, gone once marked for
    deletion. Polls in a thread of its own until stopped."""

    api: KubeApi
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.step()
            except (ApiError, OSError) as error:
                self.errors.append(str(error))

    def step(self) -> None:
        for pod in self.api.items("/api/v1/pods"):
            metadata = pod["metadata"]
            path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
            if metadata.get("deletionTimestamp"):
                try:
                    self.api.request("DELETE", f"{path}?gracePeriodSeconds=0")
                except ApiError as error:
                    if error.status != 404:
                        raise
            elif pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") != "Running":
                now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                conditions = [
                    {"type": kind, "status": "True", "lastTransitionTime": now}
                    for kind in ("Initialized", "ContainersReady", "Ready", "PodScheduled")
                ]
                status = {"status": {"phase": "Running", "conditions": conditions}}
                try:
                    self.api.request(
                        "PATCH", f"{path}/status", status, "application/merge-patch+json"
                    )
                except ApiError as error:
                    if error.status != 404:
                        raise
