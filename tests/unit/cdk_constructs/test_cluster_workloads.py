"""ClusterWorkloads on a bare Stack (with the EksCluster it deploys into): one manifest per
chart, and only the dependencies the API server needs (NADs after the Multus CRD, the NodePool
after the Karpenter release, sample pods after their NADs); everything else in parallel."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from cdk_constructs.cluster_workloads import ClusterWorkloads, ClusterWorkloadsProps
from charts.cleartaints import ClearTaintsNodes, ClearTaintsProps
from charts.multus import MultusProps
from charts.nad_cni_configs import (
    NetworkAttachment,
    cni_binaries,
    cni_host_files,
    whereabouts_range_and_gateway,
)
from charts.network_attachments import NetworkAttachmentsProps
from charts.whereabouts import WhereaboutsProps
from config import AppConfig
from config.images import ImagesConfig
from config.network_plan import network_attachment_name
from config.node_labels import NodeTaint
from stacks.cluster_props import node_pool_props, sample_workloads_props
from tests.helpers import BARE_AZS as AZS
from tests.helpers import bare_eks_cluster, bare_stack

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


class Built:
    """The template and the logical ID of each construct the tests name."""

    def __init__(self) -> None:
        self.stack = bare_stack()
        stack = self.stack
        cluster = bare_eks_cluster(stack).cluster
        self.release = cdk.CfnResource(stack, "KarpenterRelease", type="Custom::Stand-in")
        self.workloads = ClusterWorkloads(stack, "Workloads", _props(cluster, self.release))
        self.template = Template.from_stack(stack)

    def logical_id(self, construct: Any) -> str:
        (resource,) = [c for c in construct.node.find_all() if isinstance(c, cdk.CfnResource)]
        return self.stack.get_logical_id(resource)


def _attachments() -> list[NetworkAttachment]:
    attachments = []
    for az, subnet, reservation in zip(
        AZS, ["10.0.4.0/24", "10.0.5.0/24"], ["10.0.4.32/27", "10.0.5.32/27"], strict=True
    ):
        whereabouts_range, gateway = whereabouts_range_and_gateway(subnet, reservation)
        attachments.append(
            NetworkAttachment(
                name=network_attachment_name("multus1", az),
                master_interface="multus1",
                ipvlan_mode="l2",
                whereabouts_range=whereabouts_range,
                gateway=gateway,
            )
        )
    return attachments


def _props(cluster: eks.Cluster, release: cdk.CfnResource) -> ClusterWorkloadsProps:
    images = ImagesConfig()
    config = AppConfig()
    attachments = _attachments()
    taint = NodeTaint(key="example.com/role", value="system", effect="NoSchedule")
    return ClusterWorkloadsProps(
        cluster=cluster,
        karpenter_release=release,
        multus=MultusProps(region="us-west-2"),
        whereabouts=WhereaboutsProps(
            image=images.whereabouts.reference,
            reconciler_node_labels={"example.com/role": "system"},
            reconciler_tolerations=[taint],
        ),
        network_attachments=NetworkAttachmentsProps(
            namespace="default",
            attachments=attachments,
            networks={"multus1": [a.name for a in attachments]},
            manifests={"multus1": [a.name for a in attachments]},
        ),
        clear_taints=ClearTaintsProps(
            image=images.cleartaints.reference,
            pools=[
                ClearTaintsNodes(
                    cni_binaries=cni_binaries(attachments),
                    cni_files=cni_host_files(attachments),
                )
            ],
        ),
        pod_ips=None,
        monitoring=None,
        node_pools=[
            node_pool_props(
                config, config.node_pools[0], node_role_name="KarpenterNode", user_data="#!"
            )
        ],
        sample_workloads=sample_workloads_props(AppConfig()),
    )


@pytest.fixture(scope="module")
def built() -> Built:
    return Built()


def _depends_on(built: Built, manifest: Any) -> set[str]:
    resource: Mapping[str, Any] = built.template.to_json()["Resources"][built.logical_id(manifest)]
    return set(resource.get("DependsOn", []))


def test_one_manifest_per_enabled_chart_network_and_pool(built: Built) -> None:
    # multus, whereabouts, the NAD inventory, multus1's NADs, cleartaints, the pool inventory,
    # the pool's NodePool, sample workloads.
    assert len(built.workloads.manifests) == 8
    built.template.resource_count_is(MANIFEST, 8)
    assert len(built.workloads.network_manifests) == 1
    assert len(built.workloads.node_pools) == 1


def test_network_attachments_wait_for_the_multus_crd_and_their_namespace(built: Built) -> None:
    multus = built.workloads.manifests[0]
    (network,) = built.workloads.network_manifests
    assert {
        built.logical_id(multus),
        built.logical_id(built.workloads.network_attachments),
    } <= _depends_on(built, network)


def test_node_pool_waits_for_the_karpenter_release(built: Built) -> None:
    release = built.stack.get_logical_id(built.release)
    (node_pool,) = built.workloads.node_pools
    assert release in _depends_on(built, node_pool)


def test_sample_workloads_wait_for_their_network_attachments(built: Built) -> None:
    sample = built.workloads.manifests[-1]
    (network,) = built.workloads.network_manifests
    assert built.logical_id(network) in _depends_on(built, sample)


def test_per_network_and_per_pool_manifests_create_with_kubectl_apply(built: Built) -> None:
    """Overwrite: a Create that takes over objects the cluster already has (an upgrade from the
    shared manifests) adopts them; the shared ones, now inventories, keep kubectl create."""
    resources = built.template.to_json()["Resources"]
    for manifest in (*built.workloads.network_manifests, *built.workloads.node_pools):
        assert resources[built.logical_id(manifest)]["Properties"]["Overwrite"] is True
    for manifest in (built.workloads.network_attachments, built.workloads.node_pool):
        assert resources[built.logical_id(manifest)]["Properties"].get("Overwrite") in (None, False)


def test_independent_charts_do_not_wait_for_other_charts(built: Built) -> None:
    manifest_ids = {built.logical_id(m) for m in built.workloads.manifests}
    release = built.stack.get_logical_id(built.release)
    multus, whereabouts, _, _, cleartaints, *_ = built.workloads.manifests
    for manifest in (multus, whereabouts, cleartaints):
        assert not _depends_on(built, manifest) & (manifest_ids | {release})
