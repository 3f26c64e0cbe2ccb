"""The upgrade from the shared manifests (every pool's NodePool and EC2NodeClass in one, every
network's NADs in another: the app as of UPGRADED_FROM) to a manifest per pool and per network,
through the real handler: the default app created by the old synth, then CloudFormation's update
events of the new one. The shared manifests keep their logical IDs (now inventories), so they are
updated, not deleted (whose `kubectl delete` would take every pool and NAD with it); the new
manifests Create with `kubectl apply` and adopt the objects: the same UIDs, unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing_support.deploy_box.inventory import live
from testing_support.karpenter_box.app_world import AppTemplates
from tests.conftest import REPO, SynthesizedApp
from tests.deploy_box.checks import compare_with_template, manifest_differences
from tests.deploy_box.conftest import StartBox, assembly, templates
from tests.deploy_box.test_day2 import KARPENTER_KINDS, _objects

pytestmark = pytest.mark.deploy_box

#: The last commit with the shared manifests (main before issue #48's fix).
UPGRADED_FROM = "3c7a518"
_SYNTH = """
import sys
from pathlib import Path
sys.path.insert(0, ".")
from tests.conftest import cdk_json_context, synthesize
synthesize(Path(sys.argv[1]), cdk_json_context())
"""


def synthesized_at(commit: str, directory: Path, like: SynthesizedApp) -> tuple[AppTemplates, Path]:
    """The default app as the repository's `commit` synthesizes it (its templates, and its
    assembly folder), with the config of `like` (the same default config)."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], check=False
    )
    if found.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone's history (a shallow clone?)")
    source, out = directory / "source", directory / "cdk.out"
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    subprocess.run(
        [sys.executable, "-c", _SYNTH, str(out)],
        cwd=source,
        env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"},
        capture_output=True,
        check=True,
        timeout=600,
    )
    new = templates(like)
    stage = like.stage
    assembly_dir = out / Path(stage.outdir).name
    old_templates = {
        stack.stack_name: json.loads((assembly_dir / stack.template_file).read_text())
        for stack in (stage.network, stage.cluster)
    }
    return AppTemplates(
        new.config, new.network_stack, new.cluster_stack, old_templates
    ), assembly_dir


def test_the_upgrade_to_a_manifest_per_pool_and_network_keeps_every_object(
    default_app: SynthesizedApp, start_box: StartBox, tmp_path: Path
) -> None:
    old, old_assembly = synthesized_at(UPGRADED_FROM, tmp_path / "old", default_app)
    new = templates(default_app)
    box = start_box(old)
    baseline = set(live(box.plane))
    box.create(old, old_assembly)
    kinds = (*KARPENTER_KINDS, "NetworkAttachmentDefinition")
    previous = _objects(box, kinds)
    assert sorted(name for _, name in previous) == [
        "multus",
        "multus",
        "multus1-us-west-2a",
        "multus1-us-west-2b",
        "multus2-us-west-2a",
        "multus2-us-west-2b",
    ]

    events = box.update(old, new, assembly(default_app))

    assert [e.request_type for e in events if e.request_type == "Delete"] == []
    current = _objects(box, kinds)
    assert set(current) == set(previous)
    for key, obj in current.items():
        assert obj["metadata"]["uid"] == previous[key]["metadata"]["uid"], key
        assert obj["metadata"]["generation"] == previous[key]["metadata"]["generation"], key
    comparison = compare_with_template(box, new, baseline)
    assert comparison.left_over == [], "\n".join(comparison.left_over)
    assert comparison.missing == []
    assert manifest_differences(box, new) == {}
