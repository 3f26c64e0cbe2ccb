"""The default Kubernetes minor and what synth says about a minor past EKS support.

The dates are the EKS release calendar's (config/kubernetes_support.py names it): 1.34's
standard support ended on 2026-12-02, its extended support ends on 2027-12-02."""

from __future__ import annotations

from datetime import date, timedelta
from typing import get_args

from cdk_constructs.eks_cluster import KUBECTL_LAYERS
from config import parse_config
from config.karpenter_releases import supports
from config.kubernetes_support import EKS_SUPPORT, version_support_warnings
from config.model import KarpenterConfig, KubernetesVersion


def minor_key(version: str) -> tuple[int, ...]:
    return tuple(map(int, version.split(".")))


def test_the_default_is_one_of_the_two_newest_minors_everything_pinned_supports() -> None:
    # A minor reaches the calendar before the default moves to it, in a change of its own
    # (1.36 has its dates; the default is still 1.35).
    pinned_karpenter = KarpenterConfig().version
    candidates = sorted(
        (
            version
            for version in EKS_SUPPORT
            if version in get_args(KubernetesVersion)
            and version in KUBECTL_LAYERS
            and supports(pinned_karpenter, version)
        ),
        key=minor_key,
    )
    assert parse_config({}).cluster.kubernetes_version in candidates[-2:]


def test_every_offered_minor_has_eks_support_dates() -> None:
    assert set(get_args(KubernetesVersion)) <= set(EKS_SUPPORT)


def test_every_minor_with_eks_dates_is_offered_and_its_extended_support_follows() -> None:
    for version, support in EKS_SUPPORT.items():
        assert version in get_args(KubernetesVersion)
        # 14 months of standard support, then 12 of extended (the EKS User Guide).
        assert support.end_of_extended_support == support.end_of_standard_support.replace(
            year=support.end_of_standard_support.year + 1
        )


def test_no_warning_up_to_the_last_day_of_standard_support() -> None:
    assert version_support_warnings("1.34", date(2026, 12, 1)) == []


def test_from_the_end_of_standard_support_synth_warns_of_the_price_and_names_the_upgrade() -> None:
    (warning,) = version_support_warnings("1.34", date(2026, 12, 2))
    assert "cluster.kubernetes_version 1.34" in warning
    assert "2026-12-02" in warning and "six times" in warning
    assert "set cluster.kubernetes_version to 1.35" in warning


def test_past_extended_support_synth_says_eks_upgrades_the_control_plane() -> None:
    end = EKS_SUPPORT["1.34"].end_of_extended_support
    assert version_support_warnings("1.34", end - timedelta(days=1))[0].count("six times") == 1
    (warning,) = version_support_warnings("1.34", end)
    assert "ended its extended support" in warning and "upgrades existing control planes" in warning


def test_1_36_is_in_standard_support_until_2027_08_02() -> None:
    # issue #50; config/kubernetes_support.py names the source.
    assert version_support_warnings("1.36", date(2027, 8, 1)) == []
    (warning,) = version_support_warnings("1.36", date(2027, 8, 2))
    assert "2027-08-02" in warning and "until 2028-08-02" in warning


def test_a_minor_without_eks_dates_is_named_so() -> None:
    (warning,) = version_support_warnings("1.37", date(2026, 12, 4))
    assert "no EKS support dates" in warning
