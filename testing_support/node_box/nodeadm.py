"""nodeadm, Amazon Linux 2023's node initialization tool, built from the Go module proxy by the
version go/nodeadm/go.mod pins, into a cache outside the clone, for the node box's image.

As testing_support/cluster_box/build.py does for Kubernetes: the cache entry is named by the
SHA-256 of the module's go.mod and go.sum, of `go version` and of the build's settings, and the
build is `go build` of the pinned package in the module's directory (-mod=readonly: go.sum must
hold every module already). CGO_ENABLED=0: a static binary, whatever libc the image has.

The version is the only one the Go module proxy here serves (v0.0.0-20240229193347-cfab22a10647;
the module has no release tags, `@v/list` lists that one pseudo-version and later commits answer
403). It predates nodeadm-internal's udev-net-manager and boot hook, so the box's nodeadm checks
NodeConfigs (`nodeadm config check`) but does not read the records the bootstrap writes for them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from testing_support.node_box.errors import BuildError, Unavailable

MODULE = Path(__file__).parent / "go" / "nodeadm"
PACKAGE = "github.com/awslabs/amazon-eks-ami/nodeadm/cmd/nodeadm"
DEPENDENCY = "github.com/awslabs/amazon-eks-ami/nodeadm"
_SETTINGS = "CGO_ENABLED=0 -trimpath"


@dataclass(frozen=True)
class Nodeadm:
    """The built binary and the digest of what it was built from (an input of the image)."""

    binary: Path
    digest: str
    version: str


def pinned_version() -> str:
    text = (MODULE / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(DEPENDENCY)} (v\S+)", text, re.MULTILINE)
    if match is None:
        raise BuildError(f"{MODULE}/go.mod requires no {DEPENDENCY}")
    return match.group(1)


def build_nodeadm(cache: Path) -> Nodeadm:
    go = shutil.which("go")
    if go is None:
        raise Unavailable("the node box builds nodeadm with Go (go on PATH), which is missing")
    go_version = subprocess.run([go, "version"], capture_output=True, text=True, check=True)
    digest = hashlib.sha256()
    for part in ((MODULE / "go.mod").read_bytes(), (MODULE / "go.sum").read_bytes()):
        digest.update(part)
    digest.update(go_version.stdout.strip().encode())
    digest.update(_SETTINGS.encode())
    key = digest.hexdigest()[:16]
    target = cache / f"nodeadm-{key}"
    binary = target / "nodeadm"
    if binary.is_file():
        return Nodeadm(binary, key, pinned_version())
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".nodeadm-", dir=cache))
    completed = subprocess.run(
        [go, "build", "-trimpath", "-o", str(staging / "nodeadm"), PACKAGE],
        cwd=MODULE,
        env={**os.environ, "CGO_ENABLED": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"go build {PACKAGE} in {MODULE} failed:\n{completed.stderr[-4000:]}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # atomic: a half-built entry is never seen
    return Nodeadm(binary, key, pinned_version())
