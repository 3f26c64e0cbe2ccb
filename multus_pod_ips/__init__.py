"""Multus pod IPs routable in the VPC: the node agent and the CNI plugin it serves.

Both files are standalone scripts (Python 3.9 standard library) that the multus-pod-ips chart
ships in a ConfigMap: the agent runs in a DaemonSet pod, the plugin on the host (Multus thick
executes delegate plugins chrooted into the host's root filesystem).
"""

from pathlib import Path

AGENT_SCRIPT = Path(__file__).with_name("agent.py")
CNI_PLUGIN_SCRIPT = Path(__file__).with_name("cni_plugin.py")

__all__ = ["AGENT_SCRIPT", "CNI_PLUGIN_SCRIPT"]
