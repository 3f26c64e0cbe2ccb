"""The Karpenter controller, built from github.com/aws/karpenter-provider-aws's cmd/controller at a
pinned version, once per version into the cluster box's cache (testing_support/go_build.py).

go/<version>/ is a small Go module per Karpenter release the box can run: its go.mod requires
the provider at that version (and go.sum holds every module's hash). The module proxy serves
the provider, but for v1.14.1 not the pseudo-version of sigs.k8s.io/karpenter its go.mod
requires; that pseudo-version is the commit tagged v1.14.1 (6e7eab7a0f48, read in
kubernetes-sigs/karpenter's history), so go.mod replaces it with the tag.

The chart comes from the same module: `chart_directory(version)` is charts/karpenter (and
charts/karpenter-crd) in the module cache, which `go mod download` fills.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from testing_support.cluster_box.build import BuildError, cache_root
from testing_support.go_build import GoBuild, built, downloaded_module, required_version

GO_MODULES = Path(__file__).parent / "go"
PROVIDER = "github.com/aws/karpenter-provider-aws"
CONTROLLER_PACKAGE = f"{PROVIDER}/cmd/controller"


@dataclass(frozen=True)
class KarpenterBinaries:
    """The controller of one release and the folder of its module (charts/ inside)."""

    version: str
    controller: Path
    module_directory: Path

    def chart_directory(self, chart: str = "karpenter") -> Path:
        return self.module_directory / "charts" / chart


def module_directory_for(version: str) -> Path:
    directory = GO_MODULES / f"v{version}"
    if not (directory / "go.mod").is_file():
        known = ", ".join(sorted(p.name for p in GO_MODULES.iterdir() if p.is_dir()))
        raise BuildError(
            f"the Karpenter box has no build of Karpenter {version} (known: {known}); add "
            f"{directory.relative_to(GO_MODULES.parent.parent.parent)}/go.mod requiring "
            f"{PROVIDER} v{version}, then `go mod tidy` there"
        )
    pinned = required_version(directory, PROVIDER)
    if pinned != f"v{version}":
        raise BuildError(f"{directory}/go.mod requires {PROVIDER} {pinned}, not v{version}")
    return directory


def build_karpenter(version: str) -> KarpenterBinaries:
    """The controller of Karpenter `version` (built first if the cache lacks it)."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("the Karpenter box needs Go (go on PATH) to build the controller")
    directory = module_directory_for(version)
    # Karpenter's release build stamps its version (its Makefile's LDFLAGS: the tag without its
    # "v", on sigs.k8s.io/karpenter/pkg/operator.Version); the controller logs it and puts it in
    # the user agent of its AWS calls.
    ldflags = f"-X sigs.k8s.io/karpenter/pkg/operator.Version={version}"
    build = GoBuild(
        name=f"karpenter-{version}",
        directory=directory,
        packages=((CONTROLLER_PACKAGE, "karpenter-controller"),),
        error=BuildError,
        flags=(f"-ldflags={ldflags}",),
        environment={"CGO_ENABLED": "0"},
        settings=(ldflags, "CGO_ENABLED=0"),
    )
    controller = built(build, go, cache_root())["karpenter-controller"]
    return KarpenterBinaries(version, controller, _module_source(go, directory, version))


def module_source(version: str) -> Path:
    """The provider module of Karpenter `version` in Go's module cache (charts/, pkg/apis/crds/),
    without building the controller."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("the provider's module needs Go (go on PATH) to download it")
    return _module_source(go, module_directory_for(version), version)


def _module_source(go: str, directory: Path, version: str) -> Path:
    """The provider module's folder in Go's module cache (downloaded if it is not there)."""
    return downloaded_module(go, directory, PROVIDER, f"v{version}", BuildError)
