"""Labels and taints of Karpenter's nodes: the contract between the config's rules, the charts
(NodePool, cleartaints, sample workloads, the per-pool DaemonSets) and the tests that register
nodes as Karpenter does, written once here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KARPENTER_NODE_LABEL_KEY = "karpenter-node"
KARPENTER_NODE_LABEL_VALUE = "true"
# A node carries "multus.network/<network>": "true" for each Multus network it attaches; pods
# select it (NADs are per AZ, so they select topology.kubernetes.io/zone as well).
NETWORK_LABEL_PREFIX = "multus.network/"
NETWORK_LABEL_VALUE = "true"
# Karpenter's label of the NodePool a node belongs to (karpenter.sh/v1 well-known labels).
KARPENTER_NODEPOOL_LABEL = "karpenter.sh/nodepool"
# The seed's NodePool: its objects keep their names, so the default manifests stay as they were.
DEFAULT_NODE_POOL_NAME = "multus"


def network_label(network: str) -> str:
    """The node label key that says a node attaches `network`."""
    return f"{NETWORK_LABEL_PREFIX}{network}"


def pool_object_name(base: str, pool: str) -> str:
    """The name of a per-pool object (DaemonSet, config file): `base` for the default pool,
    `base-<pool>` for the others, so adding a pool renames nothing that already runs."""
    return base if pool == DEFAULT_NODE_POOL_NAME else f"{base}-{pool}"


@dataclass(frozen=True)
class NodeTaint:
    """A Kubernetes node taint (key, value, effect); value "" is a taint without value."""

    key: str
    value: str
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

    def as_dict(self) -> dict[str, str]:
        """The taint as the API takes it. Without a value there is no "value" key: core/v1
        Taint's value is optional (omitempty), and the NodePool CRD's pattern for
        spec.template.spec.taints[].value and startupTaints[].value (Karpenter v1.14.1
        karpenter.sh_nodepools.yaml) needs at least one character, so "" is refused."""
        if not self.value:
            return {"key": self.key, "effect": self.effect}
        return {"key": self.key, "value": self.value, "effect": self.effect}


# Karpenter puts this on every new node; cleartaints removes it once the node's Multus
# interfaces and Multus config exist, so Multus pods never land on a half-configured node.
MULTUS_NOT_READY_TAINT = NodeTaint(key="multus/not-ready", value="true", effect="NoSchedule")
