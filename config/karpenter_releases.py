"""Karpenter releases this project knows, with the Kubernetes minors each one supports.

Taken on 2026-11-30 from Karpenter's compatibility page
(https://karpenter.sh/docs/upgrading/compatibility/, generated from
hack/docs/compatibilitymatrix_gen/compatibility.yaml in aws/karpenter-provider-aws) and the
repository's release tags (v1.5.0 ... v1.14.1). Releases before 1.5 support no Kubernetes minor
this project offers (1.33 and later) and are left out.

To add a release: append its patch version to the minor's entry, or add a new minor with the
Kubernetes range from the compatibility page. The chart and CRDs of every listed version are
published at oci://public.ecr.aws/karpenter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KarpenterMinor:
    """The patch releases of one Karpenter minor and the Kubernetes minors it supports."""

    patches: tuple[int, ...]
    kubernetes_min: str
    kubernetes_max: str

    def supports(self, kubernetes_version: str) -> bool:
        return (
            _minor(self.kubernetes_min) <= _minor(kubernetes_version) <= _minor(self.kubernetes_max)
        )


KARPENTER_RELEASES: dict[str, KarpenterMinor] = {
    "1.5": KarpenterMinor(tuple(range(9)), "1.26", "1.33"),
    "1.6": KarpenterMinor(tuple(range(9)), "1.26", "1.34"),
    "1.7": KarpenterMinor(tuple(range(7)), "1.26", "1.34"),
    "1.8": KarpenterMinor(tuple(range(9)), "1.26", "1.34"),
    "1.9": KarpenterMinor(tuple(range(3)), "1.26", "1.35"),
    "1.10": KarpenterMinor(tuple(range(3)), "1.26", "1.35"),
    "1.11": KarpenterMinor(tuple(range(4)), "1.26", "1.35"),
    "1.12": KarpenterMinor(tuple(range(3)), "1.26", "1.35"),
    "1.13": KarpenterMinor(tuple(range(2)), "1.26", "1.36"),
    "1.14": KarpenterMinor(tuple(range(2)), "1.26", "1.36"),
}


def _minor(kubernetes_version: str) -> tuple[int, int]:
    major, minor = kubernetes_version.split(".")
    return int(major), int(minor)


def released_versions() -> list[str]:
    return [
        f"{minor}.{patch}"
        for minor, release in KARPENTER_RELEASES.items()
        for patch in release.patches
    ]


def release_problem(version: str) -> str | None:
    """Why `version` is not a Karpenter release this project knows, or None."""
    minor, _, patch = version.rpartition(".")
    release = KARPENTER_RELEASES.get(minor)
    if release is not None and patch.isdigit() and int(patch) in release.patches:
        return None
    newest = released_versions()[-1]
    return (
        f"{version} is not a Karpenter release this project knows; pick one of "
        f"{released_versions()[0]} ... {newest} (for example {newest}), or add a newer release "
        "to config/karpenter_releases.py"
    )


def supports(version: str, kubernetes_version: str) -> bool:
    return KARPENTER_RELEASES[version.rpartition(".")[0]].supports(kubernetes_version)


def first_supporting(kubernetes_version: str) -> str | None:
    """The first known release that supports the Kubernetes minor (the old
    MIN_KARPENTER_FOR_KUBERNETES table, derived from the releases)."""
    for minor, release in KARPENTER_RELEASES.items():
        if release.supports(kubernetes_version):
            return f"{minor}.{release.patches[0]}"
    return None


#: The first minor whose karpenter-crd chart ships the NodeOverlay CRD (karpenter.sh/v1alpha1)
#: and whose controller chart has the nodeOverlay feature gate (aws/karpenter-provider-aws
#: v1.7.0: charts/karpenter-crd/templates/karpenter.sh_nodeoverlays.yaml and NodeOverlay= in
#: charts/karpenter/templates/deployment.yaml's FEATURE_GATES; v1.6.8 has neither).
NODE_OVERLAY_SINCE = "1.7"


def has_node_overlay(version: str) -> bool:
    """Whether the release's charts ship the NodeOverlay CRD and its feature gate."""
    return _minor(version.rpartition(".")[0]) >= _minor(NODE_OVERLAY_SINCE)
