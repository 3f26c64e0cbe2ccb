"""The upstream CRDs kept in testing_support/upstream_crds are upstream's bytes: each file's git
blob ID (what `git hash-object` prints, and `git rev-parse <tag>:<path>` upstream) is the one
the README records next to its source, and every CRD file there is recorded."""

from __future__ import annotations

import hashlib
import re

import yaml

from tests.helpers import UPSTREAM_CRDS

RECORD = re.compile(r"^\| `(?P<file>[^`]+\.yaml)` \|.*\| `(?P<blob>[0-9a-f]{40})` \|$", re.M)


def git_blob_id(data: bytes) -> str:
    """Git's object ID of a file's content (a SHA-1 over "blob <size>\\0" and the bytes)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()


def test_git_blob_id_is_gits() -> None:
    # `printf 'hello\n' | git hash-object --stdin`
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_every_kept_crd_is_upstreams_file_unchanged() -> None:
    recorded = {
        match["file"]: match["blob"]
        for match in RECORD.finditer((UPSTREAM_CRDS / "README.md").read_text())
    }
    kept = {str(path.relative_to(UPSTREAM_CRDS)) for path in UPSTREAM_CRDS.rglob("*.yaml")}
    assert kept and kept == set(recorded)
    for name, blob in recorded.items():
        assert git_blob_id((UPSTREAM_CRDS / name).read_bytes()) == blob, name


def test_the_node_overlay_crd_is_karpenters_v1alpha1() -> None:
    (crd,) = [
        doc
        for doc in yaml.safe_load_all(
            (UPSTREAM_CRDS / "karpenter-v1.14.1" / "karpenter.sh_nodeoverlays.yaml").read_text()
        )
        if doc
    ]
    assert crd["spec"]["group"] == "karpenter.sh"
    assert crd["spec"]["names"]["kind"] == "NodeOverlay"
    assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v1alpha1"]
