"""Build the box's binaries once per version, into a cache on the machine outside the clone.

Two entry points: `build_all()` builds the control plane (Kubernetes and etcd) and
`build_cni()` the CNI components (the Multus thick plugin, Whereabouts and the reference CNI
plugins, at the releases the project deploys); `build_all()` never waits for the CNI builds.

A cache entry is named by the SHA-256 of the module's go.mod and go.sum, of `go version` and of
the build's flags, so a version bump (or a new Go) builds again and everything else reuses what
is there. The build is `go build` of the pinned packages in the module's own directory
(-mod=readonly by default: go.sum must already hold every module; the Go module proxy serves
them). The CNI components are built with CGO_ENABLED=0: static binaries, run inside a minimal VM.
"""

from __future__ import annotations

import fcntl
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
    "multus": (
        ("gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-daemon", "multus-daemon"),
        ("gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-shim", "multus-shim"),
    ),
    "whereabouts": (
        ("github.com/k8snetworkplumbingwg/whereabouts/cmd", "whereabouts"),
        ("github.com/k8snetworkplumbingwg/whereabouts/cmd/controlloop", "ip-control-loop"),
    ),
    "cni-plugins": tuple(
        (f"github.com/containernetworking/plugins/plugins/{path}", path.rsplit("/", 1)[1])
        for path in (
            "main/ipvlan",
            "main/macvlan",
            "main/host-device",
            "meta/sbr",
            "meta/tuning",
            "ipam/static",
            "ipam/host-local",
            "main/loopback",
        )
    ),
}
CONTROL_PLANE_MODULES = ("kubernetes", "etcd")
CNI_MODULES = ("multus", "whereabouts", "cni-plugins")
# module directory -> (dependency whose pinned version the binaries report, -X variables for it)
_STAMPED_VERSIONS = {
    "multus": (
        "gopkg.in/k8snetworkplumbingwg/multus-cni.v4",
        ("gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version",),
    ),
    "whereabouts": (
        "github.com/k8snetworkplumbingwg/whereabouts",
        ("github.com/k8snetworkplumbingwg/whereabouts/pkg/version.Version",),
    ),
    "cni-plugins": (
        "github.com/containernetworking/plugins",
        ("github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion",),
    ),
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


@dataclass(frozen=True)
class CniBinaries:
    """Paths of the built CNI components; `plugins_dir` holds every reference CNI plugin
    (ipvlan, macvlan, host-device, sbr, tuning, static, host-local, loopback), each under its
    own name."""

    multus_daemon: Path
    multus_shim: Path
    whereabouts: Path
    ip_control_loop: Path
    plugins_dir: Path


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
    """The control plane's binaries (not the CNI components: `build_cni()`)."""
    built = {
        name: path for module in CONTROL_PLANE_MODULES for name, path in _build(module).items()
    }
    return Binaries(
        kube_apiserver=built["kube-apiserver"],
        kube_controller_manager=built["kube-controller-manager"],
        kube_scheduler=built["kube-scheduler"],
        kubectl=built["kubectl"],
        etcd=built["etcd"],
    )


def build_cni() -> CniBinaries:
    """The CNI components' binaries, static (CGO_ENABLED=0)."""
    multus = _build("multus")
    whereabouts = _build("whereabouts")
    plugins = _build("cni-plugins")
    return CniBinaries(
        multus_daemon=multus["multus-daemon"],
        multus_shim=multus["multus-shim"],
        whereabouts=whereabouts["whereabouts"],
        ip_control_loop=whereabouts["ip-control-loop"],
        plugins_dir=plugins["loopback"].parent,
    )


def _version_flags(module: str) -> str:
    """What the upstream build scripts stamp into the binaries: for Kubernetes what its
    hack/lib/version.sh does (without it they report v0.0.0-master, which kubectl refuses to
    compare); for the CNI components the release their hack/build-go.sh (Multus, Whereabouts)
    or release script (CNI plugins) sets. The release is the one the module pins."""
    if module in _STAMPED_VERSIONS:
        dependency, variables = _STAMPED_VERSIONS[module]
        version = pinned_version(module, dependency)
        return " ".join(f"-X {variable}={version}" for variable in variables)
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
    environment = dict(os.environ)
    if module in CNI_MODULES:
        environment["CGO_ENABLED"] = "0"  # static: they run inside a minimal VM
        digest.update(b"CGO_ENABLED=0")
    target = cache_root() / f"{module}-{digest.hexdigest()[:16]}"
    names = {name: target / name for _, name in PACKAGES[module]}
    if all(path.is_file() for path in names.values()):
        return names
    cache_root().mkdir(parents=True, exist_ok=True)
    # Two pytest workers may need the same module at once: the second waits for the first's
    # build instead of replacing the entry under a running binary's path.
    with open(cache_root() / f".{module}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(path.is_file() for path in names.values()):
            return names
        _go_build(go, module, directory, environment, target)
    return names


def _go_build(
    go: str, module: str, directory: Path, environment: dict[str, str], target: Path
) -> None:
    """Builds the module's binaries into a staging folder, then renames it to `target`."""
    staging = Path(tempfile.mkdtemp(prefix=f".{module}-", dir=cache_root()))
    # One binary per go build; Go's build cache shares the packages they have in common.
    for package, name in PACKAGES[module]:
        completed = subprocess.run(
            [go, "build", f"-ldflags={_version_flags(module)}", "-o", str(staging / name), package],
            cwd=directory,
            env=environment,
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
