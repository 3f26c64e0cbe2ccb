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
from tests.helpers import joined_text

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
# Created for real even in a dry run: what later objects of the same apply need to exist.
PREREQUISITES = ("CustomResourceDefinition", "Namespace")
#: Who may do what: the service accounts and their grants.
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def manifests_in_order(template: dict[str, Any]) -> list[list[dict[str, Any]]]:
    resources = template["Resources"]
    return [
        json.loads(joined_text(resources[logical_id]["Properties"]["Manifest"]))
        for logical_id in StackOrder(template).creation_order
        if resources[logical_id]["Type"] == MANIFEST
    ]


def apply(plane: ControlPlane, objects: list[dict[str, Any]], *, dry_run: bool = False) -> None:
    if not objects:
        return
    plane.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=cdk-kubectl",
        *(["--dry-run=server"] if dry_run else []),
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )


def apply_objects(
    plane: ControlPlane, objects: list[dict[str, Any]], *, dry_run: bool = False
) -> None:
    """One manifest's objects: its CRDs and Namespaces first, for real (what the rest needs to
    exist), then the rest; with dry_run, the rest goes through validation and admission only."""
    apply(plane, [o for o in objects if o["kind"] in PREREQUISITES])
    if any(o["kind"] == "CustomResourceDefinition" for o in objects):
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    apply(plane, [o for o in objects if o["kind"] not in PREREQUISITES], dry_run=dry_run)


def apply_app(plane: ControlPlane, template: dict[str, Any], *, dry_run: bool = False) -> None:
    """Every object of the template, manifest by manifest."""
    for objects in manifests_in_order(template):
        apply_objects(plane, objects, dry_run=dry_run)


def delete_objects(plane: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """The objects gone but CRDs and Namespaces (what comes next may share them)."""
    kept = [o for o in objects if o["kind"] not in PREREQUISITES]
    if kept:
        plane.kubectl(
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}),
        )
