"""Renders a pool's node profile (config/node_profile.py) into its user-data: the kubelet
settings as a nodeadm NodeConfig part, the hugepages and kernel settings as the data of
node_profile.sh, which the bootstrap applies before the kubelet starts.

Why a NodeConfig part: Karpenter's EC2NodeClass spec.kubelet (v1.14) has no CPU, topology or
memory manager settings. nodeadm reads every application/node.eks.aws part of the user-data and
merges them in order, later values winning (nodeadm internal/api/merge.go); Karpenter puts its
own NodeConfig first and the EC2NodeClass's parts after it, so ours applies on top of it.
nodeadm takes spec.kubelet.config as any KubeletConfiguration keys and writes them to the
kubelet's drop-in /etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf (nodeadm internal/kubelet
config.go), which the kubelet merges over nodeadm's own config.
"""

from __future__ import annotations

import yaml

from config.node_profile import NodeProfile

NODE_CONFIG_CONTENT_TYPE = "application/node.eks.aws"
NODE_CONFIG_API_VERSION = "node.eks.aws/v1alpha1"
#: The static CPU manager's option for whole physical cores (kubelet cpumanager policy_options.go).
FULL_PCPUS_ONLY_OPTION = "full-pcpus-only"
#: The default hugepage size on x86_64 is 2 MiB, so vm.nr_hugepages counts 2 MiB pages (the
#: same count as /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages); as a sysctl.d line it
#: is set again at every boot, before the kubelet starts.
NR_HUGEPAGES_SYSCTL = "vm.nr_hugepages"


def kubelet_config(profile: NodeProfile) -> dict[str, object]:
    """The KubeletConfiguration (kubelet.config.k8s.io/v1beta1) keys the profile sets; the
    kubelet's defaults stay where it sets nothing."""
    config: dict[str, object] = {}
    if profile.cpu_manager_policy != "none":
        config["cpuManagerPolicy"] = profile.cpu_manager_policy
    if profile.full_pcpus_only:
        config["cpuManagerPolicyOptions"] = {FULL_PCPUS_ONLY_OPTION: "true"}
    if profile.reserved_cpus is not None:
        config["reservedSystemCPUs"] = profile.reserved_cpus
    if profile.topology_manager_policy != "none":
        config["topologyManagerPolicy"] = profile.topology_manager_policy
    if profile.topology_manager_scope is not None:
        config["topologyManagerScope"] = profile.topology_manager_scope
    return config


def node_config_part(profile: NodeProfile, boundary: str) -> str:
    """The MIME part with the profile's NodeConfig; empty when it sets no kubelet key."""
    config = kubelet_config(profile)
    if not config:
        return ""
    document = {
        "apiVersion": NODE_CONFIG_API_VERSION,
        "kind": "NodeConfig",
        "spec": {"kubelet": {"config": config}},
    }
    return (
        f"--{boundary}\n"
        f"Content-Type: {NODE_CONFIG_CONTENT_TYPE}\n"
        "\n"
        "---\n"
        f"{yaml.safe_dump(document, sort_keys=False)}"
    )


def sysctl_lines(profile: NodeProfile) -> str:
    """The sysctl.d lines node_profile.sh writes and applies: hugepages first, then the
    profile's kernel settings; empty when it sets neither."""
    settings = list(profile.sysctls)
    if profile.hugepages_2mi:
        settings.insert(0, (NR_HUGEPAGES_SYSCTL, profile.hugepages_2mi))
    return "\n".join(f"{key} = {value}" for key, value in settings)
