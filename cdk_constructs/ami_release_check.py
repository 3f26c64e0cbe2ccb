"""Deploy-time check that the pinned AL2023 AMI release exists for the cluster's Kubernetes
version.

Karpenter resolves the EC2NodeClass alias al2023@<release> through a public SSM parameter per
Kubernetes version, architecture and variant. When the release has no image for the cluster's
version, no node ever launches and nothing says why; this custom resource reads the same
parameter during the deploy and fails it, naming the config key, before the NodePool is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs import custom_resource_kit as kit

HANDLER_DIR = Path(__file__).parent / "ami_release_check_handler"
RESOURCE_TYPE = "Custom::AmiReleaseCheck"


def al2023_image_parameter(
    kubernetes_version: str, ami_alias: str, architecture: str = "x86_64"
) -> str:
    """The SSM parameter Karpenter v1.14 reads for a pinned AL2023 alias (standard variant;
    pkg/providers/amifamily/al2023.go, resolvePath)."""
    family, _, release = ami_alias.partition("@")
    if family != "al2023" or not release or release == "latest":
        raise ValueError(f"{ami_alias!r} is not a pinned al2023@<release> alias")
    name = f"amazon-eks-node-al2023-{architecture}-standard-{kubernetes_version}-{release}"
    return (
        f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/"
        f"{architecture}/standard/{name}/image_id"
    )


@dataclass(frozen=True)
class AmiReleaseCheckProps:
    """config_field: the config key the error message names (node_pool.ami_alias)."""

    kubernetes_version: str
    ami_alias: str
    config_field: str


class AmiReleaseCheck(Construct):
    """A custom resource whose create/update fails when the alias has no AMI for the version."""

    def __init__(self, scope: Construct, construct_id: str, props: AmiReleaseCheckProps) -> None:
        super().__init__(scope, construct_id)
        parameter = al2023_image_parameter(props.kubernetes_version, props.ami_alias)
        stack = Stack.of(self)
        # Public parameters live in no account: arn:<partition>:ssm:<region>::parameter/aws/...
        read = iam.PolicyStatement(
            actions=["ssm:GetParameter"],
            resources=[
                stack.format_arn(
                    service="ssm",
                    account="",
                    resource="parameter",
                    resource_name=parameter.lstrip("/"),
                )
            ],
        )
        self.resource = kit.checked_at_deploy(
            self,
            code=HANDLER_DIR,
            description="Fails the deploy when the pinned AL2023 AMI release lacks this "
            "Kubernetes version",
            statements=[read],
            resource_type=RESOURCE_TYPE,
            properties={
                "ParameterName": parameter,
                "AmiAlias": props.ami_alias,
                "KubernetesVersion": props.kubernetes_version,
                "ConfigField": props.config_field,
            },
        )
