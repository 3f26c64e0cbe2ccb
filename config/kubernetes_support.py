"""Amazon EKS's support calendar for the Kubernetes minors this project offers, and what synth
says about a configured minor.

Source: the Amazon EKS User Guide, "Understand the Kubernetes version lifecycle on EKS",
section "Amazon EKS Kubernetes release calendar" (awsdocs/amazon-eks-user-guide,
latest/ug/versioning/kubernetes-versions.adoc; dates in UTC): standard support for 14 months
from the EKS release, then extended support for 12 months "at an additional cost per cluster
hour" (six times the standard price on the EKS pricing page), after which EKS upgrades the
control plane itself. 1.35's dates are the calendar's of 2026 (cross-checked with
endoflife.date/amazon-eks). 1.36: standard support until 2027-08-02 (issue #50; the copies of
the EKS User Guide this project could read on 2026-12-07 predate 1.36's row), extended support
until 2028-08-02, the calendar's 12 months later and the date a third-party copy of the
calendar (2026-08) lists; EKS released 1.36 on 2026-06-02, 14 months before (a third-party 1.36
upgrade guide, 2026-08). A minor missing here has no published dates this project has read.

To add a minor: its "End of standard support" and "End of extended support" from the calendar,
in UTC; tests/unit/config/test_kubernetes_support.py checks that extended support ends a year
after standard support.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from config.synth_warnings import SynthWarning


@dataclass(frozen=True)
class EksSupport:
    """The last day before extended support's price applies, and the day EKS stops it."""

    end_of_standard_support: date
    end_of_extended_support: date


EKS_SUPPORT: dict[str, EksSupport] = {
    "1.33": EksSupport(date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": EksSupport(date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": EksSupport(date(2027, 3, 27), date(2028, 3, 27)),
    "1.36": EksSupport(date(2027, 8, 2), date(2028, 8, 2)),
}


def _minor(version: str) -> tuple[int, ...]:
    return tuple(map(int, version.split(".")))


def _next_in_standard_support(version: str, today: date) -> str | None:
    """The first newer minor still in standard support: EKS upgrades one minor at a time, so
    that is the step to take (a 1.34 cluster goes to 1.35 even once 1.36 has its dates)."""
    newer = [
        v
        for v, s in EKS_SUPPORT.items()
        if _minor(v) > _minor(version) and today < s.end_of_standard_support
    ]
    return min(newer, key=_minor) if newer else None


def version_support_warnings(version: str, today: date) -> list[str]:
    """What synth should say about `cluster.kubernetes_version` on `today` (UTC)."""
    return [warning.text for warning in version_support_synth_warnings(version, today)]


def version_support_synth_warnings(version: str, today: date) -> list[SynthWarning]:
    """version_support_warnings with their IDs (config/synth_warnings.py)."""
    support = EKS_SUPPORT.get(version)
    step = _next_in_standard_support(version, today)
    upgrade = f"; set cluster.kubernetes_version to {step}" if step else ""
    if support is None:
        return [
            SynthWarning(
                "kubernetes-version-without-support-dates",
                f"cluster.kubernetes_version {version}: this app has no EKS support dates for "
                "it (config/kubernetes_support.py); check the EKS release calendar before you "
                "deploy",
            )
        ]
    if today >= support.end_of_extended_support:
        return [
            SynthWarning(
                "kubernetes-version-past-extended-support",
                f"cluster.kubernetes_version {version}: EKS ended its extended support on "
                f"{support.end_of_extended_support.isoformat()}; EKS creates no new cluster on "
                f"it and upgrades existing control planes itself{upgrade}",
            )
        ]
    if today >= support.end_of_standard_support:
        return [
            SynthWarning(
                "kubernetes-version-in-extended-support",
                f"cluster.kubernetes_version {version}: past EKS standard support since "
                f"{support.end_of_standard_support.isoformat()}; the cluster runs in extended "
                f"support, at six times the standard price per cluster hour, until "
                f"{support.end_of_extended_support.isoformat()}{upgrade}",
            )
        ]
    return []
