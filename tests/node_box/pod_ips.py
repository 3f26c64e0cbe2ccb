"""The pod IP agent on a node box as its DaemonSet runs it, and its CNI plugin called as Multus
calls it, last in the NAD's chain.

The DaemonSet and its ConfigMap are the product's chart (charts/multus_pod_ips.py) for the
pool, synthesized as they go to the cluster; testing_support/node_box/daemon_set.py runs the pod
on the box's systemd (and names what that does not model). A pod's Multus interface is what
ipvlan and Whereabouts leave before the plugin runs: an ipvlan link on the network's interface,
moved into the pod's network namespace as net1 with the pod's address; the plugin then gets the
NAD chain's own entry for it (charts/nad_cni_configs.pod_ip_assignment) with that prevResult.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
from dataclasses import dataclass
from typing import Any

from config import AppConfig
from config.model import NodePoolConfig
from config.network_plan import NetworkPlanRow
from multus_pod_ips import AGENT_READY_MARKER, CNI_PLUGIN_TYPE
from testing_support.node_box import NodeBox
from testing_support.node_box.daemon_set import PodFiles, pod_files
from tests.node_box.guest import wait_until

CNI_BIN = "/opt/cni/bin"
POD_IFNAME = "net1"
#: The plugin waits up to the agent's add timeout (50 s) for EC2 and IMDS; the box is slow.
PLUGIN_TIMEOUT = 180.0


def agent_pod(config: AppConfig, pool: NodePoolConfig) -> PodFiles:
    """The pool's pod IP agent pod as the box's systemd runs it."""
    import cdk8s  # jsii starts here: only when a test needs the chart

    from charts.multus_pod_ips import MultusPodIpsChart
    from stacks.cluster_props import pod_ips_props

    props = pod_ips_props(config, config.images.multus_pod_ips.reference)
    assert props is not None, "the pool has no network in the pod IP agent's mode"
    (nodes,) = [nodes for nodes in props.pools if nodes.pool == pool.name]
    manifests = MultusPodIpsChart(cdk8s.App(), "multus-pod-ips", props).to_json()
    (daemon_set,) = [
        manifest
        for manifest in manifests
        if manifest["kind"] == "DaemonSet" and manifest["metadata"]["name"] == nodes.daemon_set_name
    ]
    return pod_files(daemon_set, [m for m in manifests if m["kind"] == "ConfigMap"])


def install(box: NodeBox, pod: PodFiles) -> None:
    """Writes the pod's files, starts its units and waits until the agent says it is ready."""
    for file in pod.files:
        box.write_file(file.path, file.text, file.mode)
    started = box.run(["/bin/sh", "-c", pod.install_script()], timeout=300)
    assert started.returncode == 0, f"{started.describe()}\n{journal(box, pod)}"
    wait_for_agent(box)


def journal(box: NodeBox, pod: PodFiles) -> str:
    """The pod's units' journal: what a failed start said."""
    units = " ".join(f"-u {unit}" for unit in pod.units)
    return box.run(["/bin/sh", "-c", f"journalctl --no-pager -b {units} | tail -n 40"]).stdout


def wait_for_agent(box: NodeBox) -> None:
    wait_until(
        lambda: box.run(["test", "-f", AGENT_READY_MARKER]).returncode == 0,
        timeout=PLUGIN_TIMEOUT,
        what=f"the agent's ready marker {AGENT_READY_MARKER}",
    )


@dataclass(frozen=True)
class PodAttachment:
    """One pod's interface on one Multus network of the node."""

    row: NetworkPlanRow
    container_id: str
    address: str

    @property
    def netns(self) -> str:
        return f"cni-{self.container_id}"

    def plugin_config(self) -> dict[str, Any]:
        from charts.nad_cni_configs import CNI_VERSION, pod_ip_assignment
        from stacks.cluster_props import network_attachment

        attachment = network_attachment(self.row)
        prefix = ipaddress.ip_network(self.row.subnet_cidr).prefixlen
        return {
            "cniVersion": CNI_VERSION,
            "name": attachment.name,
            **pod_ip_assignment(attachment),
            "prevResult": {
                "cniVersion": CNI_VERSION,
                "interfaces": [{"name": POD_IFNAME, "sandbox": f"/var/run/netns/{self.netns}"}],
                "ips": [
                    {
                        "version": "4",
                        "address": f"{self.address}/{prefix}",
                        "gateway": attachment.gateway,
                        "interface": 0,
                    }
                ],
                "dns": {},
            },
        }

    def add(self, box: NodeBox) -> dict[str, Any]:
        """ipvlan's and Whereabouts' part by hand, then the plugin's ADD; its result."""
        prefix = ipaddress.ip_network(self.row.subnet_cidr).prefixlen
        link = "pod-ipvlan"  # a name for the moment before the move (at most 15 characters)
        box.sh(
            f"ip netns add {self.netns} && "
            f"ip link add link {self.row.interface_name} name {link} type ipvlan mode l2 && "
            f"ip link set {link} netns {self.netns} && "
            f"ip -n {self.netns} link set {link} name {POD_IFNAME} && "
            f"ip -n {self.netns} address add {self.address}/{prefix} dev {POD_IFNAME} && "
            f"ip -n {self.netns} link set {POD_IFNAME} up"
        )
        result: dict[str, Any] = json.loads(call_plugin(box, self, "ADD"))
        return result

    def delete(self, box: NodeBox) -> None:
        """The plugin's DEL, then the namespace goes (as the runtime removes it)."""
        call_plugin(box, self, "DEL")
        box.sh(f"ip netns delete {self.netns}")


def call_plugin(box: NodeBox, pod: PodAttachment, command: str) -> str:
    """Runs the installed plugin as Multus runs a delegate: CNI_* in its environment, the
    network configuration on stdin; its stdout (GuestCommandFailed on a non-zero exit)."""
    environment = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": pod.container_id,
        "CNI_NETNS": f"/var/run/netns/{pod.netns}",
        "CNI_IFNAME": POD_IFNAME,
        "CNI_ARGS": f"K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-{pod.container_id}",
        "CNI_PATH": CNI_BIN,
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in environment.items())
    return box.sh(
        f"env -i {assignments} {CNI_BIN}/{CNI_PLUGIN_TYPE}",
        stdin=json.dumps(pod.plugin_config()).encode(),
        timeout=PLUGIN_TIMEOUT,
    )
