"""EksCluster on a bare Stack: KMS-encrypted secrets, every control-plane log type, a private
endpoint unless public CIDRs are given, API-only auth and access entries for the admins."""

from __future__ import annotations

import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from config.eks_addons import pinned_versions
from tests.helpers import bare_eks_cluster, bare_stack, sub_notation

SUBNET_IDS = ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
ADMIN = "arn:aws:iam::111111111111:role/Admin"
PUBLIC_CIDRS = ["203.0.113.0/24"]
# EKS control-plane log types (EKS API: LogType enum).
ALL_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def _template(public_access_cidrs: list[str] | None) -> Template:
    stack = bare_stack()
    bare_eks_cluster(
        stack,
        subnet_ids=SUBNET_IDS,
        public_access_cidrs=public_access_cidrs,
        admin_principal_arns=[ADMIN],
        core_dns_tolerations=[
            {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
        ],
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def private() -> Template:
    return _template(None)


@pytest.fixture(scope="module")
def public() -> Template:
    return _template(PUBLIC_CIDRS)


def test_secrets_are_encrypted_with_a_rotated_kms_key(private: Template) -> None:
    template = private
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    (key_id,) = template.find_resources("AWS::KMS::Key")
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "EncryptionConfig": [
                {"Provider": {"KeyArn": {"Fn::GetAtt": [key_id, "Arn"]}}, "Resources": ["secrets"]}
            ]
        },
    )


def test_every_control_plane_log_type_is_enabled(private: Template) -> None:
    cluster = private.find_resources("AWS::EKS::Cluster")
    (props,) = (c["Properties"] for c in cluster.values())
    enabled = props["Logging"]["ClusterLogging"]["EnabledTypes"]
    assert sorted(t["Type"] for t in enabled) == sorted(ALL_LOG_TYPES)


@pytest.mark.parametrize(
    ("retention", "days"),
    [(logs.RetentionDays.SIX_MONTHS, 180), (logs.RetentionDays.TWO_YEARS, 731)],
)
def test_control_plane_log_group_is_created_with_the_given_retention(
    retention: logs.RetentionDays, days: int
) -> None:
    stack = bare_stack()
    bare_eks_cluster(stack, control_plane_log_retention=retention)
    Template.from_stack(stack).has_resource_properties(
        "AWS::Logs::LogGroup",
        {"LogGroupName": "/aws/eks/eks-bare/cluster", "RetentionInDays": days},
    )


def test_endpoint_is_private_only_without_public_cidrs(private: Template) -> None:
    private.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {
                    "EndpointPrivateAccess": True,
                    "EndpointPublicAccess": False,
                    "SubnetIds": SUBNET_IDS,
                }
            )
        },
    )


def test_public_endpoint_accepts_only_the_given_cidrs(public: Template) -> None:
    public.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {
                    "EndpointPrivateAccess": True,
                    "EndpointPublicAccess": True,
                    "PublicAccessCidrs": PUBLIC_CIDRS,
                }
            )
        },
    )


def test_api_only_auth_without_creator_admin_nor_self_managed_addons(private: Template) -> None:
    private.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "Name": "eks-bare",
            "Version": "1.34",
            "AccessConfig": Match.object_like(
                {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False}
            ),
            "BootstrapSelfManagedAddons": False,
        },
    )


def test_admin_gets_cluster_admin_access_entry(private: Template) -> None:
    entries = private.find_resources(
        "AWS::EKS::AccessEntry", {"Properties": {"PrincipalArn": ADMIN}}
    )
    (entry,) = entries.values()
    (policy,) = entry["Properties"]["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"}
    # EKS access policy ARNs: arn:<partition>:eks::aws:cluster-access-policy/<name>.
    assert sub_notation(policy["PolicyArn"]) == (
        "arn:${AWS::Partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )


def test_vpc_cni_uses_its_own_pod_identity_role(private: Template) -> None:
    private.has_resource_properties(
        "AWS::EKS::Addon",
        {
            "AddonName": "vpc-cni",
            "PodIdentityAssociations": [
                {"ServiceAccount": "aws-node", "RoleArn": Match.any_value()}
            ],
        },
    )
    private.has_resource_properties(
        "AWS::EKS::Addon",
        {
            "AddonName": "coredns",
            "ConfigurationValues": Match.serialized_json(
                {"tolerations": [Match.object_like({"key": "k", "effect": "NoSchedule"})]}
            ),
        },
    )


def test_every_addon_runs_the_version_its_props_pin(private: Template) -> None:
    # The cluster's own eks-pod-identity-agent add-on included: aws-cdk-lib creates it without
    # a version prop.
    pinned = pinned_versions("1.34", {})
    versions = {
        addon["Properties"]["AddonName"]: addon["Properties"].get("AddonVersion")
        for addon in private.find_resources("AWS::EKS::Addon").values()
    }
    assert versions == {
        "vpc-cni": pinned.vpc_cni,
        "kube-proxy": pinned.kube_proxy,
        "coredns": pinned.coredns,
        "eks-pod-identity-agent": pinned.pod_identity_agent,
    }
