"""Build the box's binaries once per version, into a cache on the machine outside the clone.

Two entry points: `build_all()` builds the control plane (Kubernetes and etcd) and
`build_cni()` the CNI components (the Multus thick plugin, Whereabouts and the reference CNI
plugins, at the releases the project deploys); `build_all()` never waits for the CNI builds.

Each module under go/ is built as testing_support/go_build.py builds every Go binary of the
tests (a cache entry per go.mod, go.sum, `go version` and flags). The CNI components are built
with CGO_ENABLED=0: static binaries, run inside a minimal VM.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from testing_support.go_build import GoBuild, built, required_version

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
    version = required_version(GO_MODULES / module, dependency)
    if version is None:
        raise BuildError(f"go/{module}/go.mod requires no {dependency}")
    return version


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


def _go_build(module: str) -> GoBuild:
    ldflags = _version_flags(module)
    static = module in CNI_MODULES  # run inside a minimal VM
    return GoBuild(
        name=module,
        directory=GO_MODULES / module,
        packages=PACKAGES[module],
        error=BuildError,
        flags=(f"-ldflags={ldflags}",),
        environment={"CGO_ENABLED": "0"} if static else {},
        settings=(ldflags, *(("CGO_ENABLED=0",) if static else ())),
    )


def _build(module: str) -> dict[str, Path]:
    go = shutil.which("go")
    if go is None:
        raise BuildError("the cluster box needs Go (go on PATH) to build its binaries")
    return built(_go_build(module), go, cache_root())
