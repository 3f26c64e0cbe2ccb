"""`cdk destroy` leaves nothing behind that the stacks created: no retained resources, and no
log group that Lambda or EKS would create outside CloudFormation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SynthesizedApp


@pytest.fixture(scope="module")
def templates(default_app: SynthesizedApp) -> dict[str, dict[str, Any]]:
    return default_app.templates_by_stack_name()


def test_nothing_is_retained_on_delete(templates: dict[str, dict[str, Any]]) -> None:
    retained = [
        (stack, logical_id)
        for stack, template in templates.items()
        for logical_id, resource in template["Resources"].items()
        if resource.get("DeletionPolicy", "Delete") != "Delete"
    ]
    assert retained == []


def test_kms_keys_wait_the_shortest_window(templates: dict[str, dict[str, Any]]) -> None:
    keys = [
        r
        for t in templates.values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::KMS::Key"
    ]
    assert keys
    assert {key["Properties"]["PendingWindowInDays"] for key in keys} == {7}


def test_every_lambda_logs_to_a_log_group_of_its_stack(
    templates: dict[str, dict[str, Any]],
) -> None:
    for template in templates.values():
        resources = template["Resources"]
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Lambda::Function":
                continue
            log_group = resource["Properties"].get("LoggingConfig", {}).get("LogGroup", {})
            assert resources[log_group["Ref"]]["Type"] == "AWS::Logs::LogGroup", logical_id
            assert "RetentionInDays" in resources[log_group["Ref"]]["Properties"], logical_id


def test_control_plane_logs_go_to_a_group_created_before_the_cluster(
    default_app: SynthesizedApp,
) -> None:
    """Created before the cluster, so EKS writes into it instead of creating its own, and
    deleted after it (CloudFormation deletes in the reverse order). That is as late as the
    stack can delete it; EKS's service-linked role can still create it again with the last log
    lines (terraform-aws-modules/terraform-aws-eks#2763), which docs/operations.md lists under
    "What a destroy leaves behind" with the way out."""
    template = default_app.template_json(default_app.stage.cluster)
    resources = template["Resources"]
    (cluster_id,) = [k for k, r in resources.items() if r["Type"] == "AWS::EKS::Cluster"]
    (group_id,) = [
        k
        for k, r in resources.items()
        if r["Type"] == "AWS::Logs::LogGroup"
        and r["Properties"].get("LogGroupName") == "/aws/eks/eks-karpenterwithmultus/cluster"
    ]
    assert group_id in resources[cluster_id]["DependsOn"]
    # cluster.control_plane_log_retention's default, ONE_YEAR (CT.CLOUDWATCH.PR.2).
    assert resources[group_id]["Properties"]["RetentionInDays"] == 365
