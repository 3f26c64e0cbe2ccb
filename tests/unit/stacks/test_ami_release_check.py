"""The AMI release check in the synthesized cluster stack: what it reads, with which rights,
and that the EKS cluster and the NodePool wait for it."""

from __future__ import annotations

from typing import Any

import pytest

from cdk_constructs.ami_release_check import al2023_image_parameter
from config import parse_config
from tests.conftest import SynthesizedApp
from tests.helpers import logical_id, resources, waits_for
from tests.unit.stacks.test_cluster_stack import as_list
from tests.unit.stacks.test_cluster_workloads import manifest_with

SEED = parse_config({})


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


def check_resource(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = [
        (key, r)
        for key, r in template["Resources"].items()
        if r["Type"] == "Custom::AmiReleaseCheck"
    ]
    return logical_id, resource


def test_check_reads_the_parameter_of_the_pinned_alias_and_names_the_config_field(
    cluster: dict[str, Any],
) -> None:
    _, resource = check_resource(cluster)
    properties = resource["Properties"]
    assert properties["ParameterName"] == al2023_image_parameter(
        SEED.cluster.kubernetes_version, SEED.node_pools[0].ami_alias
    )
    assert properties["AmiAlias"] == SEED.node_pools[0].ami_alias == "al2023@v20261112"
    assert properties["KubernetesVersion"] == SEED.cluster.kubernetes_version
    assert properties["ConfigField"] == "node_pools[0] (multus).ami_alias"


def test_handler_may_read_exactly_that_public_parameter(cluster: dict[str, Any]) -> None:
    parameter = al2023_image_parameter(
        SEED.cluster.kubernetes_version, SEED.node_pools[0].ami_alias
    )
    ssm_statements = [
        statement
        for policy in resources(cluster, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(action.startswith("ssm:") for action in as_list(statement["Action"]))
    ]
    (statement,) = ssm_statements
    assert statement["Action"] == "ssm:GetParameter"
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                f":ssm:{SEED.region}::parameter{parameter}",
            ],
        ]
    }


def test_node_pool_waits_for_the_check(cluster: dict[str, Any]) -> None:
    logical_id, _ = check_resource(cluster)
    _, depends_on = manifest_with(cluster, "NodePool")
    assert logical_id in depends_on


def test_the_cluster_waits_for_the_check(cluster: dict[str, Any]) -> None:
    """EKS user guide, "Update existing cluster to new Kubernetes version": once started, an
    upgrade cannot be paused or stopped, and a cluster cannot be downgraded. So the check must
    succeed before CloudFormation updates the AWS::EKS::Cluster's Version: a stale ami_alias then
    fails the deploy while the control plane is untouched, and the rollback has nothing to undo.
    The check itself must not wait for the cluster (that would be a cycle, and no gate)."""
    check_id, _ = check_resource(cluster)
    cluster_id = logical_id(cluster, "AWS::EKS::Cluster", "EksCluster")
    assert check_id in waits_for(cluster, cluster_id)
    assert cluster_id not in waits_for(cluster, check_id)
