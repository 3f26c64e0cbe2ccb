"""Whether the NodePool's requirements can ever match an instance type.

Karpenter ANDs the requirements (category, family, vCPUs, architecture amd64, Nitro), so a
family outside the categories, an arm64 family or a vCPU count no family has silently narrows
the pool, and an empty intersection means no node ever launches. Each contradiction is named.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from config import instance_types
from config.node_labels import (
    KARPENTER_NODE_LABEL_KEY,
    MULTUS_NOT_READY_TAINT,
    NETWORK_LABEL_PREFIX,
)

# The chart requires kubernetes.io/arch=amd64: the Multus bootstrap and images are x86_64.
NODE_POOL_ARCHITECTURE = "x86_64"


def node_pool_requirement_problems(
    categories: Sequence[str], families: Sequence[str], cpus: Sequence[int]
) -> list[str]:
    """One "field: problem" line per contradiction; empty when every value can match."""
    problems = [
        problem
        for family in families
        if (problem := _family_problem(family, categories)) is not None
    ]
    usable = {
        family: instance_types.NODE_POOL_FAMILIES[family]
        for family in families
        if _family_problem(family, categories) is None
    }
    offered = {size for sizes in usable.values() for size in sizes}
    missing = sorted(set(cpus) - offered)
    if usable and missing:
        problems.append(
            f"instance_cpus: no size of {list(usable)} has {missing} vCPUs "
            f"(their sizes: {sorted(offered)}); drop {missing} or add a family that has them"
        )
    problems += [
        f"instance_families: {family} has no size with {sorted(cpus)} vCPUs "
        f"(its sizes: {sorted(sizes)}); add one of those to instance_cpus or drop {family}"
        for family, sizes in usable.items()
        if not set(sizes) & set(cpus) and set(cpus) & offered
    ]
    return problems


def _family_problem(family: str, categories: Sequence[str]) -> str | None:
    if family not in instance_types.ec2_families():
        close = difflib.get_close_matches(family, sorted(instance_types.ec2_families()), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else " (for example m6i)"
        return f"instance_families: {family!r} is not an EC2 instance family{hint}"
    architecture = instance_types.architecture(family)
    if architecture != NODE_POOL_ARCHITECTURE:
        return (
            f"instance_families: {family} is {architecture}, but the NodePool launches "
            f"{NODE_POOL_ARCHITECTURE} (amd64) nodes; pick an x86_64 family, for example m6i"
        )
    category = instance_types.category(family)
    if category not in categories:
        return (
            f"instance_families: {family} is in category {category!r}, which "
            f"instance_categories {list(categories)} excludes; add {category!r} there or drop "
            f"{family}"
        )
    if family not in instance_types.NODE_POOL_FAMILIES:
        return (
            f"instance_families: {family} has no network-interface data in "
            "config/instance_types.py (NODE_POOL_FAMILIES); add it there or pick a listed family"
        )
    return None


# Label keys and values (Kubernetes, "Labels and Selectors", syntax and character set): an
# optional DNS-subdomain prefix of at most 253 characters and "/", then a name of at most 63
# characters, alphanumeric at both ends with '-', '_' and '.' between; values likewise, or empty.
# Taint keys and values follow the same rules (Kubernetes API, core/v1 Taint; the NodePool CRD's
# taint pattern).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_KEY = re.compile(rf"^(?:(?P<prefix>{_DNS_SUBDOMAIN})/)?{_LABEL_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_MAX_PREFIX = 253
# Label domains Karpenter sets itself; the NodePool CRD refuses them in template labels
# (karpenter.sh_nodepools.yaml, spec.template.metadata.labels x-kubernetes-validations).
KARPENTER_LABEL_DOMAINS = ("karpenter.sh", "karpenter.k8s.aws")
KARPENTER_LABELS = ("kubernetes.io/hostname",)


def _key_problem(key: str, what: str) -> str | None:
    matched = _LABEL_KEY.match(key)
    if matched is None or len(matched.group("prefix") or "") > _MAX_PREFIX:
        return (
            f"{key!r} is not a Kubernetes {what} key: an optional DNS prefix and '/', then at "
            "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
            "digit (for example example.com/network-function)"
        )
    return None


def label_problems(labels: dict[str, str]) -> list[str]:
    """One "labels: problem" line per key or value Kubernetes or Karpenter refuses, or that
    collides with a label this app sets on the pool's nodes."""
    problems = []
    for key, value in labels.items():
        problem = _key_problem(key, "label") or _reserved_label_problem(key)
        if problem is None and not _LABEL_VALUE.match(value):
            problem = (
                f"{key}={value!r}: a label value is at most 63 letters, digits, '-', '_' or "
                "'.', starting and ending with a letter or digit (or empty)"
            )
        if problem:
            problems.append(f"labels: {problem}")
    return problems


def _reserved_label_problem(key: str) -> str | None:
    if key == KARPENTER_NODE_LABEL_KEY or key.startswith(NETWORK_LABEL_PREFIX):
        return (
            f"{key!r} is set by this app ({KARPENTER_NODE_LABEL_KEY} on every Karpenter node, "
            f"{NETWORK_LABEL_PREFIX}<network> per attached network); pick a key of your own"
        )
    domain = key.partition("/")[0] if "/" in key else ""
    if key in KARPENTER_LABELS or domain.endswith(KARPENTER_LABEL_DOMAINS):
        return (
            f"{key!r} is set by Karpenter (the NodePool refuses it in template labels); pick a "
            "key of your own, for example example.com/network-function"
        )
    return None


def taint_problems(taints: Sequence[tuple[str, str, str]]) -> list[str]:
    """One "taints[i]: problem" line per (key, value, effect) Kubernetes refuses, that collides
    with the app's Multus startup taint or Karpenter's own taints, or that repeats a key and
    effect (a node holds one taint per key and effect)."""
    problems = []
    seen: set[tuple[str, str]] = set()
    for index, (key, value, effect) in enumerate(taints):
        problem = _key_problem(key, "taint")
        if problem is None and (key, effect) in seen:
            problem = f"{key}:{effect} is listed twice; a node holds one taint per key and effect"
        seen.add((key, effect))
        if problem is None and key == MULTUS_NOT_READY_TAINT.key:
            problem = (
                f"{key!r} is the startup taint this app puts on Multus nodes and cleartaints "
                "removes; pick a key of your own"
            )
        if problem is None and key.partition("/")[0].endswith("karpenter.sh"):
            problem = f"{key!r}: the karpenter.sh domain is Karpenter's; pick a key of your own"
        if problem is None and not _LABEL_VALUE.match(value):
            problem = (
                f"value {value!r}: at most 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit (or empty)"
            )
        if problem:
            problems.append(f"taints[{index}]: {problem}")
    return problems
