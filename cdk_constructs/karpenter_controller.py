"""Karpenter: node role, controller IAM through EKS Pod Identity, interruption queue, Helm charts.

CRDs come from the separate `karpenter-crd` chart, installed first at the same version: Helm
installs a chart's crds/ folder only on first install and never upgrades it, whereas CRDs that
are templates of their own chart are upgraded with every version bump.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Duration, Stack, Validations
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs.karpenter_controller_policy import (
    ControllerScope,
    controller_statements,
    wildcard_reason,
)
from cdk_constructs.karpenter_interruption_queue import KarpenterInterruptionQueue
from cdk_constructs.nag_findings import finding_text
from cdk_constructs.system_node_group import DedicatedNodes
from config.images import ImageRef

CHART_REPOSITORY = "oci://public.ecr.aws/karpenter"
CONTROLLER_CHART = "karpenter"
CRD_CHART = "karpenter-crd"
SERVICE_ACCOUNT = "karpenter"
# Karpenter's reference node role minus AmazonEKS_CNI_Policy: the VPC CNI has its own role.
NODE_POLICIES = {
    "AmazonEKSWorkerNodePolicy": "kubelet's EC2 Describe* calls and "
    "eks-auth:AssumeRoleForPodIdentity for the Pod Identity agent",
    "AmazonEC2ContainerRegistryPullOnly": "kubelet pulls add-on and workload images from ECR "
    "(read-only)",
    "AmazonSSMManagedInstanceCore": "SSM Session Manager access to the nodes instead of SSH, "
    "as in Karpenter's reference node role",
}
# Waiting for the controller's rollout makes a broken install fail the deployment (and roll
# back) instead of surfacing later as NodePools that never launch anything.
CONTROLLER_ROLLOUT_TIMEOUT = Duration.minutes(10)


@dataclass(frozen=True)
class KarpenterControllerProps:
    """cluster_name: the literal name (IAM condition keys contain it).
    controller_nodes: where the controller runs (the system node group's label and taint).
    region: the literal region (the controller cannot read it from IMDS, see values).
    reserved_enis: ENIs per node that pods cannot use (settings.reservedENIs: the Multus ENIs).
    node_overlay: turn on the alpha nodeOverlay feature gate (a pool's NodeOverlay advertises
    its nodes' hugepages); off, the controller runs as the chart's defaults have it.
    controller_image: a mirror of the controller image; None keeps the chart's pinned one."""

    cluster: eks.ICluster
    cluster_name: str
    region: str
    version: str
    namespace: str
    replicas: int
    controller_cpu: str
    controller_memory: str
    controller_nodes: DedicatedNodes
    spot_service_linked_role: bool
    reserved_enis: int = 0
    node_overlay: bool = False
    controller_image: ImageRef | None = None


class KarpenterController(Construct):
    """Karpenter's controller: IAM role, Pod Identity association and the pinned Helm release."""

    def __init__(
        self, scope: Construct, construct_id: str, props: KarpenterControllerProps
    ) -> None:
        super().__init__(scope, construct_id)
        self.node_role = self._node_role(props)
        self.interruption = KarpenterInterruptionQueue(self, "Interruption")
        self.controller_role = self._controller_role(props)
        pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=props.cluster.cluster_name,
            namespace=props.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.controller_role.role_arn,
        )
        if props.spot_service_linked_role:
            iam.CfnServiceLinkedRole(
                self,
                "SpotServiceLinkedRole",
                aws_service_name="spot.amazonaws.com",
                description="Lets EC2 launch and manage Spot Instances that Karpenter requests",
            )
        self.crds = eks.HelmChart(
            self,
            "Crds",
            cluster=props.cluster,
            repository=f"{CHART_REPOSITORY}/{CRD_CHART}",
            chart=CRD_CHART,
            release=CRD_CHART,
            version=props.version,
            namespace=props.namespace,
        )
        self.release = eks.HelmChart(
            self,
            "Controller",
            cluster=props.cluster,
            repository=f"{CHART_REPOSITORY}/{CONTROLLER_CHART}",
            chart=CONTROLLER_CHART,
            release=CONTROLLER_CHART,
            version=props.version,
            namespace=props.namespace,
            # The CRDs belong to the karpenter-crd release above.
            skip_crds=True,
            wait=True,
            timeout=CONTROLLER_ROLLOUT_TIMEOUT,
            values=_controller_values(props, self.interruption.queue.queue_name),
        )
        # Credentials (agent + association) must exist before the controller pods start.
        self.release.node.add_dependency(
            self.crds, pod_identity, props.cluster.eks_pod_identity_agent
        )

    def _node_role(self, props: KarpenterControllerProps) -> iam.Role:
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Nodes that Karpenter launches for EKS {props.cluster_name}",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_POLICIES
            ],
        )
        Validations.of(role).acknowledge(
            *(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                    f"policy/{policy}]",
                    reason=f"{policy} on the Karpenter node role: {reason}.",
                )
                for policy, reason in NODE_POLICIES.items()
            )
        )
        eks.AccessEntry(
            self,
            "NodeAccess",
            cluster=props.cluster,
            principal=role.role_arn,
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
            access_policies=[],
        )
        return role

    def _controller_role(self, props: KarpenterControllerProps) -> iam.Role:
        stack = Stack.of(self)
        scope = ControllerScope(
            partition=stack.partition,
            region=stack.region,
            account=stack.account,
            cluster_name=props.cluster_name,
            cluster_arn=props.cluster.cluster_arn,
            node_role_arn=self.node_role.role_arn,
            interruption_queue_arn=self.interruption.queue.queue_arn,
        )
        statements = controller_statements(scope)
        role = iam.Role(
            self,
            "ControllerRole",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description=f"Karpenter controller of EKS {props.cluster_name} (EKS Pod Identity)",
            inline_policies={"KarpenterController": iam.PolicyDocument(statements=statements)},
        )
        wildcards = sorted({r for statement in statements for r in statement.resources if "*" in r})
        Validations.of(role).acknowledge(
            *(
                Acknowledgment(
                    id=f"AwsSolutions::AwsSolutions-IAM5[Resource::{finding_text(self, resource)}]",
                    reason=f"Karpenter controller: {wildcard_reason(resource)}.",
                )
                for resource in wildcards
            )
        )
        return role


def _controller_values(props: KarpenterControllerProps, queue_name: str) -> dict[str, Any]:
    nodes = props.controller_nodes
    controller: dict[str, Any] = {
        # Nodes allow one IMDS hop, which pods do not get: without this the controller would
        # ask IMDS for its region and fail.
        "env": [{"name": "AWS_REGION", "value": props.region}],
        "resources": {
            "requests": {"cpu": props.controller_cpu, "memory": props.controller_memory},
            "limits": {"memory": props.controller_memory},
        },
    }
    if props.controller_image:
        controller["image"] = props.controller_image.helm_values()
    settings: dict[str, Any] = {
        "clusterName": props.cluster_name,
        "interruptionQueue": queue_name,
        # The chart passes it on as the RESERVED_ENIS environment variable (a string).
        "reservedENIs": str(props.reserved_enis),
    }
    if props.node_overlay:
        # Only this gate: Helm merges it into the chart's featureGates, the others keep their
        # defaults. Without it Karpenter ignores NodeOverlays; with it, every pool's instance
        # types wait for the overlay controller's first pass, so apps without one stay as is.
        settings["featureGates"] = {"nodeOverlay": True}
    return {
        "settings": settings,
        "replicas": props.replicas,
        "podDisruptionBudget": {"name": CONTROLLER_CHART, "maxUnavailable": 1},
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, nodes.toleration],
        # Replaces the chart's default affinity, so its two rules are restated: never on a
        # Karpenter-launched node, one replica per host. Ours adds: only on the system nodes.
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"},
                                nodes.node_selector_requirement,
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname"}
                ]
            },
        },
        "controller": controller,
    }
