"""Optional sample workloads (the seed's scale-out test): one multitool Deployment per AZ and
node pool with Multus networks.

Each pod is pinned to its AZ and to Karpenter nodes that attach its networks (their
multus.network/<network> labels) and asks Multus for those networks' attachments in that AZ.
The large default requests make every replica need its own node, so scaling a Deployment
exercises Karpenter, the ENI bootstrap and cleartaints end to end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cdk8s
import cdk8s_plus_28 as kplus
from constructs import Construct

from charts.building_blocks import resources, select_pods, toleration
from config.node_labels import (
    DEFAULT_NODE_POOL_NAME,
    KARPENTER_NODE_LABEL_KEY,
    NETWORK_LABEL_VALUE,
    NodeTaint,
    network_label,
    pool_object_name,
)

MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"


@dataclass(frozen=True)
class ZoneWorkload:
    """availability_zone: where the pods run.
    network_attachment_names: NADs (in the chart's namespace) to attach, in interface order.
    networks: the Multus networks of those NADs; the pods only land on nodes labelled with each.
    pool: the node pool whose nodes attach them (names the Deployment).
    tolerations: that pool's taints, which the pods tolerate."""

    availability_zone: str
    network_attachment_names: Sequence[str]
    networks: Sequence[str] = ()
    pool: str = DEFAULT_NODE_POOL_NAME
    tolerations: Sequence[NodeTaint] = ()


@dataclass(frozen=True)
class SampleWorkloadsProps:
    """namespace: of the Deployments, and of the NADs they name.
    image: a network-multitool image (ping, curl, dig, ip, tcpdump; the seed's tool image).
    cpu_millis / memory_mib: requests and limits of each pod (seed: 2 CPUs, 2 GiB)."""

    namespace: str
    workloads: Sequence[ZoneWorkload]
    image: str
    replicas: int = 1
    cpu_millis: int = 2000
    memory_mib: int = 2048


def deployment_name(availability_zone: str, pool: str = DEFAULT_NODE_POOL_NAME) -> str:
    return f"{pool_object_name('multitool', pool)}-{availability_zone}"


class SampleWorkloadsChart(cdk8s.Chart):
    """One multitool Deployment per workload (zone and pool), with its Multus interfaces."""

    def __init__(self, scope: Construct, construct_id: str, props: SampleWorkloadsProps) -> None:
        super().__init__(scope, construct_id)
        for workload in props.workloads:
            _deployment(self, props, workload)


def _deployment(scope: Construct, props: SampleWorkloadsProps, workload: ZoneWorkload) -> None:
    name = deployment_name(workload.availability_zone, workload.pool)
    deployment = kplus.Deployment(
        scope,
        name,
        metadata=cdk8s.ApiObjectMetadata(name=name, namespace=props.namespace),
        replicas=props.replicas,
        select=False,
        # The image runs nginx as root on port 80, as it does in the seed.
        security_context=kplus.PodSecurityContextProps(ensure_non_root=False),
    )
    select_pods(deployment, {"app": name})
    deployment.pod_metadata.add_annotation(
        MULTUS_NETWORKS_ANNOTATION, ", ".join(workload.network_attachment_names)
    )
    deployment.scheduling.attract(
        kplus.Node.labeled(
            kplus.NodeLabelQuery.is_("topology.kubernetes.io/zone", workload.availability_zone),
            kplus.NodeLabelQuery.exists(KARPENTER_NODE_LABEL_KEY),
            *(
                kplus.NodeLabelQuery.is_(network_label(network), NETWORK_LABEL_VALUE)
                for network in workload.networks
            ),
        )
    )
    for taint in workload.tolerations:
        deployment.scheduling.tolerate(kplus.Node.tainted(toleration(taint)))
    deployment.add_container(
        name="multitool",
        image=props.image,
        image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
        resources=resources(
            cpu_millis=props.cpu_millis,
            cpu_limit_millis=props.cpu_millis,
            memory_mib=props.memory_mib,
            memory_limit_mib=props.memory_mib,
        ),
        security_context=kplus.ContainerSecurityContextProps(
            ensure_non_root=False,
            read_only_root_filesystem=False,
            allow_privilege_escalation=False,
        ),
    )
