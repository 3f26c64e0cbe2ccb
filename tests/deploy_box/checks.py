"""What the deploy box tests compare: the cluster's objects of ours against an app's template."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from testing_support.deploy_box.box import DeployBox
from testing_support.deploy_box.handler import MANIFEST
from testing_support.deploy_box.inventory import (
    Identity,
    expected,
    helm_records,
    live,
    resource_types,
    written_by_the_handler,
)
from testing_support.deploy_box.stack import resolved_properties
from testing_support.karpenter_box.app_world import AppTemplates


@dataclass(frozen=True)
class Comparison:
    """The cluster against the template: objects missing, objects left over (written by the
    handler's kubectl or helm since the baseline, and neither the template's nor helm's record
    of a release), helm's records (release, revision)."""

    missing: list[str]
    left_over: list[str]
    records: list[tuple[str, int]]
    found: dict[Identity, dict[str, Any]]


def compare_with_template(box: DeployBox, app: AppTemplates, baseline: set[Identity]) -> Comparison:
    _, namespaced = resource_types(box.plane)
    found = {
        i: o for i, o in live(box.plane).items() if i not in baseline and written_by_the_handler(o)
    }
    want = expected(resolved_properties(app), box.charts, box.helm, namespaced)
    records = helm_records(found)
    return Comparison(
        missing=sorted(str(i) for i in set(want) - set(found)),
        left_over=sorted(str(i) for i in set(found) - set(want) - set(records)),
        records=sorted(records.values()),
        found=found,
    )


def manifest_differences(box: DeployBox, app: AppTemplates) -> dict[str, str]:
    """Per kubectl manifest, what `kubectl diff` finds between the cluster and the manifest
    (the API server's dry run of applying it against the live objects); empty: the same."""
    differences = {}
    for logical_id, (resource_type, properties) in resolved_properties(app).items():
        if resource_type != MANIFEST:
            continue
        kubectl = str(box.plane.binaries.kubectl)
        completed = subprocess.run(
            [kubectl, f"--kubeconfig={box.plane.kubeconfig}", "diff", "-f", "-"],
            input=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": json.loads(properties["Manifest"])}
            ),
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if completed.returncode != 0:
            differences[logical_id] = (completed.stdout + completed.stderr)[-3000:]
    return differences
