"""The Lambda functions in the VPC run in a security group CloudFormation owns, not in the
EKS-managed cluster security group.

Sources: EKS deletes its cluster security group asynchronously with the cluster, and ENIs still
using it (Lambda's outlive their functions) leave it behind and block the VPC's deletion
(aws/aws-cdk#18650, aws/aws-k8s-tester#416); aws-cdk-lib's aws-eks-v2 KubectlProvider puts its
handler and its provider framework function in that group unless security groups are given
(aws-eks-v2/lib/kubectl-provider.ts, `props.cluster.clusterSecurityGroup`). Security groups do
not filter DNS to the Route 53 Resolver (Amazon VPC user guide, "Security group rules"), so
HTTPS is all the functions need.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SynthesizedApp
from tests.helpers import logical_id, resources

CLUSTER_SECURITY_GROUP = {"Fn::GetAtt": ["EksClusterB2BDED5B", "ClusterSecurityGroupId"]}
HTTPS = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}


@pytest.fixture(scope="module")
def cluster(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.cluster)


@pytest.fixture(scope="module")
def group_id(cluster: dict[str, Any]) -> str:
    return logical_id(cluster, "AWS::EC2::SecurityGroup", "EksApiClients")


def in_vpc_functions(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        key: function
        for key, function in resources(cluster, "AWS::Lambda::Function").items()
        if "VpcConfig" in function["Properties"]
    }


def test_every_function_in_the_vpc_uses_the_group_cloudformation_owns(
    cluster: dict[str, Any], group_id: str
) -> None:
    functions = in_vpc_functions(cluster)
    # the kubectl handler, its provider framework function and the teardown's isComplete
    assert sorted(functions) == [
        logical_id(cluster, "AWS::Lambda::Function", "EksClusterKubectlProviderHandler"),
        logical_id(cluster, "AWS::Lambda::Function", "EksClusterKubectlProviderframeworkonEvent"),
        logical_id(cluster, "AWS::Lambda::Function", "TeardownIsComplete"),
    ]
    for function in functions.values():
        groups = function["Properties"]["VpcConfig"]["SecurityGroupIds"]
        assert groups == [{"Fn::GetAtt": [group_id, "GroupId"]}]
        assert CLUSTER_SECURITY_GROUP not in groups


def test_the_group_sends_only_https(cluster: dict[str, Any], group_id: str) -> None:
    group = cluster["Resources"][group_id]["Properties"]
    # AWS APIs and CloudFormation's response URL through the NAT gateways; no allow-all rule.
    (anywhere,) = group["SecurityGroupEgress"]
    assert {k: v for k, v in anywhere.items() if k != "Description"} == {
        **HTTPS,
        "CidrIp": "0.0.0.0/0",
    }
    assert "SecurityGroupIngress" not in group
    (to_api_server,) = resources(cluster, "AWS::EC2::SecurityGroupEgress").values()
    assert (
        to_api_server["Properties"].items()
        >= {
            **HTTPS,
            "GroupId": {"Fn::GetAtt": [group_id, "GroupId"]},
            "DestinationSecurityGroupId": CLUSTER_SECURITY_GROUP,
        }.items()
    )


def test_the_api_server_accepts_https_from_the_group(
    cluster: dict[str, Any], group_id: str
) -> None:
    ingress = [
        r["Properties"]
        for r in resources(cluster, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == CLUSTER_SECURITY_GROUP
    ]
    assert len(ingress) == 1
    assert (
        ingress[0].items()
        >= {
            **HTTPS,
            "SourceSecurityGroupId": {"Fn::GetAtt": [group_id, "GroupId"]},
        }.items()
    )


def test_functions_are_created_after_the_rules_and_deleted_before_them(
    cluster: dict[str, Any],
) -> None:
    rules = set(resources(cluster, "AWS::EC2::SecurityGroupEgress")) | {
        key
        for key, r in resources(cluster, "AWS::EC2::SecurityGroupIngress").items()
        if r["Properties"]["GroupId"] == CLUSTER_SECURITY_GROUP
    }
    functions = in_vpc_functions(cluster)
    handler = logical_id(cluster, "AWS::Lambda::Function", "EksClusterKubectlProviderHandler")
    teardown = logical_id(cluster, "AWS::Lambda::Function", "TeardownIsComplete")
    for key in (handler, teardown):
        assert rules <= set(functions[key]["DependsOn"]), key
    # The framework function (and through it every kubectl resource) names the handler.
    framework = logical_id(cluster, "AWS::Lambda::Function", "EksClusterKubectlProviderframework")
    variables = functions[framework]["Properties"]["Environment"]["Variables"]
    assert {"Fn::GetAtt": [handler, "Arn"]} in variables.values()
