"""KarpenterController on a bare Stack (with the EksCluster it installs into): Pod Identity for
its service account, the interruption queue wired into role and values, charts pinned to the
given version, and settings.reservedENIs for the Multus ENIs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from cdk_constructs.karpenter_controller import KarpenterController, KarpenterControllerProps
from cdk_constructs.system_node_group import DedicatedNodes
from tests.helpers import bare_eks_cluster, bare_stack, joined_text

VERSION = "1.14.1"
NAMESPACE = "kube-system"
RESERVED_ENIS = 2
CONTROLLER_NODES = DedicatedNodes(key="example.com/role", value="karpenter")


@pytest.fixture(scope="module")
def template() -> Template:
    stack = bare_stack()
    eks_cluster = bare_eks_cluster(stack)
    KarpenterController(
        stack,
        "Karpenter",
        KarpenterControllerProps(
            cluster=eks_cluster.cluster_ref,
            cluster_name="eks-bare",
            region="us-west-2",
            version=VERSION,
            namespace=NAMESPACE,
            replicas=2,
            controller_cpu="500m",
            controller_memory="512Mi",
            controller_nodes=CONTROLLER_NODES,
            spot_service_linked_role=False,
            reserved_enis=RESERVED_ENIS,
        ),
    )
    return Template.from_stack(stack)


def _chart(template: Template, chart: str) -> Mapping[str, Any]:
    (resource,) = template.find_resources(
        "Custom::AWSCDK-EKS-HelmChart", {"Properties": {"Chart": chart}}
    ).values()
    return resource


def _controller_values(template: Template) -> Any:
    return json.loads(joined_text(_chart(template, "karpenter")["Properties"]["Values"]))


def _queue_id(template: Template) -> str:
    (queue_id,) = template.find_resources("AWS::SQS::Queue")
    return queue_id


def test_pod_identity_associates_the_controller_role_with_its_service_account(
    template: Template,
) -> None:
    (role_id,) = template.find_resources(
        "AWS::IAM::Role",
        {"Properties": {"Description": Match.string_like_regexp("Karpenter controller")}},
    )
    template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {
            "Namespace": NAMESPACE,
            "ServiceAccount": "karpenter",
            "RoleArn": {"Fn::GetAtt": [role_id, "Arn"]},
        },
    )
    # EKS Pod Identity: the pods.eks.amazonaws.com principal, AssumeRole + TagSession.
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "Description": Match.string_like_regexp("Karpenter controller"),
            "AssumeRolePolicyDocument": Match.object_like(
                {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                                }
                            )
                        ]
                    )
                }
            ),
        },
    )


def test_chart_values_use_the_service_account_the_association_names(template: Template) -> None:
    assert _controller_values(template)["serviceAccount"] == {"create": True, "name": "karpenter"}


def test_interruption_queue_is_named_in_values_and_readable_by_the_controller(
    template: Template,
) -> None:
    queue_id = _queue_id(template)
    values = _chart(template, "karpenter")["Properties"]["Values"]
    assert {"Fn::GetAtt": [queue_id, "QueueName"]} in values["Fn::Join"][1]
    assert _controller_values(template)["settings"]["interruptionQueue"] == "TOKEN"
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "Policies": Match.array_with(
                [
                    Match.object_like(
                        {
                            "PolicyDocument": Match.object_like(
                                {
                                    "Statement": Match.array_with(
                                        [
                                            Match.object_like(
                                                {
                                                    "Action": Match.array_with(
                                                        ["sqs:ReceiveMessage"]
                                                    ),
                                                    "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
                                                }
                                            )
                                        ]
                                    )
                                }
                            )
                        }
                    )
                ]
            )
        },
    )


def test_crd_and_controller_charts_are_pinned_to_the_given_version(template: Template) -> None:
    crds = _chart(template, "karpenter-crd")["Properties"]
    controller = _chart(template, "karpenter")["Properties"]
    for chart, properties in (("karpenter-crd", crds), ("karpenter", controller)):
        assert properties["Version"] == VERSION
        assert properties["Repository"] == f"oci://public.ecr.aws/karpenter/{chart}"
        assert properties["Namespace"] == NAMESPACE
    # CRDs come from karpenter-crd (upgraded with each version), not the controller's crds/.
    assert controller["SkipCrds"] is True
    assert controller["Wait"] is True


def test_controller_chart_waits_for_crds_and_pod_identity(template: Template) -> None:
    (crds_id,) = template.find_resources(
        "Custom::AWSCDK-EKS-HelmChart", {"Properties": {"Chart": "karpenter-crd"}}
    )
    (association_id,) = template.find_resources("AWS::EKS::PodIdentityAssociation")
    depends_on = _chart(template, "karpenter")["DependsOn"]
    assert crds_id in depends_on
    assert association_id in depends_on


def test_settings_reserve_the_multus_enis_and_name_the_cluster(template: Template) -> None:
    settings = _controller_values(template)["settings"]
    # The chart turns settings.reservedENIs into the RESERVED_ENIS env var: a string.
    assert settings["reservedENIs"] == str(RESERVED_ENIS)
    assert settings["clusterName"] == "eks-bare"


def test_controller_runs_only_on_the_dedicated_nodes(template: Template) -> None:
    values = _controller_values(template)
    assert CONTROLLER_NODES.toleration in values["tolerations"]
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert CONTROLLER_NODES.node_selector_requirement in term["matchExpressions"]
    assert {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"} in term["matchExpressions"]


def test_node_role_joins_as_ec2_linux_access_entry(template: Template) -> None:
    (role_id,) = template.find_resources(
        "AWS::IAM::Role",
        {"Properties": {"Description": Match.string_like_regexp("Nodes that Karpenter launches")}},
    )
    template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {"PrincipalArn": {"Fn::GetAtt": [role_id, "Arn"]}, "Type": "EC2_LINUX"},
    )
