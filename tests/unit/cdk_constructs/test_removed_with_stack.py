"""`cdk destroy` leaves nothing behind that the stacks created but the audit logs the config
keeps, and no log group that Lambda or EKS would create outside CloudFormation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SynthesizedApp, cdk_json_context, synthesize


@pytest.fixture(scope="module")
def templates(default_app: SynthesizedApp) -> dict[str, dict[str, Any]]:
    return default_app.templates_by_stack_name()


CONTROL_PLANE_LOGS = "/aws/eks/eks-karpenterwithmultus/cluster"


def retained(templates: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Logical ID -> what it is, of every resource CloudFormation keeps on delete."""
    found = {}
    for template in templates.values():
        flow_log_groups = {
            log["Properties"]["LogGroupName"]["Ref"]
            for log in template["Resources"].values()
            if log["Type"] == "AWS::EC2::FlowLog"
        }
        for logical_id, resource in template["Resources"].items():
            if resource.get("DeletionPolicy", "Delete") == "Delete":
                continue
            name = resource.get("Properties", {}).get("LogGroupName")
            found[logical_id] = (
                "flow logs" if logical_id in flow_log_groups else str(name or resource["Type"])
            )
    return found


def test_only_the_audit_logs_are_retained_on_delete(templates: dict[str, dict[str, Any]]) -> None:
    """The control-plane log group (the API server's audit log among its streams) and the VPC
    flow logs are an incident's evidence: kept by default (logs.keep_audit_logs_on_destroy),
    with UpdateReplacePolicy Retain too, so a replacement does not delete them either."""
    found = retained(templates)
    assert sorted(found.values()) == [CONTROL_PLANE_LOGS, "flow logs"]
    for template in templates.values():
        for logical_id in set(found) & set(template["Resources"]):
            assert template["Resources"][logical_id]["UpdateReplacePolicy"] == "Retain"


def test_a_failed_first_deploy_leaves_no_audit_log_group_behind(
    templates: dict[str, dict[str, Any]],
) -> None:
    """Issue #53: with DeletionPolicy Retain, the rollback of a failed first cluster deploy kept
    /aws/eks/<cluster>/cluster, and the retry failed with "already exists". RetainExceptOnCreate
    deletes what the rolled-back operation created and keeps it on every later delete."""
    policies = {
        logical_id: template["Resources"][logical_id]["DeletionPolicy"]
        for template in templates.values()
        for logical_id in set(retained(templates)) & set(template["Resources"])
    }
    assert len(policies) == 2
    assert set(policies.values()) == {"RetainExceptOnCreate"}


def test_nothing_is_retained_when_the_config_says_so(tmp_path: Any) -> None:
    app = synthesize(
        tmp_path, cdk_json_context(**{"config.logs.keep_audit_logs_on_destroy": "false"})
    )
    assert retained(app.templates_by_stack_name()) == {}


def test_function_logs_keep_the_configured_retention(tmp_path: Any) -> None:
    app = synthesize(tmp_path, cdk_json_context(**{"config.logs.function_retention": "TWO_YEARS"}))
    days = {
        group["Properties"].get("LogGroupName", logical_id): group["Properties"]["RetentionInDays"]
        for template in app.templates_by_stack_name().values()
        for logical_id, group in template["Resources"].items()
        if group["Type"] == "AWS::Logs::LogGroup"
    }
    # every function's group follows logs.function_retention; the audit groups keep their own
    assert days.pop(CONTROL_PLANE_LOGS) == 365
    assert sorted(set(days.values())) == [365, 731]
    assert list(days.values()).count(365) == 1  # the flow logs (vpc.flow_log_retention)


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
