"""The EKS control plane (aws_eks_v2), its kubectl provider, access entries and managed add-ons."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from aws_cdk import Acknowledgment, Annotations, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.api_clients_security_group import ApiClientsSecurityGroup
from cdk_constructs.nag_findings import finding_text
from cdk_constructs.removed_with_stack import AuditLogGroup
from config.cluster_access import access_warnings
from config.eks_addons import EksAddonVersions

# kubectl must be within one minor of the API server: one aws-cdk layer package per version
# (pinned in requirements.txt). Imported on demand, each package is a ~35 MB jsii bundle.
KUBECTL_LAYERS: Mapping[str, tuple[str, str]] = {
    "1.33": ("aws_cdk.lambda_layer_kubectl_v33", "KubectlV33Layer"),
    "1.34": ("aws_cdk.lambda_layer_kubectl_v34", "KubectlV34Layer"),
    "1.35": ("aws_cdk.lambda_layer_kubectl_v35", "KubectlV35Layer"),
    "1.36": ("aws_cdk.lambda_layer_kubectl_v36", "KubectlV36Layer"),
}

# AWS managed policies aws-cdk-lib attaches to the kubectl handler and its provider framework.
KUBECTL_HANDLER_POLICIES: Mapping[str, str] = {
    "AWSLambdaBasicExecutionRole": "Lets the kubectl handler and its provider framework write "
    "their own CloudWatch logs; aws-cdk-lib attaches it.",
    "AWSLambdaVPCAccessExecutionRole": "The kubectl functions run in the node subnets to reach "
    "the private API endpoint and need to manage their own ENIs there.",
    "AmazonEC2ContainerRegistryReadOnly": "The kubectl handler pulls Helm charts stored as OCI "
    "artifacts in ECR (read-only); aws-cdk-lib attaches it.",
    "AmazonElasticContainerRegistryPublicReadOnly": "The kubectl handler logs in to ECR Public "
    "to pull the Karpenter charts (read-only); aws-cdk-lib attaches it in the aws partition.",
}

ALL_CONTROL_PLANE_LOGS = [
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
]


def _endpoint_access(public_access_cidrs: Sequence[str] | None) -> eks.EndpointAccess:
    if public_access_cidrs is None:
        return eks.EndpointAccess.PRIVATE
    return eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*public_access_cidrs)


def kubectl_layer(scope: Construct, kubernetes_version: str) -> lambda_.ILayerVersion:
    module_name, class_name = KUBECTL_LAYERS[kubernetes_version]
    layer_class: Any = getattr(importlib.import_module(module_name), class_name)
    layer: lambda_.ILayerVersion = layer_class(scope, "KubectlLayer")
    return layer


@dataclass(frozen=True)
class EksClusterProps:
    """node_subnets: the private subnets of the nodes, one per AZ (the cluster's VPC view).
    control_plane_subnets: those of them the control-plane ENIs and the kubectl handler use;
    EKS accepts later subnet changes only within the AZs it was created with.
    Load balancers find their subnets by the kubernetes.io/role/(internal-)elb tags, so the
    public subnets need not be cluster subnets (control-plane ENIs then never land there).
    core_dns_tolerations: extra tolerations so CoreDNS can run on the tainted system nodes.
    addon_versions: the AddonVersion of each managed add-on (config/eks_addons.py pins them).
    public_access_cidrs: None for a private-only endpoint, else who may reach the public one.
    admin_principal_arns: IAM role/user ARNs given cluster-admin through access entries.
    control_plane_log_retention: how long the control-plane log group keeps its events.
    keep_control_plane_logs: whether destroy keeps that log group (the audit log).
    warn_without_admins: annotate for `cdk deploy` that nobody can use kubectl when
    admin_principal_arns is empty (false: the config acknowledged no-cluster-admins)."""

    cluster_name: str
    kubernetes_version: str
    vpc_id: str
    availability_zones: Sequence[str]
    node_subnets: Sequence[ec2.ISubnet]
    control_plane_subnets: Sequence[ec2.ISubnet]
    public_access_cidrs: Sequence[str] | None
    admin_principal_arns: Sequence[str]
    core_dns_tolerations: Sequence[Mapping[str, str]]
    addon_versions: EksAddonVersions
    control_plane_log_retention: logs.RetentionDays
    keep_control_plane_logs: bool
    warn_without_admins: bool = True


VPC_CNI_SERVICE_ACCOUNT = "aws-node"
VPC_CNI_POLICY = "AmazonEKS_CNI_Policy"
NO_ADMIN_WARNING_ID = "karpenter-multus:noClusterAdmin"


class EksCluster(Construct):
    """Private endpoint (public only for listed CIDRs), every control-plane log type,
    KMS-encrypted secrets, API-only authentication, and EKS-managed add-ons instead of the
    self-managed ones; the VPC CNI gets its own role through EKS Pod Identity."""

    def __init__(self, scope: Construct, construct_id: str, props: EksClusterProps) -> None:
        super().__init__(scope, construct_id)
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"Envelope encryption of Kubernetes secrets in EKS {props.cluster_name}",
            enable_key_rotation=True,
        )
        vpc = self._cluster_vpc(props)
        # The kubectl functions' own group, not the EKS-managed one (see the module it is in).
        self.api_clients = ApiClientsSecurityGroup(self, "ApiClients", vpc=vpc)
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=props.cluster_name,
            version=eks.KubernetesVersion.of(props.kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=list(props.control_plane_subnets))],
            endpoint_access=_endpoint_access(props.public_access_cidrs),
            cluster_logging=ALL_CONTROL_PLANE_LOGS,
            secrets_encryption_key=self.secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, props.kubernetes_version),
                security_groups=[self.api_clients.security_group],
            ),
            # Nodes come from our own node group and Karpenter, not from Auto Mode.
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            # Add-ons are EKS-managed below; self-managed copies would conflict with them.
            bootstrap_self_managed_addons=False,
            # Cluster admins are exactly the configured principal (plus the kubectl handler).
            bootstrap_cluster_creator_admin_permissions=False,
        )
        cfn_cluster = self.cluster.node.default_child
        assert isinstance(cfn_cluster, eks.CfnCluster)
        self.cfn_cluster = cfn_cluster
        # EKS writes control-plane logs to this group, creating it (forever, outside the stack)
        # unless it exists; created here first, it has a retention, and destroy keeps it only
        # as the config says (the audit log is an incident's evidence).
        self.cluster.node.add_dependency(
            AuditLogGroup(
                self,
                "ControlPlaneLogs",
                log_group_name=f"/aws/eks/{props.cluster_name}/cluster",
                retention=props.control_plane_log_retention,
                keep_on_destroy=props.keep_control_plane_logs,
            )
        )
        self.api_clients.reach_api_server(self.cluster.cluster_security_group_id)
        # Through the handler, every kubectl resource (its provider's framework function names the
        # handler) waits for the rules and is deleted while they still exist.
        self.api_clients.precede(self._kubectl_handler())
        self._hold_kubectl_provider()
        # jsii's Python stubs leave kubectl_provider_options off Cluster, so mypy cannot see that
        # it implements ICluster: consumers take this reference instead of casting themselves.
        self.cluster_ref = cast(eks.ICluster, self.cluster)
        self._grant_admins(props)
        # Every add-on at a pinned version, not EKS's default of the day (which differs between
        # accounts created weeks apart). The cluster's own (lazily created) agent add-on: every
        # Pod Identity user, ours and any ServiceAccount added later, shares this one instead of
        # adding a duplicate; aws-cdk-lib gives it no version prop, so its CfnAddon gets one.
        self.pod_identity_agent = self.cluster.eks_pod_identity_agent
        assert self.pod_identity_agent is not None
        agent = self.pod_identity_agent.node.default_child
        assert isinstance(agent, eks.CfnAddon)
        agent.addon_version = props.addon_versions.pod_identity_agent
        # vpc-cni and kube-proxy are DaemonSets: healthy with zero nodes, and nodes need them
        # to become Ready. CoreDNS is a Deployment: create it once nodes exist (see stack).
        self.node_networking_addons = [
            self._vpc_cni(props.addon_versions.vpc_cni),
            eks.Addon(
                self,
                "KubeProxy",
                cluster=self.cluster_ref,
                addon_name="kube-proxy",
                addon_version=props.addon_versions.kube_proxy,
            ),
        ]
        self.core_dns = eks.Addon(
            self,
            "CoreDns",
            cluster=self.cluster_ref,
            addon_name="coredns",
            addon_version=props.addon_versions.coredns,
            configuration_values={"tolerations": list(props.core_dns_tolerations)},
        )
        self._acknowledge_library_findings(props)

    def _grant_admins(self, props: EksClusterProps) -> None:
        for arn in props.admin_principal_arns:
            # Named after the principal, so reordering the list replaces no access entry.
            digest = hashlib.sha256(arn.encode()).hexdigest()[:12]
            self.cluster.grant_cluster_admin(f"Admin{digest}", arn)
        warnings = access_warnings(list(props.admin_principal_arns))
        for warning in warnings if props.warn_without_admins else []:
            # Shown by `cdk deploy`; app.py prints the same on every synth.
            Annotations.of(self).add_warning_v2(NO_ADMIN_WARNING_ID, warning)

    def _vpc_cni(self, version: str) -> eks.Addon:
        """vpc-cni with its own role: pods can no longer borrow ENI rights from the node role.

        The add-on owns the Pod Identity association for kube-system/aws-node; the agent add-on
        must exist first, or aws-node finds no credentials and nodes never become Ready.
        """
        self.vpc_cni_role = iam.Role(
            self,
            "VpcCniRole",
            assumed_by=iam.SessionTagsPrincipal(iam.ServicePrincipal("pods.eks.amazonaws.com")),
            description="VPC CNI (kube-system/aws-node) through EKS Pod Identity",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(VPC_CNI_POLICY)],
        )
        addon = eks.Addon(
            self, "VpcCni", cluster=self.cluster_ref, addon_name="vpc-cni", addon_version=version
        )
        cfn_addon = addon.node.default_child
        assert isinstance(cfn_addon, eks.CfnAddon)
        cfn_addon.pod_identity_associations = [
            eks.CfnAddon.PodIdentityAssociationProperty(
                role_arn=self.vpc_cni_role.role_arn, service_account=VPC_CNI_SERVICE_ACCOUNT
            )
        ]
        assert self.pod_identity_agent is not None
        addon.node.add_dependency(self.pod_identity_agent)
        Validations.of(self.vpc_cni_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                f"{VPC_CNI_POLICY}]",
                reason=f"{VPC_CNI_POLICY} on the VPC CNI's own role, usable only by the "
                "kube-system/aws-node service account (Pod Identity): it assigns pod IPs and "
                "manages the VPC CNI's ENIs on every node, which needs ENI rights on any ENI.",
            )
        )
        return addon

    def _cluster_vpc(self, props: EksClusterProps) -> ec2.IVpc:
        """The VPC as the cluster should see it: the node subnets are its only subnets.

        eks.Cluster tags every private subnet of its VPC for internal load balancers; handed the
        full VPC it would also tag the Multus subnets. The network stack already tags the node
        and public subnets, so the cluster gets this view and its tagging has nothing to do.
        """
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "ClusterVpc",
            vpc_id=props.vpc_id,
            availability_zones=list(props.availability_zones),
            private_subnet_ids=[subnet.subnet_id for subnet in props.node_subnets],
        )
        for subnet in vpc.private_subnets:
            Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "The cluster only places network interfaces in these subnets and never reads "
                "their route tables; the network stack owns the routes.",
            )
        return vpc

    def _acknowledge_library_findings(self, props: EksClusterProps) -> None:
        Annotations.of(self.cluster).acknowledge_warning(
            "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
            "The network stack tags the node subnets for internal load balancers (and the "
            "public subnets for internet-facing ones); Multus subnets must stay untagged.",
        )
        if props.public_access_cidrs is not None:
            Validations.of(self.cfn_cluster).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-EKS1",
                    reason="cluster.public_access_cidrs asks for a public API endpoint; it "
                    f"accepts only {', '.join(props.public_access_cidrs)}, and every call still "
                    "needs an IAM principal with an access entry.",
                )
            )
        Validations.of(self.cluster.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                "AmazonEKSClusterPolicy]",
                reason="AmazonEKSClusterPolicy is the AWS-maintained service policy the EKS "
                "control plane role must carry; it is versioned with EKS features.",
            )
        )
        self._acknowledge_kubectl_provider_findings()

    def _hold_kubectl_provider(self) -> None:
        """aws-eks-v2 makes every kubectl resource (manifest, Helm chart, patch) depend on the
        cluster's KubectlReadyBarrier (an SSM parameter); the barrier depending on the whole
        provider makes each of them wait for, and outlive, the framework function's invoke
        policy, which add_to_role_policy attaches as a resource nothing depends on."""
        barrier = self.cluster.node.find_child("KubectlReadyBarrier")
        barrier.node.add_dependency(self._kubectl_provider())

    def _kubectl_handler(self) -> lambda_.Function:
        handler = self._kubectl_provider().node.find_child("Handler")
        assert isinstance(handler, lambda_.Function)
        return handler

    def _kubectl_provider(self) -> eks.KubectlProvider:
        provider = self.cluster.kubectl_provider
        assert isinstance(provider, eks.KubectlProvider)
        return provider

    def _acknowledge_kubectl_provider_findings(self) -> None:
        """The kubectl handler and its provider framework are aws-cdk-lib's own functions."""
        provider = self._kubectl_provider()
        handler = self._kubectl_handler()
        stack = Stack.of(self)
        managed_policies = {
            finding_text(self, arn)
            for role in provider.node.find_all()
            if isinstance(role, iam.CfnRole)
            for arn in stack.resolve(role.managed_policy_arns)
        }
        Validations.of(provider).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-L1",
                reason="aws-cdk-lib chooses the kubectl handler's Python runtime to match the "
                "awscli and kubectl layers it ships; overriding it risks breaking them.",
            ),
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::"
                f"{finding_text(self, handler.function_arn)}:*]",
                reason="The provider framework may invoke any version of its own kubectl "
                "handler (<arn>:*) and nothing else.",
            ),
            *(
                Acknowledgment(
                    id=f"AwsSolutions::AwsSolutions-IAM4[Policy::{policy}]",
                    reason=next(
                        reason
                        for name, reason in KUBECTL_HANDLER_POLICIES.items()
                        if name in policy
                    ),
                )
                for policy in sorted(managed_policies)
            ),
        )
