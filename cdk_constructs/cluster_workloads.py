"""The in-cluster half of Multus: the cdk8s charts, deployed through the cluster in order.

Each chart becomes one KubernetesManifest custom resource. Dependencies are only the ones the
API server needs (a CRD before its custom resources, Karpenter's controller before its node
pool), so every other manifest is applied in parallel and the critical path stays the Karpenter
chain: CRD chart -> controller chart -> NodePool/EC2NodeClass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cdk8s
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from charts.cleartaints import ClearTaintsChart, ClearTaintsProps
from charts.karpenter_node_pool import KarpenterNodePoolChart, KarpenterNodePoolProps
from charts.multus import MultusChart, MultusProps
from charts.multus_pod_ips import MultusPodIpsChart, MultusPodIpsProps
from charts.multus_pod_ips_monitoring import MonitoringProps, MultusPodIpsMonitoringChart
from charts.network_attachments import NetworkAttachmentsChart, NetworkAttachmentsProps
from charts.sample_workloads import SampleWorkloadsChart, SampleWorkloadsProps
from charts.whereabouts import WhereaboutsChart, WhereaboutsProps


@dataclass(frozen=True)
class ClusterWorkloadsProps:
    """The cluster, the Karpenter release the NodePool waits for, and the props of every chart.

    karpenter_release: NodePool/EC2NodeClass need its CRDs and webhook-free API.
    node_pools: every pool's NodePool and EC2NodeClass, all in one chart (one manifest).
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
        self.network_attachments = self._deploy(
            NetworkAttachmentsChart(self._charts, "network-attachments", props.network_attachments),
            after=[multus],  # the NetworkAttachmentDefinition CRD
        )
        self._deploy(ClearTaintsChart(self._charts, "cleartaints", props.clear_taints))
        if props.pod_ips is not None:
            self._deploy(MultusPodIpsChart(self._charts, "multus-pod-ips", props.pod_ips))
        if props.monitoring is not None:
            self._deploy(
                MultusPodIpsMonitoringChart(
                    self._charts, "multus-pod-ips-monitoring", props.monitoring
                )
            )
        self.node_pool = self._deploy(
            KarpenterNodePoolChart(self._charts, "karpenter-node-pool", props.node_pools),
            after=[props.karpenter_release],
        )
        if props.sample_workloads is not None:
            self._deploy(
                SampleWorkloadsChart(self._charts, "sample-workloads", props.sample_workloads),
                after=[self.network_attachments],  # pods name their NADs in an annotation
            )

    def _deploy(
        self, chart: cdk8s.Chart, after: list[Construct] | None = None
    ) -> eks.KubernetesManifest:
        manifest = self._cluster.add_cdk8s_chart(chart.node.id, chart, ingress_alb=False)
        for dependency in after or []:
            manifest.node.add_dependency(dependency)
        self.manifests.append(manifest)
        return manifest
