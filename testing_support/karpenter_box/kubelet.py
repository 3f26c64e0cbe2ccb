"""The parts of a node that nothing in the Karpenter box runs: EC2's instance and the kubelet on it.

For each NodeClaim that Karpenter launched (status.providerID set), once EC2 (the emulator)
reports its instance running, the player registers the Node as the kubelet does on an EKS
node: named by the instance's private DNS name, with the providerID, the labels and taints the
NodeClaim carries (Karpenter passes them to the kubelet through the user data's NodeConfig: its
labels, its taints and startup taints), the capacity and allocatable that `capacity_of` gives,
Ready, with its lease in kube-node-lease. It plays the kubelet's side of each pod bound to such
a node: Running and Ready, and gone once the API server marked it for deletion (what the
kubelet reports after the container stopped).

What it does not model, and why: no container runs (there is no container runtime here: the
startup-taint remover's own script runs as a process by the tests that need it), no heartbeat
is sent (the box's node lifecycle controller waits an hour: cluster_box.control_plane.NODE_GRACE),
and the instance's boot is not run (the node box boots the same user data under QEMU).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from testing_support.karpenter_box.kube_api import ApiError, KubeApi

POLL_SECONDS = 0.5
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
#: What a node reports as capacity and allocatable: (claim, instance) -> (capacity, allocatable).
CapacityOf = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[dict[str, str], dict[str, str]]]


def claimed_capacity(
    claim: Mapping[str, Any], _instance: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """What Karpenter computed for the claim's instance type (status.capacity, allocatable)."""
    status = claim.get("status", {})
    return dict(status.get("capacity", {})), dict(status.get("allocatable", {}))


def instance_id(provider_id: str) -> str:
    """i-... of aws:///<zone>/i-... (the providerID the AWS cloud provider sets)."""
    return provider_id.rsplit("/", 1)[-1]


@dataclass
class KubeletPlayer:
    """Registers the Nodes of launched NodeClaims and runs their pods' status, in a thread."""

    api: KubeApi
    ec2: Any
    capacity_of: CapacityOf = claimed_capacity
    #: NodeClaim names whose node is never registered (a test's stuck or slow instance).
    withheld: set[str] = field(default_factory=set)
    #: Node names registered, in order.
    registered: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> KubeletPlayer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except (ApiError, OSError) as error:  # the box stopping, a conflict: next round
                self.errors.append(str(error))
            self._stop.wait(POLL_SECONDS)

    def sync(self) -> None:
        nodes = {n["metadata"]["name"]: n for n in self.api.items("/api/v1/nodes")}
        by_provider = {n["spec"].get("providerID"): n for n in nodes.values()}
        for claim in self.api.items(NODECLAIMS):
            provider_id = claim.get("status", {}).get("providerID")
            if (
                not provider_id
                or provider_id in by_provider
                or claim["metadata"]["name"] in self.withheld
                or claim["metadata"].get("deletionTimestamp")
            ):
                continue
            instance = self._instance(instance_id(provider_id))
            if instance is not None and instance["State"]["Name"] == "running":
                self._register(claim, instance, provider_id)
        self._play_pods(set(nodes))

    def _instance(self, identifier: str) -> dict[str, Any] | None:
        reservations = self.ec2.describe_instances(InstanceIds=[identifier])["Reservations"]
        instances = [i for r in reservations for i in r["Instances"]]
        return instances[0] if instances else None

    def _register(
        self, claim: Mapping[str, Any], instance: Mapping[str, Any], provider_id: str
    ) -> None:
        name = str(instance["PrivateDnsName"])
        spec = claim["spec"]
        labels = {
            **claim["metadata"].get("labels", {}),
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        taints = [*spec.get("taints", []), *spec.get("startupTaints", [])]
        self.api.create(
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {"providerID": provider_id, "taints": taints},
            },
        )
        capacity, allocatable = self.capacity_of(claim, instance)
        now = _now()
        self.api.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {
                "status": {
                    "capacity": capacity,
                    "allocatable": allocatable,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                    "addresses": [
                        {"type": "InternalIP", "address": instance["PrivateIpAddress"]},
                        {"type": "Hostname", "address": name},
                    ],
                    "nodeInfo": _node_info(instance),
                }
            },
            "application/merge-patch+json",
        )
        self.api.create(
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _micro()},
            },
        )
        self.registered.append(name)

    def _play_pods(self, node_names: set[str]) -> None:
        for pod in self.api.items("/api/v1/pods"):
            node = pod["spec"].get("nodeName")
            if node not in node_names:
                continue
            path = (
                f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
            )
            if pod["metadata"].get("deletionTimestamp"):
                self.api.request("DELETE", path, {"gracePeriodSeconds": 0})
            elif pod.get("status", {}).get("phase", "Pending") == "Pending":
                now = _now()
                conditions = [
                    {"type": kind, "status": "True", "lastTransitionTime": now}
                    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ]
                self.api.request(
                    "PATCH",
                    f"{path}/status",
                    {"status": {"phase": "Running", "conditions": conditions, "startTime": now}},
                    "application/merge-patch+json",
                )


def wait_for(
    condition: Callable[[], Any], timeout_seconds: float, what: str, seen: Callable[[], Any]
) -> Any:
    """condition()'s first truthy value; TimeoutError naming `what` and what `seen()` shows."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(POLL_SECONDS)
    raise TimeoutError(f"{what} not seen within {timeout_seconds:g} s; instead: {seen()}")


def _node_info(instance: Mapping[str, Any]) -> dict[str, str]:
    return {
        "architecture": "arm64" if instance.get("Architecture") == "arm64" else "amd64",
        "operatingSystem": "linux",
        "osImage": "Amazon Linux 2023",
        "kernelVersion": "6.12.0",
        "containerRuntimeVersion": "containerd://2.1.0",
        "kubeletVersion": "v1.35.4",
        "kubeProxyVersion": "",
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
