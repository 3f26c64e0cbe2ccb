"""EC2 instance types: which exist, the architecture of each family, and for the families a
Karpenter NodePool may use, their sizes (vCPUs) and network interfaces per size.

- Names: the EC2 API model that ships with botocore (the `InstanceType` enum), no network needed.
- Architecture: ARM64_FAMILIES below, taken on 2026-11-30 from "Amazon EC2 instance types"
  (https://docs.aws.amazon.com/ec2/latest/instancetypes/instance-types.html): Graviton families
  (a1, a "g" after the generation: m7g, c7gn, im4gn, is4gen, x2gd, ...), Apple silicon Macs
  (mac2*, mac-m*) and NVIDIA Grace (p6e-gb200). Every other family is x86_64. The names alone
  do not tell (mac2.metal is arm64), so the set is explicit; a test fails when botocore knows a
  Graviton-looking family that the set does not.
- Network interfaces: NODE_POOL_FAMILIES below, the m/c/r Nitro families, taken on 2026-11-30
  from Karpenter's VPC limits (aws/karpenter-provider-aws, pkg/providers/instancetype/
  zz_generated.vpclimits.go, generated 2026-08-06 from EC2 DescribeInstanceTypes), which are
  the "Network specifications" tables of https://docs.aws.amazon.com/ec2/latest/instancetypes/
  gp.html, co.html and mo.html (tests spot-check sizes against them). The count is the
  interfaces of the default network card, the one the node bootstrap attaches Multus ENIs to.
  Bare-metal sizes are left out: the NodePool requires the Nitro hypervisor, which Karpenter
  does not report for metal. vCPUs follow the size name (medium 1, large 2, xlarge 4,
  Nxlarge 4N).

- Network cards: MULTI_CARD_SIZES below, the NODE_POOL_FAMILIES sizes with more than one
  network card and the interfaces each card takes, from the same Karpenter file
  (NetworkCards: MaximumNetworkInterfaces per NetworkCardIndex, DefaultNetworkCardIndex 0 for
  all of them; EC2 DescribeInstanceTypes' NetworkInfo.NetworkCards), the "Network cards"
  column of the same EC2 pages. Every other size has one card. Card 0 takes the count of
  NODE_POOL_FAMILIES (a test holds them equal). A network's ENIs go to the card of its
  multus.networks[].network_card (config/network_cards.py).

- Memory: MEMORY_GIB_PER_VCPU below, taken on 2026-12-04 from the same instance-type pages
  (gp.html, co.html, mo.html, "Memory (GiB)"): the m/c/r NodePool families have 4, 2 and 8 GiB
  per vCPU, except the families in MORE_MEMORY_GIB (c5n: 5.25 GiB per 2 vCPUs). botocore's EC2
  model has no memory figures (only the type names). The figure is a floor: a family with more
  memory than its category's ratio and no entry in MORE_MEMORY_GIB is only checked too strictly
  (node_profile.hugepages_2mi), never too loosely.

To add a family: put it into ARM64_FAMILIES if it is arm64; for NodePool use add a line to
NODE_POOL_FAMILIES with its vCPUs -> network interfaces per (non-metal) size, and to
MORE_MEMORY_GIB if it has more memory per vCPU than its category's ratio, and to
MULTI_CARD_SIZES the sizes with more than one network card.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

import botocore.session

Architecture = Literal["arm64", "x86_64"]

ARM64_FAMILIES: frozenset[str] = frozenset(
    {
        "a1",
        *("c6g", "c6gd", "c6gn", "c7g", "c7gd", "c7gn", "c8g", "c8gb", "c8gd", "c8gn"),
        *("c9g", "c9gd", "g5g", "hpc7g", "i4g", "i8g", "i8ge", "im4gn", "is4gen"),
        *("m6g", "m6gd", "m7g", "m7gd", "m8g", "m8gb", "m8gd", "m8gn", "m9g", "m9gd"),
        *("mac2", "mac2-m1ultra", "mac2-m2", "mac2-m2pro"),
        *("mac-m3ultra", "mac-m4", "mac-m4max", "mac-m4pro"),
        "p6e-gb200",
        *("r6g", "r6gd", "r7g", "r7gd", "r8g", "r8gb", "r8gd", "r8gn", "r9g", "r9gd"),
        *("t4g", "x2gd", "x8g"),
    }
)

# Family -> {vCPUs of a size: network interfaces of that size}.
NODE_POOL_FAMILIES: dict[str, dict[int, int]] = {
    "c5": {2: 3, 4: 4, 8: 4, 16: 8, 36: 8, 48: 8, 72: 15, 96: 15},
    "c5a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "c5ad": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "c5d": {2: 3, 4: 4, 8: 4, 16: 8, 36: 8, 48: 8, 72: 15, 96: 15},
    "c5n": {2: 3, 4: 4, 8: 4, 16: 8, 36: 8, 72: 15},
    "c6a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "c6g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c6gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c6gn": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c6i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "c6id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "c6in": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 8},
    "c7a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "c7g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c7gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c7gn": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c7i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "c7i-flex": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "c8a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 192: 24},
    "c8g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "c8gb": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "c8gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "c8gn": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "c8i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "c8i-flex": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16},
    "c8ib": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "c8id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "c8in": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "c8ine": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12},
    "c9g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 24},
    "c9gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 24},
    "m5": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5ad": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5d": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5dn": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5n": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "m5zn": {2: 3, 4: 4, 8: 4, 12: 8, 24: 8, 48: 15},
    "m6a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "m6g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "m6gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "m6i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "m6id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "m6idn": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 8},
    "m6in": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 8},
    "m7a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "m7g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "m7gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "m7i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "m7i-flex": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "m8a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 192: 24},
    "m8azn": {1: 3, 2: 4, 4: 4, 12: 8, 24: 8, 48: 16, 96: 16},
    "m8g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "m8gb": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "m8gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "m8gn": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "m8i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "m8i-flex": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16},
    "m8ib": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "m8id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "m8idb": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "m8idn": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "m8in": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "m8ine": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12},
    "m9g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 24},
    "m9gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 24},
    "r5": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5ad": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5b": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5d": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5dn": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r5n": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15},
    "r6a": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "r6g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "r6gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "r6i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "r6id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15},
    "r6idn": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 8},
    "r6in": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 8},
    "r7a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 128: 15, 192: 15},
    "r7g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "r7gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15},
    "r7i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "r7iz": {2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 128: 15},
    "r8a": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 192: 24},
    "r8g": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "r8gb": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "r8gd": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 8, 48: 8, 64: 15, 96: 15, 192: 15},
    "r8gn": {1: 2, 2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 24, 192: 12},
    "r8i": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "r8i-flex": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16},
    "r8ib": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "r8id": {2: 3, 4: 4, 8: 4, 16: 8, 32: 10, 48: 12, 64: 16, 96: 16, 128: 24, 192: 24, 384: 24},
    "r8idb": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "r8idn": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
    "r8in": {2: 4, 4: 4, 8: 4, 16: 8, 32: 8, 48: 12, 64: 16, 96: 16, 128: 16, 192: 24, 384: 12},
}

# Family -> {vCPUs of a size with several network cards: network interfaces of each card}.
MULTI_CARD_SIZES: dict[str, dict[int, tuple[int, ...]]] = {
    "c6in": {128: (8, 8)},
    "c8gb": {192: (12, 12)},
    "c8gn": {192: (12, 12)},
    "c8ib": {384: (12, 12)},
    "c8in": {384: (12, 12)},
    "m6idn": {128: (8, 8)},
    "m6in": {128: (8, 8)},
    "m8gb": {192: (12, 12)},
    "m8gn": {192: (12, 12)},
    "m8ib": {384: (12, 12)},
    "m8idb": {384: (12, 12)},
    "m8idn": {384: (12, 12)},
    "m8in": {384: (12, 12)},
    "r6idn": {128: (8, 8)},
    "r6in": {128: (8, 8)},
    "r8gb": {192: (12, 12)},
    "r8gn": {192: (12, 12)},
    "r8ib": {384: (12, 12)},
    "r8idb": {384: (12, 12)},
    "r8idn": {384: (12, 12)},
    "r8in": {384: (12, 12)},
}


def interfaces_per_card(family: str, vcpus: int) -> tuple[int, ...]:
    """The network interfaces each network card of a NodePool family's size takes, card 0
    first (one card unless MULTI_CARD_SIZES lists the size)."""
    return MULTI_CARD_SIZES.get(family, {}).get(vcpus) or (NODE_POOL_FAMILIES[family][vcpus],)


# Category -> GiB of memory per vCPU of its NodePool families.
MEMORY_GIB_PER_VCPU: dict[str, float] = {"c": 2, "m": 4, "r": 8}
# Family -> {vCPUs of a size: GiB of memory}, where the category's ratio understates it.
MORE_MEMORY_GIB: dict[str, dict[int, float]] = {
    "c5n": {2: 5.25, 4: 10.5, 8: 21, 16: 42, 36: 96, 72: 192},
}


def memory_mib(family: str, vcpus: int) -> int:
    """MiB of memory of a NodePool family's size (at least; see MEMORY_GIB_PER_VCPU)."""
    gib = MORE_MEMORY_GIB.get(family, {}).get(vcpus, MEMORY_GIB_PER_VCPU[category(family)] * vcpus)
    return int(gib * 1024)


def size_name(family: str, vcpus: int) -> str:
    """The instance type of a family's size with that many vCPUs (medium 1, large 2, xlarge
    4, Nxlarge 4N)."""
    names = {1: "medium", 2: "large", 4: "xlarge"}
    return f"{family}.{names.get(vcpus) or f'{vcpus // 4}xlarge'}"


@cache
def ec2_instance_types() -> frozenset[str]:
    """Instance types from the EC2 API model that ships with botocore."""
    model = botocore.session.get_session().get_service_model("ec2")
    return frozenset(model.shape_for("InstanceType").enum)


@cache
def ec2_families() -> frozenset[str]:
    return frozenset(family_of(instance_type) for instance_type in ec2_instance_types())


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def architecture(family: str) -> Architecture:
    return "arm64" if family in ARM64_FAMILIES else "x86_64"


def is_macos_only(family: str) -> bool:
    """Mac instances run macOS on Dedicated Hosts; no EKS AMI runs there."""
    return family.startswith("mac")


def category(family: str) -> str:
    """Karpenter's karpenter.k8s.aws/instance-category: the letters before the generation."""
    match = re.match(r"[a-z]+", family)
    return match.group(0) if match else family
