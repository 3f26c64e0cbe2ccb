"""controller_statements with a literal scope: PassRole only for the node role and only to EC2,
the queue and cluster by ARN, region-limited reads, ownership tags on everything Karpenter
creates, and a written reason for every wildcard resource."""

from __future__ import annotations

from typing import Any

import pytest

from cdk_constructs.karpenter_controller_policy import (
    ControllerScope,
    controller_statements,
    wildcard_reason,
)

SCOPE = ControllerScope(
    partition="aws",
    region="us-west-2",
    account="111111111111",
    cluster_name="eks-bare",
    cluster_arn="arn:aws:eks:us-west-2:111111111111:cluster/eks-bare",
    node_role_arn="arn:aws:iam::111111111111:role/KarpenterNode",
    interruption_queue_arn="arn:aws:sqs:us-west-2:111111111111:interruption",
)


@pytest.fixture(scope="module")
def statements() -> list[dict[str, Any]]:
    return [statement.to_json() for statement in controller_statements(SCOPE)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _with_action(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in _as_list(s["Action"])]


def test_pass_role_covers_only_the_node_role_and_only_towards_ec2(
    statements: list[dict[str, Any]],
) -> None:
    (statement,) = _with_action(statements, "iam:PassRole")
    assert statement["Resource"] == SCOPE.node_role_arn
    passed_to = _as_list(statement["Condition"]["StringEquals"]["iam:PassedToService"])
    assert "ec2.amazonaws.com" in passed_to
    assert all(service.startswith("ec2.") for service in passed_to)


def test_interruption_queue_actions_are_scoped_to_the_queue(
    statements: list[dict[str, Any]],
) -> None:
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
        (statement,) = _with_action(statements, action)
        assert statement["Resource"] == SCOPE.interruption_queue_arn


def test_describe_cluster_is_scoped_to_the_cluster(statements: list[dict[str, Any]]) -> None:
    (statement,) = _with_action(statements, "eks:DescribeCluster")
    assert statement["Resource"] == SCOPE.cluster_arn


def test_ec2_describes_are_limited_to_the_region(statements: list[dict[str, Any]]) -> None:
    for action in ("ec2:DescribeInstances", "ec2:DescribeSubnets", "ec2:DescribeImages"):
        (statement,) = _with_action(statements, action)
        assert statement["Condition"]["StringEquals"]["aws:RequestedRegion"] == SCOPE.region


def test_launches_tag_their_outputs_as_owned_by_this_cluster(
    statements: list[dict[str, Any]],
) -> None:
    owned = f"aws:RequestTag/kubernetes.io/cluster/{SCOPE.cluster_name}"
    instance = f"arn:aws:ec2:{SCOPE.region}:*:instance/*"
    scoped = [
        s
        for s in _with_action(statements, "ec2:RunInstances")
        if instance in _as_list(s["Resource"])
    ]
    assert scoped
    for statement in scoped:
        assert statement["Condition"]["StringEquals"][owned] == "owned"


def test_terminate_requires_this_clusters_ownership_tag(
    statements: list[dict[str, Any]],
) -> None:
    owned = f"aws:ResourceTag/kubernetes.io/cluster/{SCOPE.cluster_name}"
    (statement,) = _with_action(statements, "ec2:TerminateInstances")
    assert statement["Condition"]["StringEquals"][owned] == "owned"


def test_every_wildcard_resource_has_a_reason(statements: list[dict[str, Any]]) -> None:
    wildcards = {r for s in statements for r in _as_list(s["Resource"]) if "*" in r}
    assert wildcards
    for resource in wildcards:
        assert wildcard_reason(resource)


def test_no_statement_allows_every_action(statements: list[dict[str, Any]]) -> None:
    for statement in statements:
        assert statement["Effect"] == "Allow"
        assert all(not a.endswith(":*") and a != "*" for a in _as_list(statement["Action"]))
