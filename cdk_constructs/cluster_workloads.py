"""The in-cluster half of Multus: the cdk8s charts, deployed through the cluster in order.

Each chart becomes one KubernetesManifest custom resource. Dependencies are only the ones the
API server needs (a CRD before its custom resources, Karpenter's controller before its node
pool), so every other manifest is applied in parallel and the critical path stays the Karpenter
chain: CRD chart -> controller chart -> NodePool/EC2NodeClass.

Each node pool and each network has a manifest of its own (construct ID after its name), so
that removing it from the config deletes its objects: CloudFormation deletes the removed
resource, and the handler's Delete is `kubectl delete` of its objects. An update of a shared
manifest would leave them: the handler's `kubectl apply --prune -l <label>` prunes only
kubectl's default list of kinds, which holds no custom resource (k8s.io/kubectl v0.35
pkg/util/prune/prune.go, defaultNamespacedPruneResources). These manifests Create with
`overwrite` (`kubectl apply`), so one that takes over objects a cluster already has (deployed by
the shared manifest of an earlier version) adopts them instead of failing on AlreadyExists; the
shared manifests keep their construct IDs as inventories (charts NodePoolInventoryChart and
NetworkInventoryChart), so that upgrade updates them rather than deleting them with every
pool's and network's objects (docs/operations.md, "How an update is applied").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import cdk8s
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from cdk_constructs.kubectl_annotation import check_annotation_sizes
from charts.cleartaints import ClearTaintsChart, ClearTaintsProps
from charts.karpenter_node_pool import (
    KarpenterNodePoolChart,
    KarpenterNodePoolProps,
    NodeOverlayChart,
    NodePoolInventoryChart,
)
from charts.multus import MultusChart, MultusProps
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps
from charts.multus_pod_ips_monitoring import MonitoringProps, MultusPodIpsMonitoringChart
from charts.network_attachments import (
    NetworkAttachmentsChart,
    NetworkAttachmentsProps,
    NetworkInventoryChart,
)
from charts.sample_workloads import SampleWorkloadsChart, SampleWorkloadsProps
from charts.whereabouts import WhereaboutsChart, WhereaboutsProps


@dataclass(frozen=True)
class ClusterWorkloadsProps:
    """The cluster, the Karpenter release the NodePool waits for, and the props of every chart.

    karpenter_release: NodePool/EC2NodeClass need its CRDs and webhook-free API.
    node_pools: every pool's NodePool and EC2NodeClass, a chart (one manifest) per pool.
    pod_ips: None when no network assigns addresses per pod.
    monitoring: the agents' PodMonitor, alerts and dashboard; None unless
    monitoring.prometheus_operator (their kinds need the operator's CRDs).
    sample_workloads: None when the sample workloads are not enabled."""

    cluster: eks.Cluster
    karpenter_release: Construct
    multus: MultusProps
    whereabouts: WhereaboutsProps
    network_attachments: NetworkAttachmentsProps
    clear_taints: ClearTaintsProps
    pod_ips: MultusPodIpsProps | None
    monitoring: MonitoringProps | None
    node_pools: Sequence[KarpenterNodePoolProps]
    sample_workloads: SampleWorkloadsProps | None


class ClusterWorkloads(Construct):
    """Deploys the in-cluster charts (Multus, Whereabouts, NADs, cleartaints, NodePool...)."""

    def __init__(self, scope: Construct, construct_id: str, props: ClusterWorkloadsProps) -> None:
        super().__init__(scope, construct_id)
        self._cluster = props.cluster
        self._charts = cdk8s.App()
        # Every manifest (they live under the cluster construct, not under this one).
        self.manifests: list[eks.KubernetesManifest] = []
        multus = self._deploy(MultusChart(self._charts, "multus", props.multus))
        self._deploy(WhereaboutsChart(self._charts, "whereabouts", props.whereabouts))
        #: The NAD namespace (if the app creates it) and the inventory of every network's NADs.
        self.network_attachments = self._deploy(
            NetworkInventoryChart(self._charts, "network-attachments", props.network_attachments),
        )
        #: One manifest per network (and per network and removable AZ): its NADs.
        self.network_manifests = [
            self._deploy(
                NetworkAttachmentsChart(
                    self._charts,
                    f"network-attachments-{key}",
                    props.network_attachments.of_manifest(key),
                ),
                after=[multus, self.network_attachments],  # the NAD CRD, the namespace
                overwrite=True,
            )
            for key in props.network_attachments.manifests
        ]
        self._deploy(ClearTaintsChart(self._charts, "cleartaints", props.clear_taints))
        if props.pod_ips is not None:
            self._deploy(MultusPodIpsChart(self._charts, "multus-pod-ips", props.pod_ips))
        if props.monitoring is not None:
            self._deploy(
                MultusPodIpsMonitoringChart(
                    self._charts, "multus-pod-ips-monitoring", props.monitoring
                )
            )
        #: The inventory of every pool's Karpenter objects.
        self.node_pool = self._deploy(
            NodePoolInventoryChart(self._charts, "karpenter-node-pool", props.node_pools)
        )
        #: One manifest per pool: its NodePool and EC2NodeClass; and one per pool with extended
        #: resources: its NodeOverlay (an update that drops it could not prune it).
        self.node_pools = [
            self._deploy(
                KarpenterNodePoolChart(
                    self._charts, f"karpenter-node-pool-{pool.node_pool_name}", [pool]
                ),
                after=[props.karpenter_release],
                overwrite=True,
            )
            for pool in props.node_pools
        ]
        self.node_overlays = [
            self._deploy(
                NodeOverlayChart(
                    self._charts, f"karpenter-node-overlay-{pool.node_pool_name}", pool
                ),
                after=[props.karpenter_release],  # the NodeOverlay CRD
                overwrite=True,  # adopts the NodeOverlay of a pool manifest before this one
            )
            for pool in props.node_pools
            if pool.extended_resources
        ]
        if props.sample_workloads is not None:
            self._deploy(
                SampleWorkloadsChart(self._charts, "sample-workloads", props.sample_workloads),
                after=self.network_manifests,  # pods name their NADs in an annotation
            )

    def _deploy(
        self,
        chart: cdk8s.Chart,
        after: Sequence[Construct] | None = None,
        *,
        overwrite: bool = False,
    ) -> eks.KubernetesManifest:
        objects = chart.to_json()
        # kubectl stores each object in an annotation the API server caps at 256 KiB.
        check_annotation_sizes(chart.node.id, objects)
        # What Cluster.add_cdk8s_chart makes (the same scope and ID), with `overwrite`.
        manifest = eks.KubernetesManifest(
            self._cluster,
            chart.node.id,
            cluster=cast(eks.ICluster, self._cluster),  # jsii's Cluster implements ICluster
            manifest=objects,
            overwrite=overwrite,
        )
        for dependency in after or []:
            manifest.node.add_dependency(dependency)
        self.manifests.append(manifest)
        return manifest
