"""Whether a pool's instance types have the network cards, and on each card the interfaces,
its networks attach to (multus.networks[].network_card; docs/network.md, Network cards).

EC2 attaches an ENI to the network card AttachNetworkInterface's NetworkCardIndex names; an
instance type without that card refuses it, so the node's bootstrap would fail and the node
power off. Karpenter has no label for the number of network cards (aws/karpenter-provider-aws,
pkg/apis/v1/labels.go, the well-known labels), so a NodePool cannot require it: the pool's own
instance_families x instance_cpus must only hold sizes with the card. Each card has its own
interfaces (config/instance_types.py, MULTI_CARD_SIZES): the primary ENI and the networks on
card 0 count against card 0's, the networks on another card against that card's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from config import instance_types
from config.network_plan import NetworkPlanRow
from config.node_pool_rules import NODE_POOL_ARCHITECTURE


def network_card_problems(
    pool_path: str, networks: Sequence[NetworkPlanRow], sizes: Sequence[tuple[str, int]]
) -> list[str]:
    """One line per network on a card some of the pool's sizes (family, vCPUs) lack, and per
    card other than 0 whose networks outnumber its interfaces; `networks` is one row per
    network of the pool's view of the plan (card 0's count is the ENI check's)."""
    problems = [
        _missing_card_problem(pool_path, row, lacking, sizes)
        for row in networks
        if row.network_card > 0
        and (lacking := [size for size in sizes if _cards(size) <= row.network_card])
    ]
    if problems:
        return problems
    per_card = Counter[int]()
    for row in networks:
        if row.network_card > 0:
            per_card[row.network_card] += len(row.eni_slots)
    for card, count in sorted(per_card.items()):
        family, cpus = min(sizes, key=lambda size: instance_types.interfaces_per_card(*size)[card])
        available = instance_types.interfaces_per_card(family, cpus)[card]
        if count > available:
            problems.append(
                f"{pool_path}.networks: {count} Multus ENIs are on network_card {card}, but "
                f"{instance_types.size_name(family, cpus)} takes {available} network "
                f"interfaces there; move some to another network_card, attach fewer networks "
                "or lower enis_per_node"
            )
    return problems


def card_zero_enis(networks: Sequence[NetworkPlanRow]) -> int:
    """Multus ENIs a node of the pool attaches to card 0 (one per network row, enis_per_node
    for a host-device one), which count against card 0's interfaces with the primary ENI."""
    return sum(len(row.eni_slots) for row in networks if row.network_card == 0)


def _cards(size: tuple[str, int]) -> int:
    return len(instance_types.interfaces_per_card(*size))


def _missing_card_problem(
    pool_path: str,
    row: NetworkPlanRow,
    lacking: Sequence[tuple[str, int]],
    sizes: Sequence[tuple[str, int]],
) -> str:
    card = row.network_card
    names = ", ".join(instance_types.size_name(*size) for size in lacking[:4])
    more = f" and {len(lacking) - 4} more" if len(lacking) > 4 else ""
    return (
        f"{pool_path}.networks: {row.network} is on network_card {card} "
        f"({row.network_path}.network_card), but {names}{more} of the pool's instance types "
        f"have no network card {card} (EC2 refuses the attachment and the node powers off); "
        f"allow only sizes with {card + 1} or more cards: {_sizes_with(card, sizes)}; or set "
        f"{row.network_path}.network_card to 0, or keep {row.network} out of this pool"
    )


def _sizes_with(card: int, sizes: Sequence[tuple[str, int]]) -> str:
    """The pool's families' sizes that have the card, else the NodePool families' ones."""
    pool_families = {family for family, _ in sizes}
    candidates = [
        (family, cpus)
        for family, multi_card in instance_types.MULTI_CARD_SIZES.items()
        if instance_types.architecture(family) == NODE_POOL_ARCHITECTURE
        for cpus, cards in multi_card.items()
        if len(cards) > card
    ]
    own = [size for size in candidates if size[0] in pool_families]
    chosen = own or candidates
    if not chosen:
        return f"no NodePool family has {card + 1} cards (config/instance_types.py)"
    families = sorted({family for family, _ in chosen})
    cpus = sorted({cpus for _, cpus in chosen})
    examples = ", ".join(instance_types.size_name(*size) for size in sorted(chosen)[:3])
    more = ", ..." if len(chosen) > 3 else ""
    return f"instance_families {families} with instance_cpus {cpus} ({examples}{more})"
