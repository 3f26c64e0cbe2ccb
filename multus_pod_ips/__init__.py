"""Multus pod IPs routable in the VPC: the node agent and the CNI plugin it serves.

Python 3.9 standard library only, shipped by the multus-pod-ips chart in a ConfigMap: the agent
(the package multus_pod_ips.agent) runs in a DaemonSet pod, the plugin (cni_plugin.py, one
file) on the host (Multus thick executes delegate plugins chrooted into the host's root
filesystem). The agent uses the plugin's CNI error codes, so both ship this package's modules.
"""

from pathlib import Path

PACKAGE_DIR = Path(__file__).parent
#: `python3 -m AGENT_MODULE CONFIG.json` runs the agent, with the package's parent on sys.path.
AGENT_MODULE = "multus_pod_ips.agent"
CNI_PLUGIN_SCRIPT = PACKAGE_DIR / "cni_plugin.py"
#: The plugin's file name in /opt/cni/bin, i.e. its "type" in a NAD's plugin chain.
CNI_PLUGIN_TYPE = "multus-pod-ip"
#: Host directory of the agent's socket, pod records (a tmpfs: a reboot forgets them) and
#: readiness marker. The plugin's built-in default socket path is AGENT_SOCKET.
AGENT_RUN_DIR = "/run/multus-pod-ips"
AGENT_SOCKET = f"{AGENT_RUN_DIR}/agent.sock"
AGENT_READY_MARKER = f"{AGENT_RUN_DIR}/ready"
#: The agent's Prometheus endpoint (GET /metrics) on the node's addresses (host network).
#: Above Linux's default ephemeral range (net.ipv4.ip_local_port_range 32768-60999), so no
#: outgoing connection holds it, and clear of what else listens on an EKS node: kubelet
#: 10248/10250, kube-proxy 10249/10256, the VPC CNI 61678/61679, node-exporter 9100.
AGENT_METRICS_PORT = 61690


def shipped_modules() -> dict[str, Path]:
    """Every module of the package, by its path below the package's parent (what a node needs
    to run the agent and install the plugin)."""
    return {
        path.relative_to(PACKAGE_DIR.parent).as_posix(): path
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
    }


__all__ = [
    "AGENT_METRICS_PORT",
    "AGENT_MODULE",
    "AGENT_READY_MARKER",
    "AGENT_RUN_DIR",
    "AGENT_SOCKET",
    "CNI_PLUGIN_SCRIPT",
    "CNI_PLUGIN_TYPE",
    "PACKAGE_DIR",
    "shipped_modules",
]
