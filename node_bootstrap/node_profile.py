"""Renders a pool's node profile (config/node_profile.py) into its user-data: the kubelet
settings as a nodeadm NodeConfig part, the hugepages, kernel settings, a CPU count and the
interrupt placement as the data of node_profile.sh, which the bootstrap applies before the
kubelet starts.

Why a NodeConfig part: Karpenter's EC2NodeClass spec.kubelet (v1.14) has no CPU, topology or
memory manager settings. nodeadm reads every application/node.eks.aws part of the user-data and
merges them in order, later values winning, maps key by key (nodeadm internal/api/merge.go,
mergeInlineDocument); since v1.0.0 Karpenter puts the EC2NodeClass's parts first and its own
NodeConfig last (karpenter-provider-aws pkg/providers/amifamily/bootstrap/nodeadm.go, commit
06103f7 "consistent userData override ordering"), so a key in both takes Karpenter's value.
Karpenter's holds clusterDNS, maxPods, registerWithTaints and what the EC2NodeClass's
spec.kubelet sets (the app sets none of it): none of the keys here. nodeadm writes the merged
spec.kubelet.config to the kubelet's drop-in /etc/kubernetes/kubelet/config.json.d/
40-nodeadm.conf and passes --config-dir only when there is one (nodeadm internal/kubelet
config.go), which is on every Karpenter node (Karpenter's part always sets registerWithTaints);
the kubelet merges the directory's *.conf files in name order over nodeadm's config.json, maps
key by key (kubernetes website, kubelet-config-directory-merging.md). So node_profile.sh's own
drop-in, 50-multus-node-profile.conf (a CPU count's list), comes after nodeadm's.
"""

from __future__ import annotations

import yaml

from config.node_profile import NODEADM_EVICTION_HARD_MEMORY_MIB, NodeProfile

NODE_CONFIG_CONTENT_TYPE = "application/node.eks.aws"
NODE_CONFIG_API_VERSION = "node.eks.aws/v1alpha1"
#: The static CPU manager's option for whole physical cores (kubelet cpumanager policy_options.go).
FULL_PCPUS_ONLY_OPTION = "full-pcpus-only"
#: The default hugepage size on x86_64 is 2 MiB, so vm.nr_hugepages counts 2 MiB pages (the
#: same count as /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages); as a sysctl.d line it
#: is set again at every boot, before the kubelet starts.
NR_HUGEPAGES_SYSCTL = "vm.nr_hugepages"
#: The kubelet's name of the static memory manager policy (capitalised, unlike the CPU
#: manager's: kubelet cm/memorymanager policy_static.go policyTypeStatic).
MEMORY_MANAGER_STATIC = "Static"
#: The NUMA node that holds the whole memory reservation: every machine has node 0, and the
#: reserved CPUs (the lowest numbered, whole cores first) are on it.
RESERVED_MEMORY_NUMA_NODE = 0


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
    if profile.memory_manager_policy == "static":
        config.update(memory_manager_config(profile))
    if profile.topology_manager_policy != "none":
        config["topologyManagerPolicy"] = profile.topology_manager_policy
    if profile.topology_manager_scope is not None:
        config["topologyManagerScope"] = profile.topology_manager_scope
    return config


def memory_manager_config(profile: NodeProfile) -> dict[str, object]:
    """The static memory manager with the reservation the kubelet requires: reservedMemory must
    add up to exactly kube-reserved + system-reserved + the hard eviction threshold of memory,
    or the kubelet does not start (kubelet cm/memorymanager memory_manager.go,
    validateReservedMemory). nodeadm computes kube-reserved per instance type, so the part pins
    it (the pool's largest, kube_reserved_memory_mib) and the threshold (nodeadm's 100Mi);
    system-reserved memory is set by neither nodeadm nor the app's EC2NodeClass."""
    kube_reserved = profile.kube_reserved_memory_mib
    if kube_reserved is None:
        raise ValueError("the static memory manager needs kube_reserved_memory_mib")
    total = kube_reserved + NODEADM_EVICTION_HARD_MEMORY_MIB
    return {
        "memoryManagerPolicy": MEMORY_MANAGER_STATIC,
        "kubeReserved": {"memory": f"{kube_reserved}Mi"},
        "evictionHard": {"memory.available": f"{NODEADM_EVICTION_HARD_MEMORY_MIB}Mi"},
        "reservedMemory": [
            {"numaNode": RESERVED_MEMORY_NUMA_NODE, "limits": {"memory": f"{total}Mi"}}
        ],
    }


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


def bootstrap_variables(profile: NodeProfile) -> dict[str, str]:
    """The data node_profile.sh reads (MULTUS_NODE_PROFILE_*): the sysctl.d lines, a CPU count
    to turn into the kubelet's reservedSystemCPUs, and when interrupts stay on the reserved
    CPUs, those CPUs (a list, or "count" for the count's); empty when it needs none."""
    variables = {}
    if sysctls := sysctl_lines(profile):
        variables["SYSCTLS"] = sysctls
    if profile.reserved_cpu_count is not None:
        variables["RESERVED_CPU_COUNT"] = str(profile.reserved_cpu_count)
    if profile.irqs_on_reserved_cpus:
        variables["IRQ_CPUS"] = profile.reserved_cpus or "count"
    return variables
