"""A node pool's node profile: CPU, memory and topology managers, 2 MiB hugepages, kernel
settings and interrupt placement for network-function pools (docs/network-functions.md;
config/node_profile.py has the facts)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from config import patterns
from config.model.base import StrictModel, unit
from config.node_profile import (
    HUGEPAGE_2MI_MIB,
    NodeProfile,
    cpu_list,
    sysctl_problem,
    sysctl_value_problem,
)

HUGEPAGES_1GI_REFUSAL = (
    "hugepages_1gi: 1 GiB pages can only be reserved by kernel arguments (hugepagesz=1G "
    "hugepages=N) at boot, which needs a changed boot configuration and a reboot that the node "
    "bootstrap does not do; use hugepages_2mi (the pages a DPDK application can also use) or "
    "an AMI of your own built with those kernel arguments"
)


class NodeProfileConfig(StrictModel):
    """The kubelet's CPU, memory and topology managers, hugepages, kernel settings and interrupt
    placement of the pool's nodes: a NodeConfig part (kubelet) and the bootstrap (hugepages,
    sysctls, a CPU count's list, irqbalance) in its user-data.
    Nodes get it when they are created; Karpenter replaces existing ones as drifted."""

    cpu_manager: Literal["none", "static"] = Field(
        default="none",
        description="The kubelet's CPU manager policy: static gives Guaranteed pods with whole "
        "CPU requests exclusive CPUs (needs reserved_cpus).",
    )
    full_pcpus_only: bool = Field(
        default=False,
        description="The static policy's full-pcpus-only option: exclusive CPUs come as whole "
        "physical cores (both hyperthreads), so no other container shares a core.",
    )
    reserved_cpus: str | int | None = Field(
        default=None,
        description="CPUs kept for the OS and the kubelet, never given to pods: a CPU list "
        '(the string "0-1") or a count (the number 2: the bootstrap picks that many on the '
        "node, whole cores first, as the kubelet's static policy would); the kubelet's "
        "reservedSystemCPUs. Must leave CPUs on the pool's smallest instance type.",
    )
    memory_manager: Literal["none", "static"] = Field(
        default="none",
        description="The kubelet's memory manager policy: static gives Guaranteed pods memory "
        "and hugepages from the NUMA nodes the topology manager aligns them to; the app sets "
        "the reserved memory it requires (kube-reserved and eviction threshold pinned, their sum "
        "as reservedMemory on NUMA node 0).",
    )
    topology_manager: Literal["none", "best-effort", "restricted", "single-numa-node"] = Field(
        default="none",
        description="The kubelet's topology manager policy: how strictly a pod's CPUs, devices "
        "and hugepages are aligned to one NUMA node (restricted and single-numa-node refuse "
        "pods that cannot be aligned).",
    )
    topology_manager_scope: Literal["container", "pod"] | None = Field(
        default=None,
        description="Whether the topology manager aligns each container or the whole pod "
        "(unset: the kubelet's default, container); needs a topology_manager other than none.",
    )
    hugepages_2mi: int = Field(
        default=0,
        ge=0,
        json_schema_extra=unit("hugepages", "hugepage"),
        description=f"2 MiB hugepages reserved on each node before the kubelet starts "
        f"({HUGEPAGE_2MI_MIB} MiB each, taken from the memory pods can use); pods request them "
        "as hugepages-2Mi. A NodeOverlay tells Karpenter the pool's nodes have them (its alpha "
        "nodeOverlay feature gate is turned on; needs karpenter.version 1.7 or later).",
    )
    sysctls: dict[str, int] = Field(
        default={},
        description="Kernel settings of each node (socket buffers, forwarding, rp_filter, "
        "connection tracking; config/node_profile.py lists the allowed keys), applied at boot "
        "and kept in /etc/sysctl.d.",
    )

    irqs_on_reserved_cpus: bool = Field(
        default=False,
        description="Keep interrupts on the reserved CPUs: irqbalance bans every other CPU, so "
        "the CPUs the static CPU manager gives pods get no balanced IRQs (needs cpu_manager "
        "static; the host's own network interrupts then share the reserved CPUs).",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_1gi_hugepages(cls, data: object) -> object:
        if isinstance(data, dict) and "hugepages_1gi" in data:
            raise ValueError(HUGEPAGES_1GI_REFUSAL)
        return data

    @field_validator("reserved_cpus", mode="before")
    @classmethod
    def _list_or_count(cls, reserved: object) -> object:
        # One message for either form (a union would report a failure per member).
        if isinstance(reserved, bool) or not isinstance(reserved, str | int | None):
            raise ValueError(
                f"{reserved!r} is neither a CPU list (for example {patterns.CPU_LIST.example}) "
                "nor a count of CPUs (a whole number such as 2)"
            )
        if isinstance(reserved, int) and reserved < 1:
            raise ValueError(f"{reserved}: reserve at least 1 CPU, or drop reserved_cpus")
        if isinstance(reserved, str):
            if not re.fullmatch(patterns.CPU_LIST.regex, reserved):
                raise ValueError(
                    f"{reserved!r} is not {patterns.CPU_LIST.allowed}; for example "
                    f"{patterns.CPU_LIST.example}, or a count such as 2 (a number, no quotes)"
                )
            cpu_list(reserved)
        return reserved

    @field_validator("sysctls", mode="before")
    @classmethod
    def _one_number_each(cls, sysctls: object) -> object:
        # Before the type check: its "should be a valid integer" would not say what form a
        # setting takes (a multi-value sysctl such as tcp_rmem is "4096 87380 6291456").
        if not isinstance(sysctls, dict):
            return sysctls
        problems = [
            problem
            for key, value in sysctls.items()
            if (problem := sysctl_value_problem(str(key), value)) is not None
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return sysctls

    @field_validator("sysctls")
    @classmethod
    def _allowed_sysctls(cls, sysctls: dict[str, int]) -> dict[str, int]:
        problems = [
            problem
            for key, value in sysctls.items()
            if (problem := sysctl_problem(key, value)) is not None
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return sysctls

    @model_validator(mode="after")
    def _consistent(self) -> NodeProfileConfig:
        problems = []
        if self.planned() == NodeProfile():
            problems.append(
                "set at least one of cpu_manager, memory_manager, topology_manager, hugepages_2mi "
                "and sysctls, or leave node_profile out"
            )
        static = self.cpu_manager == "static"
        if static and self.reserved_cpus is None:
            problems.append(
                "reserved_cpus: cpu_manager static needs CPUs kept for the system, for example "
                '"0-1" or a count such as 2 (the kubelet refuses the static policy without a CPU '
                "reservation)"
            )
        if self.irqs_on_reserved_cpus and not static:
            problems.append(
                "irqs_on_reserved_cpus: keeps interrupts off the CPUs the static CPU manager "
                "gives pods; set cpu_manager to static (with reserved_cpus) or drop it"
            )
        if self.full_pcpus_only and not static:
            problems.append(
                "full_pcpus_only: an option of the static CPU manager; set cpu_manager to static "
                "or drop it"
            )
        if self.topology_manager_scope is not None and self.topology_manager == "none":
            problems.append(
                "topology_manager_scope: the none topology manager aligns nothing; set "
                "topology_manager (for example restricted) or drop the scope"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def planned(self) -> NodeProfile:
        return NodeProfile(
            cpu_manager_policy=self.cpu_manager,
            full_pcpus_only=self.full_pcpus_only,
            reserved_cpus=self.reserved_cpus if isinstance(self.reserved_cpus, str) else None,
            reserved_cpu_count=self.reserved_cpus if isinstance(self.reserved_cpus, int) else None,
            memory_manager_policy=self.memory_manager,
            topology_manager_policy=self.topology_manager,
            topology_manager_scope=self.topology_manager_scope,
            hugepages_2mi=self.hugepages_2mi,
            sysctls=tuple(self.sysctls.items()),
            irqs_on_reserved_cpus=self.irqs_on_reserved_cpus,
        )
