"""The EKS cluster: Kubernetes version, endpoint access, teardown bounds and the system node
group."""

from __future__ import annotations

from typing import Annotated, ClassVar, get_args

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from config import eks_addons, instance_types, patterns
from config.cluster_access import (
    RENAMED_KEYS,
    AdminPrincipalArn,
    check_public_access_cidrs,
)
from config.coercion import number_as_version
from config.custom_resource_timing import TEARDOWN_MARGIN_MINUTES
from config.logs import LogRetention
from config.model.base import (
    TEARDOWN_TIMEOUT_LIMIT_MINUTES,
    Cidr,
    Gp3SizeGib,
    InstanceType,
    KubernetesVersion,
    StrictModel,
    unit,
)


class SystemNodeGroupConfig(StrictModel):
    """The managed node group for system pods and the Karpenter controller."""

    renamed_keys: ClassVar[dict[str, str]] = {
        "disk_size_gib": "root_volume_gib (in GiB, like node_pools[].root_volume_gib)"
    }

    instance_types: list[InstanceType] = Field(
        default=["c5.large"], min_length=1, description="x86_64 instance types of the group."
    )
    min_size: int = Field(
        default=1,
        ge=0,
        json_schema_extra=unit("nodes", "node"),
        description="Fewest nodes of the group.",
    )
    desired_size: int = Field(
        default=2,
        ge=0,
        json_schema_extra=unit("nodes", "node"),
        description="Nodes the group runs; at least karpenter.replicas.",
    )
    max_size: int = Field(
        default=3,
        ge=1,
        json_schema_extra=unit("nodes", "node"),
        description="Most nodes of the group.",
    )
    root_volume_gib: Gp3SizeGib = Field(
        default=20,
        ge=20,
        json_schema_extra=unit("GiB"),
        description="Encrypted gp3 root volume of each system node, in GiB.",
    )

    @model_validator(mode="after")
    def _x86_instance_types(self) -> SystemNodeGroupConfig:
        # The group runs the AL2023 x86_64 AMI; EKS rejects arm64 types for it, and no EKS AMI
        # runs on Mac instances (macOS on Dedicated Hosts). config/instance_types.py knows
        # the architecture of each family, whatever its name (mac2.metal is arm64).
        families = {t: instance_types.family_of(t) for t in self.instance_types}
        arm = [t for t, f in families.items() if instance_types.architecture(f) == "arm64"]
        if arm:
            raise ValueError(
                f"instance_types: {arm} are arm64; the system node group runs the "
                "AL2023 x86_64 AMI, so pick x86_64 types (for example c5.large)"
            )
        mac = [t for t, f in families.items() if instance_types.is_macos_only(f)]
        if mac:
            raise ValueError(
                f"instance_types: {mac} are Mac instances (macOS on Dedicated Hosts), which no "
                "EKS AMI runs on; pick x86_64 Linux types (for example c5.large)"
            )
        return self

    @model_validator(mode="after")
    def _sizes_ordered(self) -> SystemNodeGroupConfig:
        if not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"need min_size <= desired_size <= max_size, got {self.min_size} / "
                f"{self.desired_size} / {self.max_size}"
            )
        return self


class ClusterConfig(StrictModel):
    """The EKS cluster: name, version, API endpoint access, admins, system node group."""

    renamed_keys = RENAMED_KEYS

    name: str | None = Field(
        default=None,
        pattern=patterns.CLUSTER_NAME.regex,
        description="EKS cluster name (default: eks-<name>, so each app name gets its own).",
    )
    kubernetes_version: Annotated[
        KubernetesVersion, BeforeValidator(number_as_version(get_args(KubernetesVersion)))
    ] = Field(
        default="1.35",
        description="Kubernetes version of the control plane and nodes (default: a minor in "
        "EKS standard support, of the EKS release calendar in config/kubernetes_support.py, "
        "which the pinned Karpenter supports; synth warns once it is past its EKS standard "
        "support).",
    )
    public_access_cidrs: list[Cidr] | None = Field(
        default=None,
        description="None: private API endpoint only. A list: also a public endpoint that "
        "accepts only these CIDRs.",
    )
    admin_principal_arns: list[AdminPrincipalArn] = Field(
        default=[],
        description="IAM role or user ARNs given cluster-admin through access entries.",
    )
    control_plane_availability_zones: list[str] | None = Field(
        default=None,
        description="AZs of the node subnets the EKS control plane places its network "
        "interfaces in (at least two). Fixed when the cluster is created: EKS accepts new "
        "control-plane subnets only in the AZs it was created with. Unset: every entry of "
        "availability_zones; set it to those AZs before you add one to availability_zones.",
    )
    addon_versions: dict[str, str] = Field(
        default={},
        description="Versions of EKS add-ons to run instead of the ones config/eks_addons.py "
        "pins for cluster.kubernetes_version, by add-on: vpc-cni, kube-proxy, coredns, "
        'eks-pod-identity-agent (for example {"vpc-cni": "v1.23.2-eksbuild.1"}; `aws eks '
        "describe-addon-versions` lists them). vpc-cni must be v1.23.0 or newer: older ones "
        "lose count of the Multus ENIs (aws/amazon-vpc-cni-k8s#3544).",
    )
    system_node_group: SystemNodeGroupConfig = SystemNodeGroupConfig()
    control_plane_log_retention: LogRetention = Field(
        default="ONE_YEAR",
        description="How long CloudWatch Logs keeps the control-plane logs (API server, audit, "
        "authenticator, controller manager, scheduler: incident evidence). Below ONE_YEAR the "
        "log group fails AWS Control Tower's CT.CLOUDWATCH.PR.2.",
    )
    teardown_timeout_minutes: int = Field(
        default=30,
        ge=10,
        json_schema_extra=unit("minutes", "minute"),
        description="How long `cdk destroy` waits for Karpenter's nodes and the Multus ENIs to "
        f"go before it fails listing what is left; at most {TEARDOWN_TIMEOUT_LIMIT_MINUTES}: "
        "CloudFormation waits at most an hour for a custom resource, and the Provider "
        f"framework needs {TEARDOWN_MARGIN_MINUTES:g} minutes of it.",
    )

    @field_validator("public_access_cidrs")
    @classmethod
    def _public_access(cls, cidrs: list[str] | None) -> list[str] | None:
        return check_public_access_cidrs(cidrs)

    @field_validator("kubernetes_version")
    @classmethod
    def _addons_pinned_for_the_minor(cls, version: str) -> str:
        problem = eks_addons.coverage_problem(version)
        if problem:
            raise ValueError(problem)
        return version

    @field_validator("addon_versions")
    @classmethod
    def _addon_overrides(cls, overrides: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        # kubernetes_version comes first: absent here only if it was refused itself.
        problems = eks_addons.override_problems(overrides, info.data.get("kubernetes_version"))
        if problems:
            raise ValueError("\n".join(problems))
        return overrides

    @property
    def pinned_addon_versions(self) -> eks_addons.EksAddonVersions:
        """The add-on versions the cluster runs: config/eks_addons.py's for its minor, with
        addon_versions' overrides."""
        return eks_addons.pinned_versions(self.kubernetes_version, self.addon_versions)

    @field_validator("admin_principal_arns")
    @classmethod
    def _distinct_admins(cls, arns: list[str]) -> list[str]:
        duplicates = sorted({arn for arn in arns if arns.count(arn) > 1})
        if duplicates:
            # EKS allows one access entry per principal.
            raise ValueError(f"{duplicates} listed more than once; list each principal once")
        return arns
