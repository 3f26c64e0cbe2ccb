"""nodeadm, Amazon Linux 2023's node initialization tool, built from the Go module proxy by the
version go/nodeadm/go.mod pins, into a cache outside the clone, for the node box's image.

Built as testing_support/go_build.py builds every Go binary of the tests, with CGO_ENABLED=0: a
static binary, whatever libc the image has.

The version is the only one the Go module proxy here serves (v0.0.0-20240229193347-cfab22a10647;
the module has no release tags, `@v/list` lists that one pseudo-version and later commits answer
403). It predates nodeadm-internal's udev-net-manager and boot hook, so the box's nodeadm checks
NodeConfigs (`nodeadm config check`) but does not read the records the bootstrap writes for them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from testing_support.go_build import GoBuild, built, required_version
from testing_support.node_box.errors import BuildError, Unavailable

DEPENDENCY = "github.com/awslabs/amazon-eks-ami/nodeadm"
BUILD = GoBuild(
    name="nodeadm",
    directory=Path(__file__).parent / "go" / "nodeadm",
    packages=((f"{DEPENDENCY}/cmd/nodeadm", "nodeadm"),),
    error=BuildError,
    flags=("-trimpath",),
    environment={"CGO_ENABLED": "0"},
    settings=("CGO_ENABLED=0 -trimpath",),
)


@dataclass(frozen=True)
class Nodeadm:
    """The built binary and the digest of what it was built from (an input of the image)."""

    binary: Path
    digest: str
    version: str


def pinned_version() -> str:
    version = required_version(BUILD.directory, DEPENDENCY)
    if version is None:
        raise BuildError(f"{BUILD.directory}/go.mod requires no {DEPENDENCY}")
    return version


def build_nodeadm(cache: Path) -> Nodeadm:
    go = shutil.which("go")
    if go is None:
        raise Unavailable("the node box builds nodeadm with Go (go on PATH), which is missing")
    binary = built(BUILD, go, cache)["nodeadm"]
    return Nodeadm(binary, BUILD.entry_key(go), pinned_version())
