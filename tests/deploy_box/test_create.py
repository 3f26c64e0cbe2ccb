"""The default app created through aws-cdk's kubectl handler: every manifest (`kubectl create
--save-config`) and Helm release (`helm upgrade --install`, the charts pulled from the registry)
in CloudFormation's order, then the cluster holds exactly the template's objects."""

from __future__ import annotations

import pytest

from testing_support.cloudformation_order import StackOrder
from testing_support.deploy_box.handler import KUBECTL_TYPES
from testing_support.deploy_box.inventory import live
from tests.conftest import SynthesizedApp
from tests.deploy_box.checks import compare_with_template, manifest_differences
from tests.deploy_box.conftest import StartBox, assembly, templates

pytestmark = pytest.mark.deploy_box


def test_the_default_app_created_through_the_handler_is_its_template(
    default_app: SynthesizedApp, start_box: StartBox
) -> None:
    app = templates(default_app)
    box = start_box(app)
    baseline = set(live(box.plane))

    events = box.create(app, assembly(default_app))

    order = StackOrder(app.cluster).creation_order
    kubectl_resources = [i for i in order if app.cluster["Resources"][i]["Type"] in KUBECTL_TYPES]
    assert [e.logical_id for e in events] == kubectl_resources
    assert {e.request_type for e in events} == {"Create"}
    comparison = compare_with_template(box, app, baseline)
    assert comparison.missing == []
    assert comparison.left_over == [], "\n".join(comparison.left_over)
    assert comparison.records == [("karpenter", 1), ("karpenter-crd", 1)]
    assert manifest_differences(box, app) == {}
    # The handler logged in to this cluster only, and pulled from public.ecr.aws only.
    (handler,) = box.handlers
    logins = [call for call in handler.aws_calls if call[:2] == ["eks", "update-kubeconfig"]]
    assert len(logins) == len(events)
    assert {call[call.index("--name") + 1] for call in logins} == {app.config.cluster_name}
    assert box.registry.refused == []
