"""What the app applies to a cluster, taken from its synthesized cluster template, and how the
tests apply it to the box: each kubectl manifest's objects in CloudFormation's creation order
(testing_support/cloudformation_order), server-side, as the kubectl handler's `kubectl apply`
would. Deploy-time values (the node role's name, the subnets in the user-data) are the
placeholder TOKEN (tests.helpers.joined_text)."""

from __future__ import annotations

import json
from typing import Any

from testing_support.cloudformation_order import StackOrder
from testing_support.cluster_box.control_plane import ControlPlane
from testing_support.cluster_box.objects import apply_objects
from tests.helpers import joined_text

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


def manifests_in_order(template: dict[str, Any]) -> list[list[dict[str, Any]]]:
    resources = template["Resources"]
    return [
        json.loads(joined_text(resources[logical_id]["Properties"]["Manifest"]))
        for logical_id in StackOrder(template).creation_order
        if resources[logical_id]["Type"] == MANIFEST
    ]


def apply_app(plane: ControlPlane, template: dict[str, Any], *, dry_run: bool = False) -> None:
    """Every object of the template, manifest by manifest."""
    for objects in manifests_in_order(template):
        apply_objects(plane, objects, dry_run=dry_run)
