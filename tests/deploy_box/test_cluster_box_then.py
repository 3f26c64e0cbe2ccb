"""`make cluster-box CONFIG=<a> THEN=<b> CMD=...` as an operator runs it to see what a day-2
change leaves in the cluster before deploying it: examples/5g-core.json deployed through the
real kubectl handler, then updated to the example without its control pool, then CMD lists the
pool and network objects. They are exactly the objects of b's template: the control pool's
NodePool, EC2NodeClass and DaemonSets are gone, nothing else of a's is left over."""

from __future__ import annotations

import json
import subprocess

import pytest

from testing_support.deploy_box.handler import MANIFEST
from testing_support.deploy_box.stack import resolved_properties
from tests.conftest import FIVE_G_CORE, REPO, SynthesizedApp
from tests.deploy_box.conftest import templates

pytestmark = pytest.mark.deploy_box

COMMAND_SECONDS = 900
KINDS = ("NodePool", "EC2NodeClass", "NodeOverlay", "NetworkAttachmentDefinition", "DaemonSet")
NAMESPACED = {"NetworkAttachmentDefinition", "DaemonSet"}
LISTING = (
    "kubectl get nodepools,ec2nodeclasses,nodeoverlays,network-attachment-definitions,daemonsets"
    " -A -o json"
)


def _template_objects(app: SynthesizedApp) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every object of KINDS in the app's kubectl manifests."""
    found = set()
    for resource_type, properties in resolved_properties(templates(app)).values():
        if resource_type != MANIFEST:
            continue
        for obj in json.loads(properties["Manifest"]):
            if obj["kind"] in KINDS:
                metadata = obj["metadata"]
                namespace = (
                    metadata.get("namespace", "default") if obj["kind"] in NAMESPACED else ""
                )
                found.add((obj["kind"], namespace, metadata["name"]))
    return found


def test_cluster_box_then_shows_exactly_the_updated_configs_objects(
    five_g_core_without_control: SynthesizedApp,
) -> None:
    then_file = five_g_core_without_control.outdir.parent / "config.json"
    completed = subprocess.run(
        ["make", "--no-print-directory", "cluster-box", f"CONFIG={FIVE_G_CORE}",
         f"THEN={then_file}", f"CMD={LISTING}"],
        cwd=REPO, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    listed = json.loads(completed.stdout[completed.stdout.index("{") :])["items"]
    in_box = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in listed
        if not o["metadata"].get("ownerReferences")
    }
    assert in_box == _template_objects(five_g_core_without_control)
    assert not [o for o in in_box if "control" in o[2]], "the control pool's objects are gone"
    assert ("NodePool", "", "upf") in in_box
    assert "create events, then" in completed.stderr
