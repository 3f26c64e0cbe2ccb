"""What a deployed app leaves in AWS and in the cluster, rebuilt in the Karpenter box from the
app's synthesized templates: the emulator gets what the network stack and EKS would create
(the VPC with its node and Multus subnets, the Multus security groups, the cluster security
group, the node role, the interruption queue, the EKS cluster, the AMI alias's images), and
the cluster template's objects are resolved to those IDs (testing_support/iam_reference's
TemplateResolver), in CloudFormation's order of creation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config import AppConfig
from testing_support.cloudformation_order import StackOrder
from testing_support.cluster_box.control_plane import SERVICE_CIDR
from testing_support.iam_call_level import physical_ids, resolver
from testing_support.karpenter_box.aws import PublicParameters, publish_al2023_alias
from testing_support.multus_emulator import Ec2Emulator, PlannedVpc

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
#: Physical names the box gives the cluster stack's resources that Karpenter names by value.
NODE_ROLE_NAME = "karpenter-box-node-role"
QUEUE_NAME = "karpenter-box-interruption"


@dataclass(frozen=True)
class AppTemplates:
    """An app's config and its two synthesized templates, by stack name."""

    config: AppConfig
    network_stack: str
    cluster_stack: str
    templates: Mapping[str, dict[str, Any]]

    @classmethod
    def of_stage(cls, stage: Any, outdir: str) -> AppTemplates:
        """From a synthesized EnvironmentStage (its config and its two stacks' templates)."""
        templates = {
            stack.stack_name: json.loads((Path(outdir) / stack.template_file).read_text())
            for stack in (stage.network, stage.cluster)
        }
        return cls(stage.config, stage.network.stack_name, stage.cluster.stack_name, templates)

    @property
    def cluster(self) -> dict[str, Any]:
        return self.templates[self.cluster_stack]

    @property
    def network(self) -> dict[str, Any]:
        return self.templates[self.network_stack]

    def logical_ids(self, resource_type: str, contains: str = "") -> list[str]:
        return [
            logical_id
            for logical_id, resource in self.cluster["Resources"].items()
            if resource["Type"] == resource_type and contains in logical_id
        ]


@dataclass
class AppWorld:
    """The app's resources in the emulator and its cluster template resolved to them."""

    app: AppTemplates
    vpc: PlannedVpc
    ids: dict[str, str]
    images: dict[str, str] = field(default_factory=dict)

    @property
    def cluster_name(self) -> str:
        return self.app.config.cluster_name

    def manifests(self, app: AppTemplates | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
        """Each kubectl manifest of the cluster template (logical ID, its objects), in
        CloudFormation's creation order; of `app` (a later synth of the app, a day-2 change),
        resolved to this world's IDs, when given."""
        app = app or self.app
        template = app.cluster
        resolve = resolver(dict(app.templates), app.cluster_stack, self.ids).resolve
        return [
            (
                logical_id,
                json.loads(resolve(template["Resources"][logical_id]["Properties"]["Manifest"])),
            )
            for logical_id in StackOrder(template).creation_order
            if template["Resources"][logical_id]["Type"] == MANIFEST
        ]

    def helm_values(self, release: str) -> dict[str, Any]:
        """The resolved values of the cluster template's Helm release `release`."""
        resolve = resolver(dict(self.app.templates), self.app.cluster_stack, self.ids).resolve
        for resource in self.app.cluster["Resources"].values():
            properties = resource.get("Properties", {})
            if resource["Type"] == HELM_CHART and properties.get("Release") == release:
                return dict(json.loads(resolve(properties.get("Values", "{}"))))
        raise KeyError(f"the cluster template installs no Helm release {release}")

    def node_classes(self) -> list[dict[str, Any]]:
        return [
            o for _, objects in self.manifests() for o in objects if o["kind"] == "EC2NodeClass"
        ]


def synthesize_app(repo: Path, outdir: Path, config_file: str | None) -> AppTemplates:
    """The app of cdk.json's context (with `config_file`, as `-c config_file=...` gives it),
    synthesized into `outdir` as `cdk synth` would."""
    return synthesize_stage(repo, outdir, config_file)[0]


def synthesize_stage(
    repo: Path, outdir: Path, config_file: str | None
) -> tuple[AppTemplates, Path]:
    """As synthesize_app, with the stage's assembly folder (its assets: the kubectl handler's)."""
    import aws_cdk as cdk

    from app import build_app
    from stages.environment_stage import EnvironmentStage

    context = json.loads((repo / "cdk.json").read_text())["context"]
    if config_file:
        context["config_file"] = config_file
    app = cdk.App(outdir=str(outdir), context=context)
    build_app(app)
    app.synth()
    stages = [child for child in app.node.children if isinstance(child, EnvironmentStage)]
    if not stages:
        raise ValueError(f"{config_file}: a pipeline config; give one environment's config")
    return AppTemplates.of_stage(stages[0], stages[0].outdir), Path(stages[0].outdir)


def create_world(
    emulator: Ec2Emulator, parameters: PublicParameters, app: AppTemplates
) -> AppWorld:
    """Creates in the emulator what the app's stacks and EKS would, and returns the world."""
    config = app.config
    vpc = emulator.create_config_vpc(config)
    ids = physical_ids(app.network, vpc.vpc, config.name)
    (role,) = app.logical_ids("AWS::IAM::Role", "KarpenterNodeRole")
    (queue,) = app.logical_ids("AWS::SQS::Queue", "Interruption")
    ids[role] = NODE_ROLE_NAME
    ids[queue] = QUEUE_NAME
    emulator.moto_client("iam").create_role(
        RoleName=NODE_ROLE_NAME, AssumeRolePolicyDocument=json.dumps(_EC2_TRUST)
    )
    emulator.moto_client("sqs").create_queue(QueueName=QUEUE_NAME)
    world = AppWorld(app, vpc, ids)
    ec2 = emulator.ec2
    cluster_group = ec2.create_security_group(
        GroupName=f"eks-cluster-sg-{config.cluster_name}",
        Description="EKS created security group applied to ENI that is attached to EKS "
        "Control Plane master nodes, as well as any managed workloads.",
        VpcId=vpc.vpc.vpc_id,
    )["GroupId"]
    for node_class in world.node_classes():
        spec = node_class["spec"]
        for term in spec.get("subnetSelectorTerms", []):
            _tag(ec2, list(vpc.vpc.private_subnets.values()), term.get("tags", {}))
        for term in spec.get("securityGroupSelectorTerms", []):
            _tag(ec2, [cluster_group], term.get("tags", {}))
        for term in spec.get("amiSelectorTerms", []):
            family, _, version = str(term.get("alias", "")).partition("@")
            if family != "al2023":
                raise ValueError(f"the box publishes al2023 aliases only, not {term}")
            world.images = publish_al2023_alias(
                ec2, parameters, config.cluster.kubernetes_version, version
            )
    emulator.moto_client("eks").create_cluster(
        name=config.cluster_name,
        version=config.cluster.kubernetes_version,
        roleArn="arn:aws:iam::123456789012:role/karpenter-box-cluster",
        resourcesVpcConfig={"subnetIds": list(vpc.vpc.private_subnets.values())},
        kubernetesNetworkConfig={"serviceIpv4Cidr": SERVICE_CIDR},
    )
    return world


_EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def _tag(ec2: Any, resources: list[str], tags: Mapping[str, str]) -> None:
    if tags:
        ec2.create_tags(Resources=resources, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
