"""promtool, Prometheus' own checker and unit tester of rule files, built once per version with
Go from the module proxy (the version go/go.mod pins, go/go.sum its hashes) into
~/.cache/karpenter-multus/promtool (PROMTOOL_CACHE), outside the clone, as the cluster box
builds its binaries: the cache entry is named by the SHA-256 of go.mod, go.sum and `go version`,
so a version bump or a new Go builds again; a file lock makes a second pytest worker wait for
the first one's build instead of replacing the binary under it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

GO_MODULE = Path(__file__).parent / "go"
PACKAGE = "github.com/prometheus/prometheus/cmd/promtool"
CACHE_ENV = "PROMTOOL_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "karpenter-multus" / "promtool"


class BuildError(RuntimeError):
    """Go is missing or the build failed; the message says which."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def build() -> Path:
    """The path of promtool, built first if this version is not in the cache yet."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("promtool is built with Go: no go on PATH")
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=True).stdout
    digest = hashlib.sha256()
    for part in ((GO_MODULE / "go.mod").read_bytes(), (GO_MODULE / "go.sum").read_bytes()):
        digest.update(part)
    digest.update(version.strip().encode())
    binary = cache_root() / f"promtool-{digest.hexdigest()[:16]}" / "promtool"
    if binary.is_file():
        return binary
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / ".promtool.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.is_file():
            _go_build(go, binary.parent)
    return binary


def _go_build(go: str, target: Path) -> None:
    # Into a staging folder renamed at the end: a half-built binary is never seen.
    staging = Path(tempfile.mkdtemp(prefix=".promtool-", dir=cache_root()))
    completed = subprocess.run(
        [go, "build", "-o", str(staging / "promtool"), PACKAGE],
        cwd=GO_MODULE,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"go build {PACKAGE} in {GO_MODULE} failed:\n{completed.stderr[-4000:]}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
