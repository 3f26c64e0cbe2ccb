"""`cdk destroy` through aws-cdk's kubectl handler: the cluster stack's Delete events, in
CloudFormation's deletion order (a resource goes once nothing that names it is left), after the
default app was created. No object the handler wrote is left and nothing waits on a finalizer.

Karpenter's controller does not run in the box (only its Deployment's pods, played Ready), so
its NodePools and EC2NodeClasses carry none of the finalizers Karpenter adds (karpenter.sh/
termination): what the teardown custom resource waits for on a real cluster (Karpenter draining
and terminating the nodes) is the Karpenter box's and the teardown handler's tests' to show."""

from __future__ import annotations

import pytest

from testing_support.cloudformation_order import StackOrder
from testing_support.deploy_box.handler import KUBECTL_TYPES
from testing_support.deploy_box.inventory import live, written_by_the_handler
from tests.conftest import SynthesizedApp
from tests.deploy_box.conftest import StartBox, assembly, templates

pytestmark = pytest.mark.deploy_box


def test_the_stacks_delete_leaves_no_object_of_ours_and_no_finalizer(
    default_app: SynthesizedApp, start_box: StartBox
) -> None:
    app = templates(default_app)
    box = start_box(app)
    baseline = set(live(box.plane))
    box.create(app, assembly(default_app))

    events = box.delete(app, assembly(default_app))

    waves = StackOrder(app.cluster).deletion_waves
    position = {logical_id: index for index, wave in enumerate(waves) for logical_id in wave}
    assert [position[e.logical_id] for e in events] == sorted(
        position[e.logical_id] for e in events
    )
    assert {e.logical_id for e in events} == {
        logical_id
        for logical_id, resource in app.cluster["Resources"].items()
        if resource["Type"] in KUBECTL_TYPES
    }
    # The handler logs a failed `kubectl delete` and carries on: each must have deleted.
    for handler in box.handlers:
        for invocation in handler.invocations:
            if invocation.request_type == "Delete":
                assert "delete error" not in invocation.log, invocation.log[-3000:]
    remaining = live(box.plane)
    left = sorted(
        str(identity)
        for identity, obj in remaining.items()
        if identity not in baseline and written_by_the_handler(obj)
    )
    assert left == []
    terminating = sorted(
        str(identity)
        for identity, obj in remaining.items()
        if obj["metadata"].get("deletionTimestamp")
    )
    assert terminating == []
    kinds = {identity.kind for identity in remaining}
    assert not kinds & {"NodePool", "EC2NodeClass", "NetworkAttachmentDefinition"}
