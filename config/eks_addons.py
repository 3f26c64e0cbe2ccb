"""The version of every EKS-managed add-on the cluster runs, pinned per Kubernetes minor.

Without a pinned version EKS installs its default for the cluster's minor when the add-on is
created, and that default moves: two accounts of one pipeline created weeks apart can run
different versions (issue #50). On 2026-10-02 EKS's default vpc-cni for 1.35 was still
v1.22.4-eksbuild.3, and VPC CNI v1.20.0 to v1.22.4 count the ENIs tagged
`node.k8s.amazonaws.com/no_manage` (the Multus ENIs) again on every reconcile of the IP pool,
never down, until aws-node has no ENI slot left and pods get no IP
(aws/amazon-vpc-cni-k8s issue #3544; the fix, PR #3660, first shipped in v1.23.0: its release
notes, 2026-08-07, and issue #3811, which found it missing from v1.22.3 and v1.22.4). So
vpc-cni is v1.23.0 or newer for every minor, and `cluster.addon_versions` cannot go below.

Sources, read on 2026-12-07 (the botocore data has no add-on versions):
- kube-proxy 1.33-1.35: the EKS User Guide, "Manage kube-proxy in Amazon EKS clusters"
  (managing-kube-proxy), table "kube-proxy versions", in its docs.amazonaws.cn zh_cn copy, the
  newest this project could read; CoreDNS 1.33-1.35: "Manage CoreDNS for DNS in Amazon EKS
  clusters" (managing-coredns), table "CoreDNS versions": 1.34 and 1.35 from the en_us copy on
  docs.amazonaws.cn, 1.33 from the zh_cn copy (the en_us copy's row could not be read).
- vpc-cni: the EKS User Guide's "Amazon VPC CNI versions" table (managing-vpc-cni) still lists
  v1.21.1-eksbuild.7 for 1.29 to 1.35 in every copy this project could read, below the floor.
  v1.23.2-eksbuild.1 is the newest v1.23 build found: `aws eks describe-addon-versions` for
  1.35 on 2026-10-02, as quoted in a third-party design record, and third-party 1.36 clusters
  pinned to it. EKS publishes one vpc-cni build for every minor it supports (every copy of the
  table lists the same version on each row), so it is pinned for 1.33 and 1.34 too.
- eks-pod-identity-agent: the User Guide's "Set up the Amazon EKS Pod Identity Agent"
  (pod-id-agent-setup) has no table per minor, only an example (v1.0.0-eksbuild.1).
  v1.4.0-eksbuild.3 is the newest build found (the same describe-addon-versions record for
  1.35, and third-party 1.36 clusters); the agent's builds are not tied to a minor.
- kube-proxy and CoreDNS for 1.36: the User Guide copies predate 1.36's rows;
  v1.36.0-eksbuild.45 and v1.14.7-eksbuild.11 are the newest builds third-party 1.36 clusters
  pin.
Check any row with `aws eks describe-addon-versions --addon-name <name> --kubernetes-version
<minor>` before relying on it; `cluster.addon_versions` overrides a row without a code change.

To add a minor: one ADDON_VERSIONS entry with a version of each add-on in ADDON_NAMES, from
each add-on's User Guide table (or describe-addon-versions), with the source above;
tests/unit/config/test_eks_addons.py fails while an offered minor or one of the support
calendar's (config/kubernetes_support.py) has none.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass

#: The add-ons the cluster stack creates, by their EKS names.
VPC_CNI = "vpc-cni"
KUBE_PROXY = "kube-proxy"
COREDNS = "coredns"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
ADDON_NAMES = (VPC_CNI, KUBE_PROXY, COREDNS, POD_IDENTITY_AGENT)

#: The first VPC CNI that counts the no_manage ENIs right (aws/amazon-vpc-cni-k8s#3544).
VPC_CNI_FLOOR = (1, 23, 0)

# major.minor.patch-eksbuild.build, as describe-addon-versions spells it (v1.23.2-eksbuild.1).
_ADDON_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-eksbuild\.(\d+)$")

ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.33": {
        VPC_CNI: "v1.23.2-eksbuild.1",
        KUBE_PROXY: "v1.33.10-eksbuild.2",
        COREDNS: "v1.13.2-eksbuild.4",
        POD_IDENTITY_AGENT: "v1.4.0-eksbuild.3",
    },
    "1.34": {
        VPC_CNI: "v1.23.2-eksbuild.1",
        KUBE_PROXY: "v1.34.6-eksbuild.2",
        COREDNS: "v1.13.2-eksbuild.7",
        POD_IDENTITY_AGENT: "v1.4.0-eksbuild.3",
    },
    "1.35": {
        VPC_CNI: "v1.23.2-eksbuild.1",
        KUBE_PROXY: "v1.35.3-eksbuild.2",
        COREDNS: "v1.14.2-eksbuild.4",
        POD_IDENTITY_AGENT: "v1.4.0-eksbuild.3",
    },
    "1.36": {
        VPC_CNI: "v1.23.2-eksbuild.1",
        KUBE_PROXY: "v1.36.0-eksbuild.45",
        COREDNS: "v1.14.7-eksbuild.11",
        POD_IDENTITY_AGENT: "v1.4.0-eksbuild.3",
    },
}


@dataclass(frozen=True)
class EksAddonVersions:
    """The AddonVersion of each EKS-managed add-on of the cluster."""

    vpc_cni: str
    kube_proxy: str
    coredns: str
    pod_identity_agent: str


def version_parts(version: str) -> tuple[int, int, int, int] | None:
    """(major, minor, patch, build) of an EKS add-on version, or None if it is not one."""
    match = _ADDON_VERSION.fullmatch(version)
    if match is None:
        return None
    major, minor, patch, build = (int(part) for part in match.groups())
    return major, minor, patch, build


def coverage_problem(kubernetes_version: str) -> str | None:
    """Why the table cannot pin the add-ons of this minor, or None."""
    if kubernetes_version in ADDON_VERSIONS:
        return None
    return (
        f"{kubernetes_version} has no pinned EKS add-on versions (config/eks_addons.py covers "
        f"{', '.join(ADDON_VERSIONS)}); pick one of those, or add {kubernetes_version} to "
        "ADDON_VERSIONS there with a version of each of "
        f"{', '.join(ADDON_NAMES)} from `aws eks describe-addon-versions --kubernetes-version "
        f"{kubernetes_version}` and its source"
    )


def override_problems(overrides: Mapping[str, str], kubernetes_version: str | None) -> list[str]:
    """What is wrong with `cluster.addon_versions`, one line per problem, all at once;
    `kubernetes_version` (None if it is itself invalid) picks the examples."""
    minor = kubernetes_version if kubernetes_version in ADDON_VERSIONS else None
    row = ADDON_VERSIONS[minor] if minor else list(ADDON_VERSIONS.values())[-1]
    listed = f" --kubernetes-version {minor}" if minor else ""
    problems = []
    for name, version in overrides.items():
        if name not in ADDON_NAMES:
            close = difflib.get_close_matches(name, ADDON_NAMES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{name!r} is not an add-on this app pins; {hint}the add-ons are "
                f"{', '.join(ADDON_NAMES)}"
            )
            continue
        parts = version_parts(version)
        example = row[name]
        if parts is None:
            problems.append(
                f"{name} {version!r} is not an EKS add-on version "
                f"(v<major>.<minor>.<patch>-eksbuild.<build>, for example {example}); "
                f"`aws eks describe-addon-versions --addon-name {name}{listed}` lists them"
            )
        elif name == VPC_CNI and parts[:3] < VPC_CNI_FLOOR:
            floor = "v" + ".".join(map(str, VPC_CNI_FLOOR))
            problems.append(
                f"{name} {version} is older than {floor}: VPC CNI v1.20.0 to v1.22.4 count the "
                "Multus ENIs (tagged node.k8s.amazonaws.com/no_manage) again on every IP pool "
                "reconcile until pods get no IP (aws/amazon-vpc-cni-k8s issue #3544, fixed in "
                f"{floor}); use {floor} or newer, for example {example}, or drop the override"
            )
    return problems


def pinned_versions(kubernetes_version: str, overrides: Mapping[str, str]) -> EksAddonVersions:
    """The table's versions for the minor, each replaced by its override if there is one."""
    versions = {**ADDON_VERSIONS[kubernetes_version], **overrides}
    return EksAddonVersions(
        vpc_cni=versions[VPC_CNI],
        kube_proxy=versions[KUBE_PROXY],
        coredns=versions[COREDNS],
        pod_identity_agent=versions[POD_IDENTITY_AGENT],
    )
