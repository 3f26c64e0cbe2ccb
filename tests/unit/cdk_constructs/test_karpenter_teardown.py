"""The teardown custom resource in the synthesized cluster stack: delete order, access, bounds."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from cdk_constructs import karpenter_teardown
from cdk_constructs.karpenter_teardown_handler import index as handler
from config import parse_config
from config.model import TEARDOWN_TIMEOUT_LIMIT_MINUTES as LONGEST_TEARDOWN
from node_bootstrap.renderer import CLUSTER_TAG_KEY, NETWORK_TAG_KEY
from stacks import cluster_props
from tests.conftest import SynthesizedApp
from tests.helpers import bare_eks_cluster, bare_stack, joined_text, resources

KUBECTL_RESOURCES = ("Custom::AWSCDK-EKS-KubernetesResource", "Custom::AWSCDK-EKS-HelmChart")


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


def teardown(template: dict[str, Any]) -> dict[str, Any]:
    (resource,) = resources(template, "Custom::KarpenterTeardown").values()
    return resource


def test_deleted_before_everything_the_drain_needs(cluster: dict[str, Any]) -> None:
    """CloudFormation deletes a resource before what it depends on: the teardown runs while
    the controller, node role, its access entry and ENI policy, and every chart still exist."""
    depends_on = set(teardown(cluster)["DependsOn"])
    kubectl_resources = set(resources(cluster, *KUBECTL_RESOURCES))
    assert kubectl_resources <= depends_on  # every manifest and Helm release, its RBAC included
    node_role = {
        k for k in resources(cluster, "AWS::IAM::Role") if k.startswith("KarpenterNodeRole")
    }
    access_entries = {
        k
        for k in resources(cluster, "AWS::EKS::AccessEntry")
        if k.startswith(("KarpenterNodeAccess", "TeardownAccessEntry"))
    }
    eni_policy = {
        k for k in resources(cluster, "AWS::IAM::Policy") if k.startswith("MultusEniPolicy")
    }
    system_nodes = set(resources(cluster, "AWS::EKS::Nodegroup"))
    assert len(node_role) == len(eni_policy) == len(system_nodes) == 1
    assert len(access_entries) == 2  # the node role's and the teardown's own
    assert node_role | access_entries | eni_policy | system_nodes <= depends_on


def test_cluster_stack_goes_before_the_network_stack(default_app: SynthesizedApp) -> None:
    """Multus subnets and security group are deleted only after the ENI sweep has run."""
    assert default_app.stage.network in default_app.stage.cluster.dependencies


def test_bound_and_force_time_come_from_the_config(cluster: dict[str, Any]) -> None:
    properties = teardown(cluster)["Properties"]
    assert (properties["TimeoutMinutes"], properties["ForceAfterMinutes"]) == ("30", "20")
    (machine,) = resources(cluster, "AWS::StepFunctions::StateMachine").values()
    definition = "".join(
        p for p in machine["Properties"]["DefinitionString"]["Fn::Join"][1] if isinstance(p, str)
    )
    # 30 minutes plus the one-minute grace, polled every 30 s
    assert '"IntervalSeconds":30,"MaxAttempts":62' in definition


def test_cloudformation_waits_for_the_handlers_own_answer(cluster: dict[str, Any]) -> None:
    """CloudFormation waits at most ServiceTimeout (template reference,
    AWS::CloudFormation::CustomResource; 3600 s when unset), whatever the Provider's total
    timeout. The handler fixes its deadline when onEvent starts and reports what is left from
    the first poll past it: the template's ServiceTimeout must cover the bound, one poll
    interval, one isComplete run and the framework's activation wait before onEvent (300 s,
    aws-cdk-lib custom-resources runtime outbound.ts)."""
    resource = teardown(cluster)["Properties"]
    (machine,) = resources(cluster, "AWS::StepFunctions::StateMachine").values()
    interval = int(
        re.findall(
            r'"IntervalSeconds":(\d+)', joined_text(machine["Properties"]["DefinitionString"])
        )[0]
    )
    (is_complete,) = [
        r
        for k, r in resources(cluster, "AWS::Lambda::Function").items()
        if k.startswith("TeardownIsComplete")
    ]
    answer = (
        300 + int(resource["TimeoutMinutes"]) * 60 + interval + is_complete["Properties"]["Timeout"]
    )
    assert answer <= int(resource["ServiceTimeout"]) <= 3600


def bare_teardown(timeout_minutes: int) -> None:
    stack = bare_stack()
    eks_cluster = bare_eks_cluster(stack)
    props = cluster_props.karpenter_teardown_props(
        parse_config({}),
        cluster=eks_cluster.cluster,
        node_subnets=eks_cluster.cluster.vpc.private_subnets,
        api_clients=eks_cluster.api_clients,
    )
    karpenter_teardown.KarpenterTeardown(
        stack, "Teardown", dataclasses.replace(props, timeout_minutes=timeout_minutes)
    )


@pytest.mark.parametrize(
    ("minutes", "accepted"), [(LONGEST_TEARDOWN, True), (LONGEST_TEARDOWN + 1, False)]
)
def test_the_configs_longest_bound_is_the_longest_cloudformation_takes(
    minutes: int, accepted: bool
) -> None:
    """aws-cdk-lib's CustomResource refuses a serviceTimeout over 3600 s (core/lib/
    custom-resource.ts): the config's limit is exactly the last bound that synthesizes."""
    if accepted:
        bare_teardown(minutes)
    else:
        with pytest.raises(RuntimeError, match="between 1 and 3600 seconds"):
            bare_teardown(minutes)


def test_kubernetes_access_is_limited_to_what_the_teardown_does(cluster: dict[str, Any]) -> None:
    (entry,) = [
        r
        for r in resources(cluster, "AWS::EKS::AccessEntry").values()
        if r["Properties"].get("KubernetesGroups")
    ]
    assert entry["Properties"]["KubernetesGroups"] == ["karpenter-teardown"]
    assert "AccessPolicies" not in entry["Properties"]
    rbac = next(
        r
        for k, r in resources(cluster, KUBECTL_RESOURCES[0]).items()
        if "KarpenterTeardownRbac" in k
    )
    manifest = rbac["Properties"]["Manifest"]  # the kubectl handler takes a JSON string
    assert '"verbs":["list","delete"]' in manifest
    assert '"resources":["nodeclaims"],"verbs":["list"]' in manifest
    assert "cluster-admin" not in manifest


def test_ec2_rights_are_scoped_to_this_clusters_tags(cluster: dict[str, Any]) -> None:
    statements = {
        s.get("Sid"): s
        for policy in resources(cluster, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    }
    terminate = statements["TerminateKarpenterInstancesOfThisCluster"]
    assert terminate["Condition"] == {
        "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/eks-karpenterwithmultus": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    delete = statements["DeleteMultusEnisOfThisCluster"]
    assert delete["Action"] == "ec2:DeleteNetworkInterface"
    assert delete["Condition"] == {
        "StringEquals": {"aws:ResourceTag/eks:eks-cluster-name": "eks-karpenterwithmultus"},
        "Null": {"aws:ResourceTag/multus-eni/network": "false"},
    }
    vpc_cni = statements["DeleteVpcCniEnisOfThisCluster"]
    assert vpc_cni["Action"] == "ec2:DeleteNetworkInterface"
    assert vpc_cni["Condition"] == {
        "StringEquals": {
            "aws:ResourceTag/cluster.k8s.amazonaws.com/name": "eks-karpenterwithmultus"
        },
        "Null": {"aws:ResourceTag/node.k8s.amazonaws.com/instance_id": "false"},
    }


def test_is_complete_runs_where_the_kubectl_handler_does(
    cluster: dict[str, Any],
) -> None:
    """Node subnets and the API clients' security group (test_api_clients_security_group)."""
    functions = resources(cluster, "AWS::Lambda::Function")
    (is_complete,) = [r for k, r in functions.items() if k.startswith("TeardownIsComplete")]
    (kubectl,) = [
        r for k, r in functions.items() if k.startswith("EksClusterKubectlProviderHandler")
    ]
    assert is_complete["Properties"]["VpcConfig"] == kubectl["Properties"]["VpcConfig"]
    assert is_complete["Properties"]["Handler"] == "index.is_complete"


def test_the_handler_gets_its_tag_keys_from_the_template(cluster: dict[str, Any]) -> None:
    """One source for each tag key: the handler reads them from its properties, which hold the
    node bootstrap's keys (node_bootstrap.renderer), Karpenter's instance tags and the VPC
    CNI's ENI tags and description (amazon-vpc-cni-k8s pkg/awsutils/awsutils.go: eniNodeTagKey,
    eniClusterTagKey, eniDescriptionPrefix)."""
    properties = teardown(cluster)["Properties"]
    keys = handler.TagKeys.of(properties)
    assert keys == handler.TagKeys(
        karpenter_cluster="kubernetes.io/cluster/eks-karpenterwithmultus",
        node_pool="karpenter.sh/nodepool",
        multus_cluster=CLUSTER_TAG_KEY,
        multus_network=NETWORK_TAG_KEY,
        vpc_cni_cluster="cluster.k8s.amazonaws.com/name",
        vpc_cni_instance="node.k8s.amazonaws.com/instance_id",
        vpc_cni_description_prefix="aws-K8S-",
    )
    statements = {
        s.get("Sid"): s
        for policy in resources(cluster, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    }
    conditioned = {
        key.removeprefix("aws:ResourceTag/")
        for sid in (
            "TerminateKarpenterInstancesOfThisCluster",
            "DeleteMultusEnisOfThisCluster",
            "DeleteVpcCniEnisOfThisCluster",
        )
        for condition in statements[sid]["Condition"].values()
        for key in condition
    }
    assert conditioned == {
        keys.karpenter_cluster,
        keys.node_pool,
        keys.multus_cluster,
        keys.multus_network,
        keys.vpc_cni_cluster,
        keys.vpc_cni_instance,
    }


def test_a_poll_ends_inside_the_functions_timeout(cluster: dict[str, Any]) -> None:
    """A Lambda timeout is an error, which the Provider framework answers FAILED
    (provider-framework runtime/framework.ts, invokeUserFunction: FunctionError): the slowest
    poll (every Kubernetes request at its timeout, then one EC2 call timing out on each attempt,
    which ends the poll) must leave room in the function's timeout."""
    functions = resources(cluster, "AWS::Lambda::Function")
    (is_complete,) = [r for k, r in functions.items() if k.startswith("TeardownIsComplete")]
    config = handler.EC2_CONFIG
    attempts = config.retries["total_max_attempts"]  # the first request and the retries
    # standard retry mode: a random backoff of at most 2**(attempt-1) s between attempts
    backoff = sum(2**attempt for attempt in range(attempts - 1))
    one_ec2_call = attempts * (config.connect_timeout + config.read_timeout) + backoff
    # per poll: list NodePools and EC2NodeClasses, delete one of each, list NodeClaims and
    # EC2NodeClasses
    kubernetes = 6 * handler.HTTP_TIMEOUT_SECONDS
    assert one_ec2_call + kubernetes < is_complete["Properties"]["Timeout"]
