"""Teardown of what Karpenter and the node bootstrap create outside CloudFormation.

A custom resource whose delete (handler: karpenter_teardown_handler/index.py) removes the
NodePools and EC2NodeClasses through the Kubernetes API, waits for Karpenter to terminate its
nodes, terminates what no NodeClaim accounts for, sweeps the leaked ENIs of the node bootstrap
(Multus) and of the VPC CNI, and fails listing what is left once the bound runs out.
custom_resources.Provider polls isComplete, so the wait is not limited by Lambda's 15 minutes.

The handler reaches the API server like the kubectl handler does: from the node subnets, in the
security group CloudFormation owns for the cluster's API clients (the endpoint may be private or
CIDR-restricted; see cdk_constructs/api_clients_security_group.py), authenticated through
an access entry whose Kubernetes group this construct's ClusterRole binds: list and delete
NodePools and EC2NodeClasses, list NodeClaims, nothing else. NodePool deletion therefore does
not depend on the kubectl handler, which logs and swallows delete errors.

Whoever adds it must make it depend on everything the teardown needs alive (controller, node
role and its access entry, in-cluster charts): CloudFormation deletes dependents first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Acknowledgment, CustomResource, Duration, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs import custom_resource_kit as kit
from cdk_constructs.api_clients_security_group import ApiClientsSecurityGroup
from cdk_constructs.nag_findings import finding_text
from config.custom_resource_timing import (
    TEARDOWN_FUNCTION_TIMEOUT_SECONDS,
    TEARDOWN_POLL_INTERVAL_SECONDS,
    teardown_service_timeout_seconds,
)

HANDLER_DIR = Path(__file__).parent / "karpenter_teardown_handler"
RESOURCE_TYPE = "Custom::KarpenterTeardown"
KUBERNETES_GROUP = "karpenter-teardown"
# After the handler's own deadline: two more polls, so its FAILED answer (listing what is left)
# reaches CloudFormation before the framework's generic "Operation timed out".
FRAMEWORK_GRACE_MINUTES = 1
# Tags Karpenter puts on its instances (its controller policy requires them; its deletion
# statement, and ours, condition on these two).
KARPENTER_NODEPOOL_TAG = "karpenter.sh/nodepool"
KARPENTER_CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
# What the VPC CNI puts on every ENI it creates (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go:
# eniNodeTagKey, eniClusterTagKey when aws-node has CLUSTER_NAME, eniDescriptionPrefix).
VPC_CNI_INSTANCE_TAG = "node.k8s.amazonaws.com/instance_id"
VPC_CNI_CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
VPC_CNI_DESCRIPTION_PREFIX = "aws-K8S-"


@dataclass(frozen=True)
class KarpenterTeardownProps:
    """cluster_name: literal name (IAM conditions); api_clients: the security group the in-VPC
    function runs in (HTTPS to the API server); cluster_tag_key / eni_network_tag_key: the
    node bootstrap's ENI tag keys; timeout_minutes: the bound after which the delete fails;
    force_after_minutes: when EC2 termination stops waiting for Karpenter's drain."""

    cluster: eks.Cluster
    cluster_name: str
    node_subnets: Sequence[ec2.ISubnet]
    api_clients: ApiClientsSecurityGroup
    cluster_tag_key: str
    eni_network_tag_key: str
    timeout_minutes: int
    force_after_minutes: int


class KarpenterTeardown(Construct):
    """On delete: no NodeClaim, EC2NodeClass, Karpenter instance or available ENI of the
    cluster (Multus or VPC CNI) is left."""

    def __init__(self, scope: Construct, construct_id: str, props: KarpenterTeardownProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        log_group = kit.log_group(self, "Logs")
        on_event = self._function("OnEvent", "index.on_event", log_group, in_vpc=False)
        self.is_complete = self._function("IsComplete", "index.is_complete", log_group, in_vpc=True)
        props.api_clients.precede(self.is_complete)
        self._grant_ec2_cleanup(self.is_complete)
        self.access = self._kubernetes_access(self.is_complete)
        provider = kit.provider(
            self,
            on_event=on_event,
            logs_to=log_group,
            waiter=kit.Waiter(
                is_complete=self.is_complete,
                query_interval=Duration.seconds(TEARDOWN_POLL_INTERVAL_SECONDS),
                total_timeout=Duration.minutes(props.timeout_minutes + FRAMEWORK_GRACE_MINUTES),
            ),
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type=RESOURCE_TYPE,
            service_timeout=Duration.seconds(
                teardown_service_timeout_seconds(props.timeout_minutes)
            ),
            properties={
                "ClusterName": props.cluster.cluster_name,
                "ClusterEndpoint": props.cluster.cluster_endpoint,
                "ClusterCertificateAuthority": props.cluster.cluster_certificate_authority_data,
                "TimeoutMinutes": str(props.timeout_minutes),
                "ForceAfterMinutes": str(props.force_after_minutes),
                # the handler filters on the tags the IAM statements below condition on
                "KarpenterClusterTagKey": self._karpenter_cluster_tag,
                "NodePoolTagKey": KARPENTER_NODEPOOL_TAG,
                "MultusClusterTagKey": props.cluster_tag_key,
                "MultusNetworkTagKey": props.eni_network_tag_key,
                "VpcCniClusterTagKey": VPC_CNI_CLUSTER_TAG,
                "VpcCniInstanceTagKey": VPC_CNI_INSTANCE_TAG,
                "VpcCniDescriptionPrefix": VPC_CNI_DESCRIPTION_PREFIX,
            },
        )
        self.resource.node.add_dependency(*self.access)
        # Its polls run on four policies of the isComplete role alone: deleted beside the
        # resource, they would leave every poll UnauthorizedOperation until the delete fails.
        kit.hold_provider(self.resource, provider)
        kit.acknowledge_provider_findings(self, provider)
        self._acknowledge_findings()

    def _function(
        self, construct_id: str, handler: str, log_group: logs.ILogGroup, *, in_vpc: bool
    ) -> lambda_.Function:
        props = self._props
        return kit.handler_function(
            self,
            construct_id,
            code=HANDLER_DIR,
            handler=handler,
            timeout=Duration.seconds(TEARDOWN_FUNCTION_TIMEOUT_SECONDS),
            description=f"Karpenter/Multus teardown of EKS {props.cluster_name}",
            logs_to=log_group,
            placement=kit.VpcPlacement(
                props.cluster.vpc, props.node_subnets, props.api_clients.security_group
            )
            if in_vpc
            else None,
        )

    def _grant_ec2_cleanup(self, function: lambda_.Function) -> None:
        props = self._props
        stack = Stack.of(self)
        cluster_tag = f"aws:ResourceTag/{props.cluster_tag_key}"

        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="DescribeWhatIsLeft",
                actions=["ec2:DescribeInstances", "ec2:DescribeNetworkInterfaces"],
                resources=["*"],
                conditions={"StringEquals": {"aws:RequestedRegion": stack.region}},
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="TerminateKarpenterInstancesOfThisCluster",
                actions=["ec2:TerminateInstances"],
                resources=[self._any_ec2("instance")],
                # the conditions of Karpenter's own deletion statement
                conditions={
                    "StringEquals": {f"aws:ResourceTag/{self._karpenter_cluster_tag}": "owned"},
                    "StringLike": {f"aws:ResourceTag/{KARPENTER_NODEPOOL_TAG}": "*"},
                },
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="DeleteMultusEnisOfThisCluster",
                actions=["ec2:DeleteNetworkInterface"],
                resources=[self._any_ec2("network-interface")],
                conditions={
                    "StringEquals": {cluster_tag: props.cluster_name},
                    "Null": {f"aws:ResourceTag/{props.eni_network_tag_key}": "false"},
                },
            )
        )
        function.add_to_role_policy(
            iam.PolicyStatement(
                sid="DeleteVpcCniEnisOfThisCluster",
                actions=["ec2:DeleteNetworkInterface"],
                resources=[self._any_ec2("network-interface")],
                conditions={
                    "StringEquals": {f"aws:ResourceTag/{VPC_CNI_CLUSTER_TAG}": props.cluster_name},
                    "Null": {f"aws:ResourceTag/{VPC_CNI_INSTANCE_TAG}": "false"},
                },
            )
        )

    @property
    def _karpenter_cluster_tag(self) -> str:
        return f"{KARPENTER_CLUSTER_TAG_PREFIX}{self._props.cluster_name}"

    def _any_ec2(self, resource: str) -> str:
        return Stack.of(self).format_arn(service="ec2", resource=resource, resource_name="*")

    def _kubernetes_access(self, function: lambda_.Function) -> list[Construct]:
        """An access entry in KUBERNETES_GROUP and the RBAC that group gets, nothing more."""
        cluster = self._props.cluster
        role = function.role
        assert role is not None
        entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[KUBERNETES_GROUP],
        )
        rbac = cluster.add_manifest(
            "KarpenterTeardownRbac",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": KUBERNETES_GROUP},
                "rules": [
                    {
                        "apiGroups": ["karpenter.sh"],
                        "resources": ["nodepools"],
                        "verbs": ["list", "delete"],
                    },
                    {"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["list"]},
                    {
                        "apiGroups": ["karpenter.k8s.aws"],
                        "resources": ["ec2nodeclasses"],
                        "verbs": ["list", "delete"],
                    },
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": KUBERNETES_GROUP},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": KUBERNETES_GROUP,
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": KUBERNETES_GROUP,
                    }
                ],
            },
        )
        return [entry, rbac]

    def _acknowledge_findings(self) -> None:
        Validations.of(self).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:DescribeInstances and ec2:DescribeNetworkInterfaces have no "
                "resource-level permissions; limited to this region.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5"
                f"[Resource::{finding_text(self, self._any_ec2('instance'))}]",
                reason="Karpenter's instance IDs are not known in advance; only instances tagged "
                "with this cluster's name and a Karpenter NodePool may be terminated.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5"
                f"[Resource::{finding_text(self, self._any_ec2('network-interface'))}]",
                reason="Leaked ENI IDs are not known in advance; only ENIs the node bootstrap "
                "(Multus) or the VPC CNI tagged for this cluster may be deleted.",
            ),
        )
