"""Day-2 changes through aws-cdk's kubectl handler: the app created, then CloudFormation's update
events of the new synth (Create for an added resource, Update with OldResourceProperties for a
changed one, then Delete for a removed one in the cleanup phase). Afterwards the cluster holds
exactly the new template's objects, and what the change did not touch is the same object as
before (same UID, same generation: neither replaced nor rewritten)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from testing_support.deploy_box.box import DeployBox
from testing_support.deploy_box.inventory import live
from testing_support.karpenter_box.app_world import AppTemplates
from tests.conftest import SynthesizedApp, synthesize_config
from tests.deploy_box.checks import compare_with_template, manifest_differences
from tests.deploy_box.conftest import StartBox, assembly, templates

pytestmark = pytest.mark.deploy_box

KARPENTER_KINDS = ("NodePool", "EC2NodeClass", "NodeOverlay")


def _objects(box: DeployBox, kinds: tuple[str, ...]) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> the live object, for the cluster-scoped and namespaced kinds given."""
    return {
        (identity.kind, identity.name): obj
        for identity, obj in live(box.plane).items()
        if identity.kind in kinds
    }


def _updated(
    start_box: StartBox, before: SynthesizedApp, after: SynthesizedApp
) -> tuple[DeployBox, AppTemplates, set[Any], dict[tuple[str, str], dict[str, Any]]]:
    """A box with `before` created, then updated to `after`; the baseline and the objects of
    KARPENTER_KINDS and NADs as they were before the update."""
    old, new = templates(before), templates(after)
    box = start_box(old, new)
    baseline = set(live(box.plane))
    box.create(old, assembly(before))
    previous = _objects(box, (*KARPENTER_KINDS, "NetworkAttachmentDefinition"))
    box.update(old, new, assembly(after))
    return box, new, baseline, previous


def test_removing_a_node_pool_removes_its_nodepool_ec2nodeclass_and_overlay(
    five_g_core_app: SynthesizedApp,
    five_g_core_without_control: SynthesizedApp,
    start_box: StartBox,
) -> None:
    box, after, baseline, previous = _updated(
        start_box, five_g_core_app, five_g_core_without_control
    )

    comparison = compare_with_template(box, after, baseline)
    assert comparison.left_over == [], "\n".join(comparison.left_over)
    remaining = _objects(box, KARPENTER_KINDS)
    assert [key for key in remaining if key[1] == "control"] == []
    assert comparison.missing == []
    assert manifest_differences(box, after) == {}
    # The upf pool's objects are the same objects, unchanged by the update.
    upf = {key: obj for key, obj in remaining.items() if key[1] == "upf"}
    assert sorted(kind for kind, _ in upf) == ["EC2NodeClass", "NodeOverlay", "NodePool"]
    for key, obj in upf.items():
        before = previous[key]["metadata"]
        assert obj["metadata"]["uid"] == before["uid"], key
        assert obj["metadata"]["generation"] == before["generation"], key


#: The seed's networks without multus2 (the default pool attaches every network, so it keeps
#: multus1 only).
ONLY_MULTUS1 = {
    "multus": {
        "networks": [
            {
                "name": "multus1",
                "subnets": [
                    {"cidr": "10.0.4.0/24", "reservation": "10.0.4.32/27"},
                    {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                ],
            }
        ]
    }
}


@pytest.fixture(scope="module")
def default_without_multus2(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    return synthesize_config(
        tmp_path_factory.mktemp("default-without-multus2"), copy.deepcopy(ONLY_MULTUS1)
    )


def test_removing_a_network_removes_its_network_attachment_definitions(
    default_app: SynthesizedApp, default_without_multus2: SynthesizedApp, start_box: StartBox
) -> None:
    box, after, baseline, previous = _updated(start_box, default_app, default_without_multus2)

    comparison = compare_with_template(box, after, baseline)
    assert comparison.left_over == [], "\n".join(comparison.left_over)
    nads = _objects(box, ("NetworkAttachmentDefinition",))
    assert sorted(name for _, name in nads) == ["multus1-us-west-2a", "multus1-us-west-2b"]
    assert comparison.missing == []
    assert manifest_differences(box, after) == {}
    # multus1's NADs are the same objects; the pool's NodePool and EC2NodeClass were updated
    # in place (the EC2NodeClass's user-data no longer attaches multus2), never replaced.
    for key, obj in nads.items():
        assert obj["metadata"]["uid"] == previous[key]["metadata"]["uid"], key
        assert obj["metadata"]["generation"] == previous[key]["metadata"]["generation"], key
    for key, obj in _objects(box, KARPENTER_KINDS).items():
        assert obj["metadata"]["uid"] == previous[key]["metadata"]["uid"], key
