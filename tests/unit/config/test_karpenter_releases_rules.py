"""The Karpenter releases the config accepts and the Kubernetes minors each one supports.

Expected values come from aws/karpenter-provider-aws: its release tags (v1.5.0 ... v1.14.1) and
hack/docs/compatibilitymatrix_gen/compatibility.yaml (minK8sVersion and maxK8sVersion per minor),
read on 2026-11-30.
"""

from __future__ import annotations

import pytest

from config import karpenter_releases

# The last tagged patch of each minor (v1.7.3-hash-fix-backport is no release of its own).
LAST_TAGGED_PATCH = {
    "1.5": 8,
    "1.6": 8,
    "1.7": 6,
    "1.8": 8,
    "1.9": 2,
    "1.10": 2,
    "1.11": 3,
    "1.12": 2,
    "1.13": 1,
    "1.14": 1,
}
# compatibility.yaml: (minK8sVersion, maxK8sVersion) of each appVersion 1.x.x.
KUBERNETES_RANGE = {
    "1.5": ("1.26", "1.33"),
    "1.6": ("1.26", "1.34"),
    "1.7": ("1.26", "1.34"),
    "1.8": ("1.26", "1.34"),
    "1.9": ("1.26", "1.35"),
    "1.10": ("1.26", "1.35"),
    "1.11": ("1.26", "1.35"),
    "1.12": ("1.26", "1.35"),
    "1.13": ("1.26", "1.36"),
    "1.14": ("1.26", "1.36"),
}


def _next_minor(version: str, step: int) -> str:
    major, minor = version.split(".")
    return f"{major}.{int(minor) + step}"


def test_the_known_releases_are_exactly_the_tagged_ones() -> None:
    tagged = [f"{m}.{patch}" for m, last in LAST_TAGGED_PATCH.items() for patch in range(last + 1)]
    assert karpenter_releases.released_versions() == tagged


@pytest.mark.parametrize("minor", sorted(LAST_TAGGED_PATCH))
def test_the_last_tagged_patch_is_accepted_and_the_next_one_refused(minor: str) -> None:
    last = LAST_TAGGED_PATCH[minor]
    assert karpenter_releases.release_problem(f"{minor}.{last}") is None
    assert karpenter_releases.release_problem(f"{minor}.{last + 1}") is not None


@pytest.mark.parametrize("minor", sorted(KUBERNETES_RANGE))
def test_every_patch_supports_exactly_the_kubernetes_range_of_its_minor(minor: str) -> None:
    oldest, newest = KUBERNETES_RANGE[minor]
    for patch in range(LAST_TAGGED_PATCH[minor] + 1):
        version = f"{minor}.{patch}"
        assert karpenter_releases.supports(version, oldest), version
        assert karpenter_releases.supports(version, newest), version
        assert not karpenter_releases.supports(version, _next_minor(oldest, -1)), version
        assert not karpenter_releases.supports(version, _next_minor(newest, 1)), version


@pytest.mark.parametrize("version", ["1.14.x", "1.14.", "1.14", "", "v1.14.1"])
def test_a_version_that_is_no_release_number_gets_a_problem_not_an_exception(
    version: str,
) -> None:
    assert karpenter_releases.release_problem(version) is not None


def test_the_problem_offers_the_known_range_and_the_newest_release() -> None:
    problem = karpenter_releases.release_problem("1.99.0")
    assert problem is not None
    assert "1.5.0 ... 1.14.1" in problem
    assert "for example 1.14.1" in problem
