"""The node pools: one Karpenter NodePool and EC2NodeClass each, with their networks, taints and
lifecycle."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from config import instance_types, patterns
from config.model.base import (
    _CPU_QUANTITY,
    _K8S_NAME,
    _MEMORY_QUANTITY,
    Gp3SizeGib,
    StrictModel,
    unit,
)
from config.model.disruption import DisruptionConfig
from config.model.karpenter import MAX_ENIS_BY_VCPUS
from config.model.node_profile import NodeProfileConfig
from config.node_labels import DEFAULT_NODE_POOL_NAME
from config.node_pool_rules import (
    label_problems,
    node_pool_requirement_problems,
    taint_problems,
)
from config.node_prefix import default_prefixes_per_node, max_pods
from config.node_profile import NodeProfile, kube_reserved_memory_mib, size_problems


class NodePoolTaintConfig(StrictModel):
    """A taint on every node of the pool (NodePool spec.template.spec.taints)."""

    key: str = Field(description="Taint key (a Kubernetes label key, for example example.com/upf).")
    value: str = Field(
        default="",
        description="Taint value (a Kubernetes label value); empty (the default): a taint "
        'without value, rendered without "value" (the NodePool CRD refuses an empty one) and '
        "tolerated with operator Exists.",
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="NoSchedule", description="What the taint does to pods that do not tolerate it."
    )


class NodePoolConfig(StrictModel):
    """A Karpenter NodePool (and its EC2NodeClass and user-data); defaults are the seed's."""

    renamed_keys: ClassVar[dict[str, str]] = {"consolidate_after": "disruption.consolidate_after"}

    name: str = Field(
        pattern=_K8S_NAME,
        max_length=40,
        description="Name of the pool's NodePool and EC2NodeClass (unique; the seed's: "
        f"{DEFAULT_NODE_POOL_NAME}).",
    )
    networks: list[str] | None = Field(
        default=None,
        description="Names of the multus.networks its nodes attach, at device indexes from 1 "
        "in multus.networks order (omitted or null: every network; []: a plain Karpenter pool "
        'without Multus interfaces). Nodes carry the label multus.network/<network>: "true" '
        "per attached network.",
    )
    instance_categories: list[Literal["m", "c", "r"]] = Field(
        default=["m", "c", "r"],
        min_length=1,
        description="Allowed instance categories (karpenter.k8s.aws/instance-category).",
    )
    instance_cpus: list[int] = Field(
        default=[2, 4, 8, 16],
        min_length=1,
        description="Allowed vCPU counts (karpenter.k8s.aws/instance-cpu).",
    )
    instance_families: list[str] = Field(
        default=["m5", "c5", "m6i", "c6i", "r6i"],
        min_length=1,
        description="Allowed instance families (karpenter.k8s.aws/instance-family); "
        "config/instance_types.py lists the known ones.",
    )
    capacity_types: list[Literal["on-demand", "spot"]] = Field(
        default=["on-demand"],
        min_length=1,
        description="Allowed capacity types (karpenter.sh/capacity-type).",
    )
    cpu_limit: str = Field(
        default="500",
        pattern=_CPU_QUANTITY,
        description="Most CPU all NodePool nodes together may have (Kubernetes quantity).",
    )
    memory_limit: str = Field(
        default="500Gi",
        pattern=_MEMORY_QUANTITY,
        description="Most memory all NodePool nodes together may have (Mi or Gi).",
    )
    ami_alias: str = Field(
        default="al2023@v20261112",
        pattern=patterns.AMI_ALIAS.regex,
        description="Pinned AL2023 release; never @latest (every release would replace nodes).",
    )
    root_volume_gib: Gp3SizeGib = Field(
        default=20,
        ge=20,
        json_schema_extra=unit("GiB"),
        description="Encrypted gp3 root volume of each Karpenter node, in GiB.",
    )
    termination_grace_period: str = Field(
        default="15m",
        pattern=patterns.KARPENTER_DURATION.regex,
        description="Longest a node drain may wait on PodDisruptionBudgets and do-not-disrupt "
        "pods before Karpenter deletes them (drift, consolidation, teardown); must be shorter "
        "than cluster.teardown_timeout_minutes.",
    )
    replace_not_ready_after: str = Field(
        default="20m",
        pattern=patterns.NOT_READY_BOUND.regex,
        description="How long a node of the pool may keep the Multus startup taint (its ENI "
        "bootstrap, Multus, Whereabouts or the pod IP agent not ready) before the startup-taint "
        "remover deletes its NodeClaim, so that Karpenter drains it, terminates the instance "
        "and launches another (Karpenter replaces no node that never initialized); longer than "
        "the 15 minutes after which the MultusNodeNotReady alert fires; Never keeps such nodes.",
    )
    labels: dict[str, str] = Field(
        default={},
        description="Labels of the pool's nodes (besides karpenter-node and the "
        "multus.network/<network> labels the app sets).",
    )
    taints: list[NodePoolTaintConfig] = Field(
        default=[], description="Taints of the pool's nodes; only pods that tolerate them land."
    )
    weight: int = Field(
        default=10,
        ge=1,
        le=100,
        description="Karpenter tries pools of higher weight first (1 to 100).",
    )
    disruption: DisruptionConfig = Field(
        default_factory=DisruptionConfig,
        description="When Karpenter replaces or removes the pool's nodes on its own: expiry, "
        "consolidation, disruption budgets (docs/operations.md, Disruption of "
        "network-function pools).",
    )
    node_profile: NodeProfileConfig | None = Field(
        default=None,
        description="CPU and topology managers, 2 MiB hugepages and kernel settings of the "
        "pool's nodes, for network functions such as a UPF (docs/network-functions.md); "
        "unset: the AMI's defaults.",
    )

    @field_validator("networks")
    @classmethod
    def _networks_listed_once(cls, networks: list[str] | None) -> list[str] | None:
        if networks is not None and len(set(networks)) != len(networks):
            raise ValueError(f"{networks}: list each network once")
        return networks

    @model_validator(mode="after")
    def _labels_and_taints(self) -> NodePoolConfig:
        problems = label_problems(self.labels) + taint_problems(
            [(taint.key, taint.value, taint.effect) for taint in self.taints]
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @field_validator("instance_cpus")
    @classmethod
    def _known_sizes(cls, cpus: list[int]) -> list[int]:
        unknown = sorted(set(cpus) - set(MAX_ENIS_BY_VCPUS))
        if unknown:
            raise ValueError(
                f"{unknown}: pick vCPU counts of m/c/r sizes: {sorted(MAX_ENIS_BY_VCPUS)}"
            )
        return cpus

    @model_validator(mode="after")
    def _requirements_intersect(self) -> NodePoolConfig:
        problems = node_pool_requirement_problems(
            self.instance_categories, self.instance_families, self.instance_cpus
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _node_profile_fits(self) -> NodePoolConfig:
        # After _requirements_intersect: allowed_sizes needs known families.
        if self.node_profile is None:
            return self
        sizes = [(family, cpus) for family, cpus, _ in self.allowed_sizes()]
        problems = size_problems(self.node_profile.planned(), sizes)
        if self.networks == []:
            problems.append(
                "node_profile: the app gives a pool without networks no user-data, which "
                "carries the profile; attach a network to the pool or drop node_profile"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def allowed_sizes(self) -> list[tuple[str, int, int]]:
        """(family, vCPUs, network interfaces) of every size the NodePool may launch."""
        return [
            (family, cpus, enis)
            for family in self.instance_families
            for cpus, enis in instance_types.NODE_POOL_FAMILIES[family].items()
            if cpus in self.instance_cpus
        ]

    def planned_node_profile(self) -> NodeProfile | None:
        """What the pool's user-data renders of its node profile (None: nothing)."""
        if self.node_profile is None:
            return None
        profile = self.node_profile.planned()
        if profile.memory_manager_policy == "static":
            # The most nodeadm reserves on any size of the pool (its max pods are the same
            # ENI-limited count as max_pods'), pinned so one reservedMemory matches every size.
            profile = replace(
                profile, kube_reserved_memory_mib=kube_reserved_memory_mib(max_pods(self))
            )
        return profile

    @property
    def replace_not_ready_after_seconds(self) -> int:
        """replace_not_ready_after in seconds (0: Never)."""
        return patterns.duration_seconds(self.replace_not_ready_after)

    @property
    def karpenter_kubelet(self) -> dict[str, dict[str, str]]:
        """The EC2NodeClass's spec.kubelet: the node profile's reservations as Karpenter counts
        them (config/node_profile.py NodeProfile.karpenter_kubelet)."""
        return self.node_profile.planned().karpenter_kubelet() if self.node_profile else {}

    @property
    def extended_resources(self) -> dict[str, str]:
        """What the pool's nodes report beyond their instance type (its profile's hugepages)."""
        return self.node_profile.planned().extended_resources() if self.node_profile else {}

    @property
    def max_enis_of_smallest_size(self) -> int:
        return min(enis for _, _, enis in self.allowed_sizes())

    @property
    def default_prefixes_per_node(self) -> int:
        """K of a node_prefix network without prefixes_per_node on this pool's nodes."""
        return default_prefixes_per_node(self)


def default_node_pools() -> list[NodePoolConfig]:
    """The seed's single pool: every network, the seed's NodePool settings."""
    return [NodePoolConfig(name=DEFAULT_NODE_POOL_NAME)]


def node_pool_migration(old: object) -> str:
    """The message for the old node_pool key, with its settings in the new form."""
    settings = old if isinstance(old, dict) else {}
    new_form = json.dumps({"node_pools": [{"name": DEFAULT_NODE_POOL_NAME, **settings}]})
    return (
        "node_pool was replaced by node_pools, a list of pools (each with a name and the "
        "networks its nodes attach; omitted networks = all); yours in the new form: "
        f"{new_form[1:-1]}"
    )
