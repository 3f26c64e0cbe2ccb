"""Fixtures of the tier's real Multus chain, inside the kernel VM (testing_support/multus_node):
the box's API server reached over the VM's host link, the NAD and the nodes in it, and a Multus
thick daemon and Whereabouts' ip-control-loop on each node of the session's data plane."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from config.network_plan import network_attachment_name
from testing_support.kernel_pods import PodNamespace
from testing_support.kernel_vpc import SERVICES_HOST, ip
from testing_support.multus_node import ApiForwarder, BoxAccess, MultusNode, kubeconfig
from testing_support.vpc_cni_stand_in import PLAN_DIR
from tests.dataplane.fixtures import AZ, NETWORK, NODES, DataPlane

#: The host, as the VM's host link shows it (testing_support/kernel_vm/README.md).
HOST = "203.0.113.2"
NAMESPACE = "default"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"


def network_attachment(name: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """The NetworkAttachmentDefinition `name` in the pods' namespace. With `config`, it carries
    that CNI config under the NAD's name (as the chart names each config after its NAD); without,
    its spec is empty and Multus reads the node's config of that name."""
    spec = {} if config is None else {"config": json.dumps({**config, "name": name})}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


@dataclass
class Cluster:
    """The box as the VM reaches it: admin kubectl, and each node's Multus."""

    access: BoxAccess
    admin_kubeconfig: Path
    nodes: dict[str, MultusNode]
    plane: DataPlane
    pods: list[MultusPod] = field(default_factory=list)
    _eth0_next: int = 200

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run(
            [self.access.kubectl, f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def pod(self, name: str, node: str, nad: str = "") -> MultusPod:
        """A Pod in the API, bound to `node`, asking Multus for the tier's NAD; its sandbox's
        network namespace made and its eth0 address chosen (ipamd's part)."""
        nad = nad or network_attachment_name(NETWORK, AZ)
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "annotations": {NETWORKS_ANNOTATION: nad},
            },
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app:1"}]},
        }
        created = json.loads(
            self.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(manifest))
        )
        self._eth0_next += 1
        kernel_node, agent = self.plane.nodes[node]
        eth0 = f"10.0.2.{self._eth0_next}"
        agent.emulator.ec2.assign_private_ip_addresses(
            NetworkInterfaceId=kernel_node.primary_eni_id, PrivateIpAddresses=[eth0]
        )
        ip("netns", "add", name)  # the runtime's sandbox; eth0 comes with the CNI ADD
        plan = {"address": eth0, "node": kernel_node.name}
        plan_dir = self.nodes[node].path(str(PLAN_DIR))
        (plan_dir / name).write_text(json.dumps(plan))
        pod = MultusPod(name, self, created, self.nodes[node], uuid.uuid4().hex)
        self.pods.append(pod)
        return pod

    def attachment(self, name: str, config: dict[str, Any]) -> str:
        """A NAD in the pods' namespace carrying `config` (the chart's, or a variant of it);
        returns its name."""
        self.kubectl("apply", "-f", "-", stdin=json.dumps(network_attachment(name, config)))
        return name

    def node_local_attachment(self, name: str) -> str:
        """A NAD without a config (charts/network_attachments.py, node_prefix networks): Multus
        takes the config named `name` from the node's /etc/cni/net.d."""
        self.kubectl("apply", "-f", "-", stdin=json.dumps(network_attachment(name, None)))
        return name

    def allocations(self) -> dict[str, str]:
        """Whereabouts' allocations in every IPPool: pod reference -> address offset."""
        pools = json.loads(
            self.kubectl(
                "get", "ippools.whereabouts.cni.cncf.io", "-n", "kube-system", "-o", "json"
            )
        )
        return {
            allocation["podref"]: offset
            for pool in pools["items"]
            for offset, allocation in pool["spec"].get("allocations", {}).items()
        }


@dataclass
class MultusPod(PodNamespace):
    """A pod whose sandbox the tier created; `add` and `delete` are the runtime's CNI calls."""

    cluster: Cluster
    object: dict[str, Any]
    node: MultusNode
    container_id: str
    result: dict[str, Any] | None = None

    @property
    def netns(self) -> str:
        return f"/var/run/netns/{self.name}"

    def add(self) -> dict[str, Any] | None:
        self.result = self.node.cni("ADD", self.netns, self.container_id, self.object)
        return self.result

    def delete(self) -> None:
        self.node.cni("DEL", self.netns, self.container_id, self.object)

    def network_status(self) -> list[dict[str, Any]]:
        current = json.loads(
            self.cluster.kubectl("get", "pod", "-n", NAMESPACE, self.name, "-o", "json")
        )
        status: list[dict[str, Any]] = json.loads(
            current["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, "[]")
        )
        return status

    def net1_address(self) -> str:
        (net1,) = [s for s in self.network_status() if s.get("interface") == "net1"]
        return str(net1["ips"][0])

    def remove(self) -> None:
        """The sandbox gone: its interfaces first (a namespace that a node's mount namespace
        still holds would otherwise keep net1, and its address stays taken on the master:
        ipvlan refuses one address twice), then the Pod and the namespace."""
        self.stop_server()
        ip("-n", self.name, "link", "del", "net1", check=False)
        self.cluster.kubectl(
            "delete", "pod", "-n", NAMESPACE, self.name, "--wait=false", "--ignore-not-found"
        )
        ip("netns", "del", self.name, check=False)


@pytest.fixture(scope="session")
def cluster(data_plane: DataPlane) -> Iterator[Cluster]:
    box = os.environ.get("MULTUS_DATAPLANE_BOX")
    if not box:
        pytest.fail("the host passed no cluster box (MULTUS_DATAPLANE_BOX)")
    access = BoxAccess.load(Path(box))
    forwarder = ApiForwarder(SERVICES_HOST, (HOST, access.port))
    work = Path(tempfile.mkdtemp(prefix="multus-"))
    admin = work / "admin.kubeconfig"
    admin.write_text(
        json.dumps(
            kubeconfig(SERVICES_HOST, access.ca, cert=access.admin_cert, key=access.admin_key)
        )
    )
    nodes = {
        name: MultusNode(
            name=name,
            netns=name,
            root=work / name,
            access=access,
            api_host=SERVICES_HOST,
            pod_ips_dir=data_plane.agent(name).socket_path.parent,
            node_cni_configs=tuple(
                sorted((data_plane.agent(name).root / "var/lib/multus-eni/cni").glob("*.conflist"))
            ),
        )
        for name in NODES
    }
    cluster = Cluster(access, admin, nodes, data_plane)
    cluster.attachment(network_attachment_name(NETWORK, AZ), data_plane.network)
    for name in NODES:
        registered = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(registered))
    try:
        for node in nodes.values():
            node.start()
        for node in nodes.values():
            node.wait_ready()
        yield cluster
    finally:
        for pod in cluster.pods:
            pod.remove()
        for node in nodes.values():
            node.stop()
        forwarder.close()


def wait_for(condition: Any, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True
