"""promtool, Prometheus' own checker and unit tester of rule files, built once per version with
Go from the module proxy (the version go/go.mod pins, go/go.sum its hashes) into
~/.cache/karpenter-multus/promtool (PROMTOOL_CACHE), outside the clone, as
testing_support/go_build.py builds every Go binary of the tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from testing_support.go_build import GoBuild, built

CACHE_ENV = "PROMTOOL_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "karpenter-multus" / "promtool"


class BuildError(RuntimeError):
    """Go is missing or the build failed; the message says which."""


BUILD = GoBuild(
    name="promtool",
    directory=Path(__file__).parent / "go",
    packages=(("github.com/prometheus/prometheus/cmd/promtool", "promtool"),),
    error=BuildError,
    # Prometheus' build tag that leaves out every service discovery (its plugins/plugin_*.go:
    # `!remove_all_sd || enable_<name>_sd`): their cloud SDKs are most of the build (225 s
    # cold here, 98 s without them), and checking and unit-testing rule files uses none.
    flags=("-tags=remove_all_sd",),
    settings=("-tags=remove_all_sd",),
)


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def build() -> Path:
    """The path of promtool, built first if this version is not in the cache yet."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("promtool is built with Go: no go on PATH")
    return built(BUILD, go, cache_root())["promtool"]
