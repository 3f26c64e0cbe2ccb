"""Karpenter: the chart version and its controller settings."""

from __future__ import annotations

from pydantic import (
    Field,
    field_validator,
)

from config import karpenter_releases, patterns
from config.model.base import (
    _CPU_QUANTITY,
    _K8S_NAME,
    _MEMORY_QUANTITY,
    StrictModel,
    unit,
)


class KarpenterConfig(StrictModel):
    """The Karpenter controller (Helm charts karpenter-crd and karpenter)."""

    version: str = Field(
        default="1.14.1",
        pattern=patterns.RELEASE_VERSION.regex,
        description="Karpenter release; must support cluster.kubernetes_version.",
    )
    namespace: str = Field(
        default="kube-system",
        pattern=_K8S_NAME,
        max_length=63,
        description="Namespace of the controller.",
    )
    replicas: int = Field(
        default=2,
        ge=1,
        json_schema_extra=unit("replicas", "replica"),
        description="Controller replicas, one per system node (at most "
        "cluster.system_node_group.desired_size).",
    )
    controller_cpu: str = Field(
        default="1",
        pattern=_CPU_QUANTITY,
        description="CPU request of each controller pod (Kubernetes quantity: 1, 500m).",
    )
    controller_memory: str = Field(
        default="1Gi",
        pattern=_MEMORY_QUANTITY,
        description="Memory request and limit of each controller pod (Kubernetes quantity: 1Gi).",
    )
    spot_service_linked_role: bool = Field(
        default=False,
        description="Create the account-wide Spot service-linked role (fails if it exists).",
    )

    @field_validator("version")
    @classmethod
    def _released(cls, version: str) -> str:
        problem = karpenter_releases.release_problem(version)
        if problem:
            raise ValueError(problem)
        return version


# Interfaces (ENIs) of the Nitro m/c/r families' sizes by vCPU count: the fewest any family in
# config/instance_types.py has at that count (a test keeps the two in step). 128, 192 and 384
# hold the sizes with two network cards (multus.networks[].network_card).
MAX_ENIS_BY_VCPUS: dict[int, int] = {
    2: 3,
    4: 4,
    8: 4,
    16: 8,
    32: 8,
    36: 8,
    48: 8,
    64: 15,
    72: 15,
    96: 15,
    128: 8,
    192: 12,
    384: 12,
}
