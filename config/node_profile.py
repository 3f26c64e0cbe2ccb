"""A node pool's node profile (docs/network-functions.md): the kubelet's CPU, memory and topology
managers, 2 MiB hugepages, kernel settings and interrupt placement of the pool's nodes, as the
node bootstrap's plan carries them (config/model/node_profile.py validates them;
node_bootstrap/node_profile.py renders them), and the facts its rules check against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from config import instance_types

#: Bytes of one hugepage of the x86_64 default size, in MiB.
HUGEPAGE_2MI_MIB = 2
#: The resource the kubelet reports those pages as, and pods request them by.
HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi"
#: nodeadm's kube-reserved memory: 255 MiB + 11 MiB per pod of the instance type's max pods
#: (amazon-eks-ami nodeadm/internal/kubelet/config.go getMemoryMebibytesToReserve), and its
#: hard eviction threshold for memory (defaultKubeletSubConfig: memory.available 100Mi).
NODEADM_KUBE_RESERVED_BASE_MIB = 255
NODEADM_KUBE_RESERVED_MIB_PER_POD = 11
NODEADM_EVICTION_HARD_MEMORY_MIB = 100
#: Ordinary memory a node keeps whatever its hugepages: the OS, containerd, the kubelet (nodeadm
#: reserves 255 MiB + 11 MiB per pod for it, ~600 MiB on a 2-vCPU node), the eviction threshold
#: (100 MiB) and the pods that ask for no hugepages. Memory in hugepages serves none of them.
ORDINARY_MEMORY_FLOOR_MIB = 2048

# Kernel settings a profile may set: socket buffers, forwarding, reverse-path filtering and
# connection tracking, the ones network functions tune (each takes a whole number). Any other
# is refused: a wrong kernel setting can break the node in ways no check here sees.
SYSCTL_KEYS: tuple[str, ...] = (
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.ip_forward",
    "net.netfilter.nf_conntrack_max",
    *(
        f"net.netfilter.nf_conntrack_{timeout}"
        for timeout in (
            "generic_timeout",
            "icmp_timeout",
            "sctp_timeout_established",
            "tcp_timeout_close_wait",
            "tcp_timeout_established",
            "tcp_timeout_fin_wait",
            "tcp_timeout_syn_recv",
            "tcp_timeout_syn_sent",
            "tcp_timeout_time_wait",
            "tcp_timeout_unacknowledged",
            "udp_timeout",
            "udp_timeout_stream",
        )
    ),
)
#: Per-interface keys: net.ipv4.conf.<all, default or an interface name>.<setting>.
SYSCTL_INTERFACE_KEY = re.compile(
    r"^net\.ipv4\.conf\.([a-z][a-z0-9]{0,14})\.(forwarding|rp_filter)$"
)
SYSCTL_ALLOWED = (*SYSCTL_KEYS, "net.ipv4.conf.<interface>.forwarding|rp_filter")
#: Values a key takes when not any whole number (forwarding is on or off, rp_filter 0-2).
SYSCTL_CHOICES: Mapping[str, tuple[int, ...]] = {
    "ip_forward": (0, 1),
    "forwarding": (0, 1),
    "rp_filter": (0, 1, 2),
}
#: The bootstrap turns reverse-path filtering off for all interfaces (Multus traffic is
#: asymmetric, and the kernel applies the larger of "all" and the interface's value).
RP_FILTER_ALL = "net.ipv4.conf.all.rp_filter"


@dataclass(frozen=True)
class NodeProfile:
    """What a pool's node profile changes on its nodes.

    cpu_manager_policy: "none" or "static"; full_pcpus_only: the static policy's option that
    gives a container whole physical cores; reserved_cpus: a CPU list the kubelet keeps for the
    system (none: unset); reserved_cpu_count: instead of a list, how many CPUs the bootstrap
    picks on the node, whole cores first; memory_manager_policy: "none" or "static";
    kube_reserved_memory_mib: the kube-reserved memory the static memory manager's reservation
    adds up to (set with it, by the pool: memory_reservation_mib); topology_manager_policy /
    topology_manager_scope: as the kubelet takes them (scope None: the kubelet's default);
    hugepages_2mi: 2 MiB pages reserved at boot; sysctls: kernel settings, in the order given;
    irqs_on_reserved_cpus: irqbalance keeps interrupts on the reserved CPUs."""

    cpu_manager_policy: str = "none"
    full_pcpus_only: bool = False
    reserved_cpus: str | None = None
    reserved_cpu_count: int | None = None
    memory_manager_policy: str = "none"
    kube_reserved_memory_mib: int | None = None
    topology_manager_policy: str = "none"
    topology_manager_scope: str | None = None
    hugepages_2mi: int = 0
    sysctls: Sequence[tuple[str, int]] = field(default=())
    irqs_on_reserved_cpus: bool = False

    @property
    def reserves_cpus(self) -> bool:
        return self.reserved_cpus is not None or self.reserved_cpu_count is not None

    @property
    def reserved_cpu_total(self) -> int | None:
        """How many CPUs the kubelet keeps for the system (None: it keeps none by list)."""
        if self.reserved_cpu_count is not None:
            return self.reserved_cpu_count
        return None if self.reserved_cpus is None else len(cpu_list(self.reserved_cpus))

    def karpenter_kubelet(self) -> dict[str, dict[str, str]]:
        """The EC2NodeClass spec.kubelet reservations that make Karpenter count what the
        kubelet will allocate. Karpenter v1.14 takes no reservedSystemCPUs, so it would count a
        node's CPUs less its own kube-reserved formula; the kubelet, given reservedSystemCPUs,
        drops kube-reserved CPU and reserves that many CPUs as system-reserved (kubernetes
        v1.35 cmd/kubelet/app/server.go: "it will overwrite the cpu setting in KubeReserved
        and SystemReserved"). So systemReserved.cpu is the count: Karpenter subtracts it and
        its kube-reserved CPU (at most 0.1 CPU up to 8 vCPUs, less than the kubelet by that,
        never more), and the kubelet, whose reservedSystemCPUs overwrites it, allocates the
        rest. With the static memory manager the profile pins kube-reserved memory (nodeadm
        would compute it per size): Karpenter takes the same value (its own formula is
        nodeadm's, per size). Hugepages reach Karpenter through the NodeOverlay, which it
        subtracts from memory (sigs.k8s.io/karpenter pkg/cloudprovider/types.go,
        computeAllocatable)."""
        kubelet: dict[str, dict[str, str]] = {}
        if (count := self.reserved_cpu_total) is not None:
            kubelet["systemReserved"] = {"cpu": str(count)}
        if self.memory_manager_policy == "static" and self.kube_reserved_memory_mib is not None:
            kubelet["kubeReserved"] = {"memory": f"{self.kube_reserved_memory_mib}Mi"}
        return kubelet

    def extended_resources(self) -> dict[str, str]:
        """Resources the kubelet reports on the pool's nodes beyond the instance type's CPU,
        memory, pods and storage, as quantities: the reserved hugepages. EC2's instance type
        data has none of them, so Karpenter learns them from a NodeOverlay."""
        if not self.hugepages_2mi:
            return {}
        return {HUGEPAGES_2MI_RESOURCE: f"{self.hugepages_2mi * HUGEPAGE_2MI_MIB}Mi"}


def kube_reserved_memory_mib(max_pods: int) -> int:
    """nodeadm's kube-reserved memory on an instance type with this many max pods."""
    return NODEADM_KUBE_RESERVED_BASE_MIB + NODEADM_KUBE_RESERVED_MIB_PER_POD * max_pods


def cpu_list(text: str) -> list[int]:
    """The CPU numbers of a Linux CPU list such as "0-1,4" (config/patterns.py CPU_LIST);
    ValueError for a range whose end comes before its start."""
    cpus: list[int] = []
    for item in text.split(","):
        low, _, high = item.partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(
                f"{text!r}: the range {item} ends before it starts; write {last}-{first}"
            )
        cpus += range(first, last + 1)
    return sorted(set(cpus))


def sysctl_value_problem(key: str, value: object) -> str | None:
    """Why a value is no kernel setting's value of a profile (each takes one whole number,
    written without quotes), or None. A setting of several values, such as net.ipv4.tcp_rmem's
    "min default max", is none of the allowed keys."""
    if isinstance(value, int) and not isinstance(value, bool):
        return None
    numbers = value.split() if isinstance(value, str) else []
    if len(numbers) > 1 and all(re.fullmatch(r"-?[0-9]+", number) for number in numbers):
        return (
            f"{key} = {value!r}: {len(numbers)} numbers in one value, but a node profile's "
            "kernel settings each take one whole number, written without quotes (for example "
            "net.core.rmem_max: 16777216); settings of several values, such as net.ipv4.tcp_rmem "
            "(min default max), are not among the allowed keys: "
            f"{', '.join(SYSCTL_ALLOWED)}"
        )
    if len(numbers) == 1 and re.fullmatch(r"-?[0-9]+", numbers[0]):
        return (
            f"{key} = {value!r}: a number in quotes; write it without quotes: {key}: {numbers[0]}"
        )
    shown = "true" if value is True else "false" if value is False else repr(value)
    return f"{key} = {shown}: takes one whole number, written without quotes (for example {key}: 1)"


def sysctl_problem(key: str, value: int) -> str | None:
    """Why a profile may not set this kernel setting to this value, or None."""
    interface = SYSCTL_INTERFACE_KEY.match(key)
    if key not in SYSCTL_KEYS and interface is None:
        return (
            f"{key!r} is not a kernel setting a node profile may set; allowed: "
            f"{', '.join(SYSCTL_ALLOWED)}"
        )
    choices = SYSCTL_CHOICES.get(key.rsplit(".", 1)[-1])
    if value < 0 or (choices is not None and value not in choices):
        return f"{key} = {value}: takes {list(choices) if choices else 'a whole number >= 0'}"
    if key == RP_FILTER_ALL and value != 0:
        return (
            f"{key} = {value}: the bootstrap keeps it 0, because Multus traffic is asymmetric and "
            "the kernel applies the larger of all and the interface's value; set rp_filter on "
            "the host's own interfaces instead (net.ipv4.conf.ens5.rp_filter)"
        )
    return None


def size_problems(profile: NodeProfile, sizes: Sequence[tuple[str, int]]) -> list[str]:
    """One "node_profile.field: problem" line per setting the pool's smallest size (of the
    (family, vCPUs) it may launch) cannot carry: reserved CPUs that leave it no CPU or that it
    lacks, hugepages that leave it less than ORDINARY_MEMORY_FLOOR_MIB of ordinary memory."""
    problems = []
    family, vcpus = min(sizes, key=lambda size: size[1])
    smallest = instance_types.size_name(family, vcpus)
    if profile.reserved_cpu_count is not None and profile.reserved_cpu_count >= vcpus:
        problems.append(
            f"node_profile.reserved_cpus: {profile.reserved_cpu_count} CPUs are all of the "
            f"pool's smallest instance type {smallest} ({vcpus} vCPUs), and pods need at least "
            "one; reserve fewer or drop the small sizes from instance_cpus"
        )
    if profile.reserved_cpus is not None:
        reserved = cpu_list(profile.reserved_cpus)
        if reserved[-1] >= vcpus or len(reserved) >= vcpus:
            problems.append(
                f"node_profile.reserved_cpus: {profile.reserved_cpus!r} reserves CPUs "
                f"{reserved}, but the pool's smallest instance type {smallest} has CPUs "
                f"0-{vcpus - 1}, and pods need at least one; reserve fewer or drop the small "
                "sizes from instance_cpus"
            )
    if profile.hugepages_2mi:
        family, vcpus = min(sizes, key=lambda size: instance_types.memory_mib(*size))
        memory = instance_types.memory_mib(family, vcpus)
        hugepages = profile.hugepages_2mi * HUGEPAGE_2MI_MIB
        if memory - hugepages < ORDINARY_MEMORY_FLOOR_MIB:
            most = (memory - ORDINARY_MEMORY_FLOOR_MIB) // HUGEPAGE_2MI_MIB
            problems.append(
                f"node_profile.hugepages_2mi: {profile.hugepages_2mi} pages are {hugepages} MiB, "
                f"which leaves {instance_types.size_name(family, vcpus)} ({memory} MiB) less than "
                f"the {ORDINARY_MEMORY_FLOOR_MIB} MiB the OS, the kubelet and other pods need; "
                f"ask for at most {max(most, 0)} pages or drop the small sizes from instance_cpus"
            )
    return problems
