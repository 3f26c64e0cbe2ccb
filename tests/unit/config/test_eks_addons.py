"""The EKS add-on versions pinned per Kubernetes minor (config/eks_addons.py names the sources):
every minor the app offers or the support calendar lists has a row, every row pins each add-on
in EKS's format, and vpc-cni is never below v1.23.0 (aws/amazon-vpc-cni-k8s#3544)."""

from __future__ import annotations

from typing import get_args

import pytest

from config import ConfigError, eks_addons, parse_config
from config.eks_addons import ADDON_NAMES, ADDON_VERSIONS, VPC_CNI_FLOOR, version_parts
from config.kubernetes_support import EKS_SUPPORT
from config.model import KubernetesVersion


def minor_of(version: str) -> tuple[int, ...]:
    return tuple(map(int, version.split(".")))


def test_every_offered_minor_and_every_minor_of_the_support_calendar_has_a_row() -> None:
    # A minor added to KubernetesVersion or config/kubernetes_support.py fails here until
    # config/eks_addons.py pins its add-ons.
    covered = set(ADDON_VERSIONS)
    assert set(get_args(KubernetesVersion)) <= covered
    assert set(EKS_SUPPORT) <= covered


def test_rows_are_in_minor_order() -> None:
    assert list(ADDON_VERSIONS) == sorted(ADDON_VERSIONS, key=minor_of)


@pytest.mark.parametrize("minor", list(ADDON_VERSIONS))
def test_a_row_pins_each_addon_in_the_eks_format(minor: str) -> None:
    row = ADDON_VERSIONS[minor]
    assert tuple(row) == ADDON_NAMES
    assert all(version_parts(version) for version in row.values()), row


@pytest.mark.parametrize("minor", list(ADDON_VERSIONS))
def test_every_row_pins_a_vpc_cni_that_counts_the_multus_enis_right(minor: str) -> None:
    parts = version_parts(ADDON_VERSIONS[minor]["vpc-cni"])
    assert parts is not None and parts[:3] >= VPC_CNI_FLOOR


@pytest.mark.parametrize("minor", list(ADDON_VERSIONS))
def test_kube_proxy_is_the_build_of_the_rows_minor(minor: str) -> None:
    # EKS builds kube-proxy per Kubernetes minor: v1.35.x for 1.35.
    parts = version_parts(ADDON_VERSIONS[minor]["kube-proxy"])
    assert parts is not None and parts[:2] == minor_of(minor)


@pytest.mark.parametrize(
    ("version", "parts"),
    [
        ("v1.23.2-eksbuild.1", (1, 23, 2, 1)),
        ("v1.36.0-eksbuild.45", (1, 36, 0, 45)),
        ("1.23.2-eksbuild.1", None),
        ("v1.23.2", None),
        ("v1.23-eksbuild.1", None),
        ("v1.23.2-eksbuild.1 ", None),
    ],
)
def test_the_eks_addon_version_format(version: str, parts: tuple[int, ...] | None) -> None:
    assert version_parts(version) == parts


def test_a_minor_without_a_row_stops_synth_naming_the_field_the_rows_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(eks_addons.ADDON_VERSIONS, "1.36")
    with pytest.raises(ConfigError) as caught:
        parse_config({"cluster": {"kubernetes_version": "1.36"}})
    message = str(caught.value)
    assert "cluster.kubernetes_version: 1.36 has no pinned EKS add-on versions" in message
    assert "covers 1.33, 1.34, 1.35" in message
    assert "add 1.36 to ADDON_VERSIONS there" in message
    assert "aws eks describe-addon-versions --kubernetes-version 1.36" in message


def test_an_override_replaces_only_its_addon() -> None:
    pinned = eks_addons.pinned_versions("1.35", {"kube-proxy": "v1.35.3-eksbuild.29"})
    assert pinned.kube_proxy == "v1.35.3-eksbuild.29"
    assert pinned.vpc_cni == ADDON_VERSIONS["1.35"]["vpc-cni"]
    assert pinned.coredns == ADDON_VERSIONS["1.35"]["coredns"]
    assert pinned.pod_identity_agent == ADDON_VERSIONS["1.35"]["eks-pod-identity-agent"]


def test_every_problem_of_the_overrides_is_named_at_once() -> None:
    problems = eks_addons.override_problems(
        {"vpc_cni": "v1.23.2-eksbuild.1", "coredns": "1.14", "vpc-cni": "v1.20.4-eksbuild.1"},
        "1.35",
    )
    assert len(problems) == 3
    assert "did you mean 'vpc-cni'?" in problems[0]
    assert "coredns '1.14' is not an EKS add-on version" in problems[1]
    assert "#3544" in problems[2]


def test_a_bad_override_is_named_beside_the_other_fields_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {"cluster": {"public_access_cidrs": [], "addon_versions": {"coredns": "1.14"}}}
        )
    message = str(caught.value)
    assert "cluster.public_access_cidrs: an empty list" in message
    assert "cluster.addon_versions: coredns '1.14' is not an EKS add-on version" in message
