"""Karpenter NodePools and EC2NodeClasses, one pair per node pool, and a NodeOverlay for a pool
whose nodes have resources EC2's instance type data lacks (a node profile's hugepages).

Every value the config sets is a required prop: config/model/node_pools.py (NodePoolConfig)
holds the defaults and the validation rules. New nodes of a pool with Multus networks start with the
Multus startup taint (lifted by cleartaints); every node launches into the private node subnets
only: the subnet selector tags must be on those subnets and never on a Multus subnet, whose ENIs
the pool's user-data attaches separately.

Each pool is a chart (one manifest, one CloudFormation resource) of its own, so removing a pool
from the config removes its resource and CloudFormation's Delete of it deletes the pool's
NodePool and EC2NodeClass: an update of one manifest for all pools would leave them, as
kubectl's prune list has no custom resources (docs/operations.md, "How an update is applied").
A pool's NodeOverlay is a chart of its own likewise (`NodeOverlayChart`), so a pool whose node
profile stops reserving hugepages loses it. `NodePoolInventoryChart` names each pool's objects
in a ConfigMap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cdk8s
from constructs import Construct

from charts.building_blocks import api_object, inventory_config_map
from config.node_labels import (
    KARPENTER_NODE_LABEL_KEY,
    KARPENTER_NODE_LABEL_VALUE,
    MULTUS_NOT_READY_TAINT,
    NodeTaint,
    pool_object_name,
)


@dataclass(frozen=True)
class KarpenterNodePoolProps:
    """zones: availability zones the nodes may launch in (one per configured AZ).
    node_role_name: IAM role of the nodes; may be a CloudFormation token.
    subnet_selector_terms: Karpenter's subnetSelectorTerms that select the node subnets (by
    tags, or by ID in a VPC the app does not own).
    security_group_selector_tags: EC2 tags (values may be tokens) that select the node
    security groups.
    user_data: MIME multi-part user data (the Multus ENI bootstrap of the pool's networks),
    passed through verbatim; None for a pool without Multus networks.
    tags: EC2 tags for instances, volumes and launch templates.
    node_pool_name / node_class_name: the pool's NodePool and EC2NodeClass.
    node_labels: labels every node carries and the NodePool requires (the seed's
    karpenter-node); labels: further labels of the pool's nodes (one per attached network, the
    pool's own).
    startup_taint: the Multus startup taint (None for a pool without Multus networks);
    taints: the pool's own taints.
    termination_grace_period: longest a node drain may wait on PDBs and do-not-disrupt pods
    (Karpenter duration); None lets a blocked drain wait forever.
    extended_resources: resources (name -> quantity) every node of the pool reports beyond its
    instance type's, such as hugepages-2Mi; a NodeOverlay adds them to the pool's instance
    types in Karpenter's scheduling simulation (it needs the nodeOverlay feature gate).
    kubelet: the EC2NodeClass's spec.kubelet (the node profile's reservations, so that
    Karpenter counts the allocatable the kubelet reports); empty: Karpenter's defaults.
    ami_alias ... memory_limit: the node_pool config values, as Karpenter spells them.
    The fields the config does not set default to the seed's NodePool."""

    zones: Sequence[str]
    node_role_name: str
    subnet_selector_terms: Sequence[Mapping[str, Any]]
    security_group_selector_tags: Mapping[str, str]
    ami_alias: str
    root_volume_size: str
    instance_categories: Sequence[str]
    instance_cpus: Sequence[str]
    instance_families: Sequence[str]
    capacity_types: Sequence[str]
    consolidate_after: str
    cpu_limit: str
    memory_limit: str
    termination_grace_period: str | None
    user_data: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    node_pool_name: str = "multus"
    node_class_name: str = "multus"
    node_labels: Mapping[str, str] = field(
        default_factory=lambda: {KARPENTER_NODE_LABEL_KEY: KARPENTER_NODE_LABEL_VALUE}
    )
    labels: Mapping[str, str] = field(default_factory=dict)
    startup_taint: NodeTaint | None = MULTUS_NOT_READY_TAINT
    taints: Sequence[NodeTaint] = ()
    weight: int = 10
    expire_after: str = "720h"
    consolidation_policy: str = "WhenEmpty"
    budgets: Sequence[DisruptionBudget] = ()
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    kubelet: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class DisruptionBudget:
    """A NodePool disruption budget, as Karpenter spells it (spec.disruption.budgets[])."""

    nodes: str
    reasons: Sequence[str] = ()
    schedule: str | None = None
    duration: str | None = None

    def as_dict(self) -> dict[str, Any]:
        budget: dict[str, Any] = {"nodes": self.nodes}
        if self.reasons:
            budget["reasons"] = list(self.reasons)
        if self.schedule is not None:
            budget["schedule"] = self.schedule
        if self.duration is not None:
            budget["duration"] = self.duration
        return budget


#: The highest weight the NodeOverlay CRD allows (karpenter.sh_nodeoverlays.yaml: spec.weight
#: maximum 10000). Karpenter merges overlays' capacity per resource, the highest weight first
#: (kubernetes-sigs/karpenter pkg/controllers/nodeoverlay/store.go): the pool's own profile is
#: what its nodes have, so no other overlay's hugepages may win over it.
NODE_OVERLAY_WEIGHT = 10000


class KarpenterNodePoolChart(cdk8s.Chart):
    """Per pool a karpenter.sh/v1 NodePool and the karpenter.k8s.aws/v1 EC2NodeClass it
    launches. The app makes one chart (one manifest) per pool (module docstring)."""

    def __init__(
        self, scope: Construct, construct_id: str, pools: Sequence[KarpenterNodePoolProps]
    ) -> None:
        super().__init__(scope, construct_id)
        for props in pools:
            api_object(
                self,
                pool_object_name("node-class", props.node_pool_name),
                api_version="karpenter.k8s.aws/v1",
                kind="EC2NodeClass",
                name=props.node_class_name,
                body={"spec": _node_class_spec(props)},
            )
            api_object(
                self,
                pool_object_name("node-pool", props.node_pool_name),
                api_version="karpenter.sh/v1",
                kind="NodePool",
                name=props.node_pool_name,
                body={"spec": _node_pool_spec(props)},
            )


class NodeOverlayChart(cdk8s.Chart):
    """The karpenter.sh/v1alpha1 NodeOverlay of a pool whose nodes have extended resources (a
    chart, so a manifest, of its own: module docstring)."""

    def __init__(self, scope: Construct, construct_id: str, props: KarpenterNodePoolProps) -> None:
        super().__init__(scope, construct_id)
        if not props.extended_resources:
            raise ValueError(f"pool {props.node_pool_name}: no extended resources to overlay")
        api_object(
            self,
            pool_object_name("node-overlay", props.node_pool_name),
            api_version="karpenter.sh/v1alpha1",
            kind="NodeOverlay",
            name=props.node_pool_name,
            body={"spec": _node_overlay_spec(props)},
        )


def _requirement(key: str, values: Sequence[str]) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _node_pool_spec(props: KarpenterNodePoolProps) -> dict[str, Any]:
    requirements = [
        *({"key": key, "operator": "Exists"} for key in props.node_labels),
        _requirement("karpenter.k8s.aws/instance-category", props.instance_categories),
        _requirement("karpenter.k8s.aws/instance-cpu", props.instance_cpus),
        _requirement("karpenter.k8s.aws/instance-family", props.instance_families),
        _requirement("karpenter.k8s.aws/instance-hypervisor", ["nitro"]),
        _requirement("kubernetes.io/arch", ["amd64"]),
        _requirement("kubernetes.io/os", ["linux"]),
        _requirement("karpenter.sh/capacity-type", props.capacity_types),
        _requirement("topology.kubernetes.io/zone", props.zones),
    ]
    template_spec: dict[str, Any] = {
        "requirements": requirements,
        "nodeClassRef": {
            "group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass",
            "name": props.node_class_name,
        },
    }
    if props.startup_taint is not None:
        template_spec = {"startupTaints": [props.startup_taint.as_dict()], **template_spec}
    if props.taints:
        template_spec["taints"] = [taint.as_dict() for taint in props.taints]
    if props.termination_grace_period is not None:
        template_spec["terminationGracePeriod"] = props.termination_grace_period
    template_spec["expireAfter"] = props.expire_after
    labels = {**props.node_labels, **props.labels}
    disruption: dict[str, Any] = {
        "consolidationPolicy": props.consolidation_policy,
        "consolidateAfter": props.consolidate_after,
    }
    if props.budgets:  # none: Karpenter's default budget, 10% of the nodes
        disruption["budgets"] = [budget.as_dict() for budget in props.budgets]
    return {
        "template": {"metadata": {"labels": labels}, "spec": template_spec},
        "disruption": disruption,
        "limits": {"cpu": props.cpu_limit, "memory": props.memory_limit},
        "weight": props.weight,
    }


def _node_overlay_spec(props: KarpenterNodePoolProps) -> dict[str, Any]:
    # Karpenter matches an overlay's requirements against each instance type of each NodePool
    # with the pool's name as karpenter.sh/nodepool (nodeoverlay/controller.go,
    # getOverlaidOfferings): this one reaches every instance type of this pool and of no other.
    return {
        "requirements": [_requirement("karpenter.sh/nodepool", [props.node_pool_name])],
        "capacity": dict(props.extended_resources),
        "weight": NODE_OVERLAY_WEIGHT,
    }


def _node_class_spec(props: KarpenterNodePoolProps) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": props.ami_alias}],
        "role": props.node_role_name,
        "subnetSelectorTerms": [dict(term) for term in props.subnet_selector_terms],
        "securityGroupSelectorTerms": [{"tags": dict(props.security_group_selector_tags)}],
        # IMDSv2 only, one hop: the bootstrap and hostNetwork pods (VPC CNI, Multus) reach IMDS,
        # other pods cannot take the node role's credentials.
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "volumeSize": props.root_volume_size,
                    "volumeType": "gp3",
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
    }
    if props.kubelet:
        spec["kubelet"] = {key: dict(value) for key, value in props.kubelet.items()}
    if props.tags:
        spec["tags"] = dict(props.tags)
    if props.user_data is not None:
        spec["userData"] = props.user_data
    return spec


#: The ConfigMap (in kube-system) that names each pool's Karpenter objects.
INVENTORY_CONFIG_MAP = "karpenter-node-pools"


class NodePoolInventoryChart(cdk8s.Chart):
    """A ConfigMap naming each pool's NodePool, EC2NodeClass and NodeOverlay: the manifest
    every pool was in before each pool had its own. It keeps its CloudFormation resource, so an
    upgrade updates it (kubectl prunes no custom resource) instead of deleting it, which would
    delete every pool's objects."""

    def __init__(
        self, scope: Construct, construct_id: str, pools: Sequence[KarpenterNodePoolProps]
    ) -> None:
        super().__init__(scope, construct_id)
        inventory_config_map(
            self,
            INVENTORY_CONFIG_MAP,
            {
                props.node_pool_name: [
                    f"NodePool/{props.node_pool_name}",
                    f"EC2NodeClass/{props.node_class_name}",
                    *([f"NodeOverlay/{props.node_pool_name}"] if props.extended_resources else []),
                ]
                for props in pools
            },
        )
