"""Applying objects to the box as the kubectl handler's `kubectl apply` would (server-side, one
field manager), each manifest's CRDs and Namespaces first, for real, since the rest of the
same manifest may need them to exist."""

from __future__ import annotations

import json
from typing import Any

from testing_support.cluster_box.control_plane import ControlPlane

# Created for real even in a dry run: what later objects of the same apply need to exist.
PREREQUISITES = ("CustomResourceDefinition", "Namespace")
#: Who may do what: the service accounts and their grants.
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


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
