"""The parts of a node that nothing in the Karpenter box runs: EC2's instance and the kubelet on it.

For each NodeClaim that Karpenter launched (status.providerID set), once EC2 (the emulator)
reports its instance running, the player registers the Node as the kubelet does on an EKS
node: named by the instance's private DNS name, with the providerID, the labels and taints the
NodeClaim carries (Karpenter passes them to the kubelet through the user data's NodeConfig: its
labels, its taints and startup taints), the capacity and allocatable that `capacity_of` gives,
Ready, with its lease in kube-node-lease. It plays the kubelet's side of each pod bound to such
a node: Running and Ready, and gone once the API server marked it for deletion (what the
kubelet reports after the container stopped).

The startup-taint remover's pods (namespace `script_namespace`) run for real: their own script
with the environment the kubelet would give it (testing_support/cluster_box/script_container.py),
each node's host paths under its own folder. For a node that boots (not of `stuck_pools`), the
player writes what the node's boot leaves for the remover to find, every file the remover's
environment names (the bootstrap's readiness marker, the CNI binaries and configs that Multus,
Whereabouts and the pod IP agent install), as the bootstrap and those DaemonSets would.

What it does not model, and why: no other container runs (there is no container runtime
here), no heartbeat is sent (the box's node lifecycle controller waits an hour:
cluster_box.control_plane.NODE_GRACE), and the instance's boot itself is not run (the node box
boots the same user data under QEMU; here only its outcome, the files, is written).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.script_container import Container, start_container
from testing_support.karpenter_box.kube_api import ApiError, KubeApi

POLL_SECONDS = 0.5
UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
#: What a node reports as capacity and allocatable: (claim, instance) -> (capacity, allocatable).
CapacityOf = Callable[[Mapping[str, Any], Mapping[str, Any]], tuple[dict[str, str], dict[str, str]]]


def instance_id(provider_id: str) -> str:
    """i-... of aws:///<zone>/i-... (the providerID the AWS cloud provider sets)."""
    return provider_id.rsplit("/", 1)[-1]


@dataclass
class KubeletPlayer:
    """Registers the Nodes of launched NodeClaims and runs their pods' status, in a thread."""

    api: KubeApi
    ec2: Any
    capacity_of: CapacityOf
    #: NodeClaim names whose node is never registered (a test's stuck or slow instance).
    withheld: set[str] = field(default_factory=set)
    #: Runs the script of each pod of this namespace bound to a node (plane, host root).
    script_namespace: str = ""
    plane: ControlPlane | None = None
    host_roots: Path | None = None
    #: Pools whose nodes' boot never finishes (a bootstrap that hangs without powering off):
    #: no file is written for their remover.
    stuck_pools: set[str] = field(default_factory=set)
    containers: dict[str, Container] = field(default_factory=dict)
    #: The containers of pods that are gone (their logs stay readable).
    finished: list[Container] = field(default_factory=list)

    def remover_logs(self) -> str:
        return "".join(c.output() for c in [*self.finished, *self.containers.values()])

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
        for container in self.containers.values():
            container.stop()

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
        # Karpenter's NodeConfig registers the kubelet with karpenter.sh/unregistered, which
        # Karpenter removes once it has synced the claim's labels and taints onto the Node
        # (sigs.k8s.io/karpenter pkg/controllers/nodeclaim/lifecycle/registration.go).
        taints = [*spec.get("taints", []), *spec.get("startupTaints", []), UNREGISTERED_TAINT]
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
                container = self.containers.pop(pod["metadata"]["uid"], None)
                if container is not None:
                    container.stop()
                    self.finished.append(container)
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
                if pod["metadata"]["namespace"] == self.script_namespace:
                    self._run_script(pod, str(node))

    def _run_script(self, pod: dict[str, Any], node: str) -> None:
        assert self.plane is not None and self.host_roots is not None
        root = self.host_roots / node
        container = start_container(self.plane, pod, root)
        self.containers[pod["metadata"]["uid"]] = container
        labels = self.api.get(f"/api/v1/nodes/{node}")["metadata"].get("labels", {})
        if labels.get("karpenter.sh/nodepool") not in self.stuck_pools:
            for path in boot_files(container.env):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("")


def boot_files(environment: Mapping[str, str]) -> list[Path]:
    """Every file the startup-taint remover waits for, from its environment (charts/
    cleartaints.py): the CNI binaries, the CNI files, Multus' config, the bootstrap's marker
    and, where the pool runs the pod IP agent, its marker."""
    files = [
        Path(environment["CNI_BIN_DIR"]) / name for name in environment["CNI_BINARIES"].split()
    ]
    files += [Path(name) for name in environment["CNI_FILES"].split()]
    files += [
        Path(environment["CNI_CONF_DIR"]) / "00-multus.conf",
        Path(environment["READY_MARKER"]),
    ]
    if environment.get("POD_IPS_READY_MARKER"):
        files.append(Path(environment["POD_IPS_READY_MARKER"]))
    return files


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
