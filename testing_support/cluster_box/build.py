"""Build the box's binaries once per version, into a cache on the machine outside the clone.

A cache entry is named by the SHA-256 of the module's go.mod and go.sum and of `go version`, so
a version bump (or a new Go) builds again and everything else reuses what is there. The build
is `go build` of the pinned packages in the module's own directory (-mod=readonly by default:
go.sum must already hold every module; the Go module proxy serves them).
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

GO_MODULES = Path(__file__).parent / "go"
CACHE_ENV = "CLUSTER_BOX_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "karpenter-multus" / "cluster-box"
# module directory -> (package, binary name)
PACKAGES = {
    "kubernetes": (
        ("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
        ("k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"),
        ("k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"),
        ("k8s.io/kubernetes/cmd/kubectl", "kubectl"),
    ),
    "etcd": (("go.etcd.io/etcd/server/v3", "etcd"),),
}


class BuildError(RuntimeError):
    """Go is missing or a build failed; the message says which and how."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the built binaries."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path


def pinned_version(module: str, dependency: str) -> str:
    """The version of `dependency` that go/<module>/go.mod requires."""
    text = (GO_MODULES / module / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(dependency)} (v\S+)", text, re.MULTILINE)
    if match is None:
        raise BuildError(f"go/{module}/go.mod requires no {dependency}")
    return match.group(1)


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def build_all() -> Binaries:
    built = {name: path for module in PACKAGES for name, path in _build(module).items()}
    return Binaries(
        kube_apiserver=built["kube-apiserver"],
        kube_controller_manager=built["kube-controller-manager"],
        kube_scheduler=built["kube-scheduler"],
        kubectl=built["kubectl"],
        etcd=built["etcd"],
    )


def _version_flags(module: str) -> str:
    """What Kubernetes' hack/lib/version.sh stamps into its binaries (without it they report
    v0.0.0-master, which kubectl refuses to compare): the release of the pinned module."""
    if module != "kubernetes":
        return ""
    version = pinned_version(module, "k8s.io/kubernetes")
    major, minor = version.removeprefix("v").split(".")[:2]
    return " ".join(
        f"-X {package}.{name}={value}"
        for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for name, value in (
            ("gitVersion", version),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )


def _build(module: str) -> dict[str, Path]:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the cluster box needs Go (go on PATH) to build its binaries")
    directory = GO_MODULES / module
    version = subprocess.run(
        [go, "version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    digest = hashlib.sha256()
    for part in ((directory / "go.mod").read_bytes(), (directory / "go.sum").read_bytes()):
        digest.update(part)
    digest.update(version.encode())
    digest.update(_version_flags(module).encode())
    target = cache_root() / f"{module}-{digest.hexdigest()[:16]}"
    names = {name: target / name for _, name in PACKAGES[module]}
    if all(path.is_file() for path in names.values()):
        return names
    cache_root().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{module}-", dir=cache_root()))
    # One binary per go build; Go's build cache shares the packages they have in common.
    for package, name in PACKAGES[module]:
        completed = subprocess.run(
            [go, "build", f"-ldflags={_version_flags(module)}", "-o", str(staging / name), package],
            cwd=directory,
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise BuildError(
                f"go build {package} in {directory} failed:\n{completed.stderr[-4000:]}"
            )
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # atomic: a half-built entry is never seen
    return names
