"""Fixtures of the tier's real Multus chain, inside the kernel VM (testing_support/multus_node):
the box's API server reached over the VM's host link, the NAD and the nodes in it, and a Multus
thick daemon and Whereabouts' ip-control-loop on each node of the session's data plane."""

from __future__ import annotations

import http.client
import json
import os
import ssl
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
from testing_support.multus_node import (
    API_PORT,
    ApiForwarder,
    BoxAccess,
    MultusNode,
    kubeconfig,
    stop_nodes,
)
from testing_support.vpc_cni_stand_in import PLAN_DIR
from tests.dataplane.fixtures import AZ, HOST, NETWORK, NODES, DataPlane

NAMESPACE = "default"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
#: The field manager of the tier's server-side applies (what `kubectl apply` did before).
FIELD_MANAGER = "dataplane-tier"
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


def nad_path(name: str) -> str:
    """The API path of the NetworkAttachmentDefinition `name` in the pods' namespace."""
    return f"/apis/k8s.cni.cncf.io/v1/namespaces/{NAMESPACE}/network-attachment-definitions/{name}"


@dataclass
class Cluster:
    """The box as the VM reaches it: admin kubectl, and each node's Multus."""

    access: BoxAccess
    admin_kubeconfig: Path
    work: Path  # each node's root below it
    nodes: dict[str, MultusNode]
    plane: DataPlane
    pods: list[MultusPod] = field(default_factory=list)
    _eth0_next: int = 200

    def api(
        self, method: str, path: str, body: dict[str, Any] | None = None, content_type: str = ""
    ) -> dict[str, Any]:
        """One request to the API server as admin, its JSON answer. The tier's own reads and
        writes take this way rather than kubectl's: each kubectl start cost 3-4 s under the
        VM's emulated CPU (a Go binary of 50 MB initialising client-go), a request here a
        fraction of that. A 404 answers {} (what the callers ignore, as --ignore-not-found)."""
        context = ssl.create_default_context(cafile=self.access.ca)
        context.load_cert_chain(self.access.admin_cert, self.access.admin_key)
        connection = http.client.HTTPSConnection(
            SERVICES_HOST, API_PORT, context=context, timeout=120
        )
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        try:
            connection.request(
                method, path, json.dumps(body) if body is not None else None, headers
            )
            response = connection.getresponse()
            answer = response.read()
        finally:
            connection.close()
        if response.status == 404:
            return {}
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {answer.decode()}")
        found: dict[str, Any] = json.loads(answer)
        return found

    def apply(self, path: str, manifest: dict[str, Any]) -> None:
        """Server-side apply of `manifest` at `path` (created, or updated to it)."""
        query = f"?fieldManager={FIELD_MANAGER}&force=true"
        self.api("PATCH", path + query, manifest, "application/apply-patch+yaml")

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
        """A Pod on the data plane's `node` asking Multus for `nad` (default: the tier's NAD),
        its eth0 address assigned to the node's primary ENI first (ipamd's part)."""
        kernel_node, agent = self.plane.nodes[node]
        eth0 = self.next_eth0_address()
        agent.emulator.ec2.assign_private_ip_addresses(
            NetworkInterfaceId=kernel_node.primary_eni_id, PrivateIpAddresses=[eth0]
        )
        return self.pod_on(
            self.nodes[node], name, eth0, nad or network_attachment_name(NETWORK, AZ)
        )

    def pod_on(self, node: MultusNode, name: str, eth0: str, nad: str) -> MultusPod:
        """A Pod in the API, bound to `node`, asking Multus for `nad`; its sandbox's network
        namespace made and the VPC CNI's stand-in told eth0's address. net1 comes with
        `MultusPod.add`."""
        manifest = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "annotations": {NETWORKS_ANNOTATION: nad},
            },
            "spec": {"nodeName": node.name, "containers": [{"name": "app", "image": "app:1"}]},
        }
        created = self.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", manifest)
        ip("netns", "add", name)  # the runtime's sandbox; eth0 comes with the CNI ADD
        plan = {"address": eth0, "node": node.netns}
        (node.path(str(PLAN_DIR)) / name).write_text(json.dumps(plan))
        pod = MultusPod(name, self, created, node, uuid.uuid4().hex)
        self.pods.append(pod)
        return pod

    def next_eth0_address(self) -> str:
        """An address of the node subnet no other pod's eth0 has (ipamd's warm pool)."""
        self._eth0_next += 1
        return f"10.0.2.{self._eth0_next}"

    def start_node(
        self, name: str, netns: str, pod_ips_dir: Path, node_cni_configs: tuple[Path, ...] = ()
    ) -> MultusNode:
        """Registers the Node (as Karpenter and the kubelet would: Whereabouts' control loop
        refuses to start for a node the API does not know) and starts its Multus daemon and
        control loop in the namespace `netns`; wait with `MultusNode.wait_ready`."""
        registered = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        self.apply(f"/api/v1/nodes/{name}", registered)
        node = MultusNode(
            name=name,
            netns=netns,
            root=self.work / name,
            access=self.access,
            api_host=SERVICES_HOST,
            pod_ips_dir=pod_ips_dir,
            node_cni_configs=node_cni_configs,
        )
        self.nodes[name] = node
        node.start()
        return node

    def attachment(self, name: str, config: dict[str, Any]) -> str:
        """A NAD in the pods' namespace carrying `config` (the chart's, or a variant of it);
        returns its name."""
        self.apply(nad_path(name), network_attachment(name, config))
        return name

    def node_local_attachment(self, name: str) -> str:
        """A NAD without a config (charts/network_attachments.py, node_prefix networks): Multus
        takes the config named `name` from the node's /etc/cni/net.d."""
        self.apply(nad_path(name), network_attachment(name, None))
        return name

    def allocations(self) -> dict[str, str]:
        """Whereabouts' allocations in every IPPool: pod reference -> address offset."""
        pools = self.api(
            "GET", "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools"
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
        current = self.cluster.api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{self.name}")
        status: list[dict[str, Any]] = json.loads(
            current["metadata"].get("annotations", {}).get(STATUS_ANNOTATION, "[]")
        )
        return status

    def net1_addresses(self) -> list[str]:
        """net1's addresses as Multus reported them in the Pod's network-status (what
        Whereabouts leased, or the node's IPAM gave)."""
        (net1,) = [s for s in self.network_status() if s.get("interface") == "net1"]
        return [str(address) for address in net1["ips"]]

    def net1_address(self) -> str:
        return self.net1_addresses()[0]

    def remove(self) -> None:
        """The sandbox gone: its interfaces first (a namespace that a node's mount namespace
        still holds would otherwise keep net1, and its address stays taken on the master:
        ipvlan refuses one address twice), then the Pod and the namespace."""
        self.stop_server()
        ip("-n", self.name, "link", "del", "net1", check=False)
        self.cluster.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{self.name}")
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
    cluster = Cluster(access, admin, work, {}, data_plane)
    cluster.attachment(network_attachment_name(NETWORK, AZ), data_plane.network)
    try:
        for name in NODES:
            staged = data_plane.agent(name).root / "var/lib/multus-eni/cni"
            cluster.start_node(
                name,
                netns=name,
                pod_ips_dir=data_plane.agent(name).socket_path.parent,
                node_cni_configs=tuple(sorted(staged.glob("*.conflist"))),
            )
        for node in cluster.nodes.values():
            node.wait_ready()
        yield cluster
    finally:
        for pod in cluster.pods:
            pod.remove()
        stop_nodes(cluster.nodes.values())
        forwarder.close()


def wait_for(condition: Any, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(1)
    return True
