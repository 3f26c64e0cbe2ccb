"""Multus pod IPs routable in the VPC: the node agent and the CNI plugin it serves.

Both files are standalone scripts (Python 3.9 standard library) that the multus-pod-ips chart
ships in a ConfigMap: the agent runs in a DaemonSet pod, the plugin on the host (Multus thick
executes delegate plugins chrooted into the host's root filesystem).
"""

from pathlib import Path

AGENT_SCRIPT = Path(__file__).with_name("agent.py")
CNI_PLUGIN_SCRIPT = Path(__file__).with_name("cni_plugin.py")
#: The plugin's file name in /opt/cni/bin, i.e. its "type" in a NAD's plugin chain.
CNI_PLUGIN_TYPE = "multus-pod-ip"
#: Host directory of the agent's socket, pod records (a tmpfs: a reboot forgets them) and
#: readiness marker. The plugin's built-in default socket path is AGENT_SOCKET.
AGENT_RUN_DIR = "/run/multus-pod-ips"
AGENT_SOCKET = f"{AGENT_RUN_DIR}/agent.sock"
AGENT_READY_MARKER = f"{AGENT_RUN_DIR}/ready"

__all__ = [
    "AGENT_READY_MARKER",
    "AGENT_RUN_DIR",
    "AGENT_SCRIPT",
    "AGENT_SOCKET",
    "CNI_PLUGIN_SCRIPT",
    "CNI_PLUGIN_TYPE",
]
