"""Binaries of upstream Go modules, built once per pinned version into a cache outside the clone
(the cluster box's Kubernetes and CNI components, the node box's nodeadm, promtool).

Each build is a small Go module in the repo (go.mod pins the upstream version, go.sum its
hashes). A cache entry is named by the SHA-256 of that go.mod and go.sum, of `go version` and of
the build's own settings, so a version bump or a new Go builds again and everything else reuses
what is there. `go build` runs in the module's directory (-mod=readonly by default: go.sum must
already hold every module; the Go module proxy serves them) into a staging folder renamed into
place at the end, so a half-built entry is never seen; a file lock makes a second pytest worker
wait for the first one's build instead of replacing the entry under a running binary.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class GoBuild:
    """What to build: `packages` (Go package, binary name) of the module in `directory`, with
    `flags` given to each `go build` and `environment` added to the process's. `settings`: the
    build's settings as they enter the entry's name (flags and environment that change the
    binaries). `error`: the exception the caller's tier reports a failed build with."""

    name: str
    directory: Path
    packages: Sequence[tuple[str, str]]
    error: type[Exception]
    flags: Sequence[str] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    settings: Sequence[str] = ()

    def entry_key(self, go: str) -> str:
        version = subprocess.run([go, "version"], capture_output=True, text=True, check=True)
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.directory / name).read_bytes())
        digest.update(version.stdout.strip().encode())
        for setting in self.settings:
            digest.update(setting.encode())
        return digest.hexdigest()[:16]


def required_version(directory: Path, dependency: str) -> str | None:
    """The version of `dependency` that the go.mod in `directory` requires (None: none)."""
    text = (directory / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(dependency)} (v\S+)", text, re.MULTILINE)
    return None if match is None else match.group(1)


def downloaded_module(
    go: str, directory: Path, module: str, version: str, error: type[Exception]
) -> Path:
    """The folder of `module`@`version` in Go's module cache, downloaded first if missing and
    checked against the go.sum in `directory`."""
    completed = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise error(f"go mod download {module}@{version}: {completed.stderr.strip()}")
    return Path(json.loads(completed.stdout)["Dir"])


def built(build: GoBuild, go: str, cache: Path) -> dict[str, Path]:
    """Each binary's path (by its name) in the build's cache entry, built first if missing."""
    target = cache / f"{build.name}-{build.entry_key(go)}"
    binaries = {name: target / name for _, name in build.packages}
    if all(path.is_file() for path in binaries.values()):
        return binaries
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{build.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(path.is_file() for path in binaries.values()):
            _go_build(build, go, cache, target)
    return binaries


def _go_build(build: GoBuild, go: str, cache: Path, target: Path) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{build.name}-", dir=cache))
    # One binary per go build; Go's build cache shares the packages they have in common.
    for package, binary in build.packages:
        completed = subprocess.run(
            [go, "build", *build.flags, "-o", str(staging / binary), package],
            cwd=build.directory,
            env={**os.environ, **build.environment},
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise build.error(
                f"go build {package} in {build.directory} failed:\n{completed.stderr[-4000:]}"
            )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
