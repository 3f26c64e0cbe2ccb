"""Whether the NodePool's requirements can ever match an instance type.

Karpenter ANDs the requirements (category, family, vCPUs, architecture amd64, Nitro), so a
family outside the categories, an arm64 family or a vCPU count no family has silently narrows
the pool, and an empty intersection means no node ever launches. Each contradiction is named.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from config import instance_types

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
