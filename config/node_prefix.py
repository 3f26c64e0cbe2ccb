"""Rules of the node_prefix IP management mode of a Multus network (docs/node-prefix-mode.md).

In that mode every node's ENI of the network gets K /28 prefixes out of the subnet's
prefix-type CIDR reservation when it is created, and pods get addresses from them on the node.
The reservation therefore has to hold K prefixes for every node that can land in its AZ.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from typing import Protocol

from config.interface_addresses import IPV4_ADDRESSES_PER_INTERFACE
from config.network_plan import NODE_PREFIX, IpManagementMode, NetworkPlan

#: EC2 delegates IPv4 prefixes of this length only.
PREFIX_LENGTH = 28
ADDRESSES_PER_PREFIX: int = 2 ** (32 - PREFIX_LENGTH)


class NodePool(Protocol):
    """What the sizing reads of a node pool (config.model.NodePoolConfig, one of node_pools)."""

    @property
    def cpu_limit(self) -> str: ...
    def allowed_sizes(self) -> list[tuple[str, int, int]]: ...


def max_pods(pool: NodePool) -> int:
    """The most pods a node of the pool can run: Karpenter's ENI-limited default,
    ENIs x (IPv4 addresses per ENI - 1) + 2, of the pool's largest size (an upper bound:
    Karpenter also subtracts reserved ENIs)."""
    return max(
        enis * (IPV4_ADDRESSES_PER_INTERFACE[family][cpus] - 1) + 2
        for family, cpus, enis in pool.allowed_sizes()
    )


def prefix_slots_per_eni(pool: NodePool) -> int:
    """/28 prefixes one ENI of every size of the pool can hold (the primary address takes a
    slot as well)."""
    return min(
        IPV4_ADDRESSES_PER_INTERFACE[family][cpus] - 1 for family, cpus, _ in pool.allowed_sizes()
    )


def max_nodes(pool: NodePool) -> int:
    """The most nodes the pool can hold: cpu_limit over the vCPUs of its smallest size."""
    limit = pool.cpu_limit
    cores = int(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
    return int(cores // min(cpus for _, cpus, _ in pool.allowed_sizes()))


def default_prefixes_per_node(pool: NodePool) -> int:
    """Enough prefixes for every pod a node of the largest size can run, as long as an ENI of
    every size can hold them; otherwise as many as the smallest holds."""
    return min(math.ceil(max_pods(pool) / ADDRESSES_PER_PREFIX), prefix_slots_per_eni(pool))


def prefixes_in(cidr: str) -> int:
    """How many whole /28 prefixes a reservation holds (0 if it is smaller than a /28)."""
    length = ipaddress.IPv4Network(cidr).prefixlen
    return 2 ** (PREFIX_LENGTH - length) if length <= PREFIX_LENGTH else 0


def check_node_prefix_settings(
    name: str, mode: IpManagementMode, prefixes_per_node: int | None, reservations: Sequence[str]
) -> None:
    """A network's own node_prefix rules (multus.networks[]): prefixes_per_node only in a mode
    that puts prefixes on the node, and reservations of whole /28 prefixes."""
    if not mode.node_local_config:
        if prefixes_per_node is not None:
            raise ValueError(
                f"prefixes_per_node applies to ip_management {NODE_PREFIX.name!r} only; network "
                f"{name!r} uses {mode.name!r}: remove prefixes_per_node"
            )
        return
    for index, reservation in enumerate(reservations):
        if prefixes_in(reservation) == 0:
            raise ValueError(
                f"subnets[{index}].reservation {reservation}: a node_prefix network's "
                f"reservation must hold whole /{PREFIX_LENGTH} prefixes; use a "
                f"/{PREFIX_LENGTH} or larger block"
            )


def check_node_prefix_reservations(pools: Sequence[tuple[str, NodePool, NetworkPlan]]) -> None:
    """Each pool's prefixes_per_node must fit one ENI of its smallest size, and each node_prefix
    reservation must hold K prefixes for every node of every pool that attaches the network:
    Karpenter may put all of a pool's nodes (its max_nodes) in one AZ.

    pools: (config path, pool, the pool's view of the network plan) per pool."""
    demand: dict[tuple[str, str], list[tuple[str, NodePool, int]]] = {}
    for path, pool, plan in pools:
        smallest = min(cpus for _, cpus, _ in pool.allowed_sizes())
        slots = prefix_slots_per_eni(pool)
        for row in plan:
            per_node = row.prefixes_per_node
            if per_node is None:
                continue
            if per_node > slots:
                raise ValueError(
                    f"{row.network_path}.prefixes_per_node: {per_node} /28 prefixes do not fit "
                    f"on one ENI of the smallest size in {path}.instance_cpus ({smallest} "
                    f"vCPUs, {slots} prefixes); lower prefixes_per_node or drop small sizes "
                    f"from {path}.instance_cpus"
                )
            demand.setdefault((row.subnet_path, row.reservation_cidr), []).append(
                (path, pool, per_node)
            )
    for (subnet_path, reservation), users in demand.items():
        needed = sum(max_nodes(pool) * per_node for _, pool, per_node in users)
        held = prefixes_in(reservation)
        if held < needed:
            parts = "; ".join(
                f"up to {max_nodes(pool)} nodes of {path} ({path}.cpu_limit {pool.cpu_limit} / "
                f"smallest {path}.instance_cpus "
                f"{min(cpus for _, cpus, _ in pool.allowed_sizes())}) with {per_node} prefixes "
                "each"
                for path, pool, per_node in users
            )
            raise ValueError(
                f"{subnet_path}.reservation: {reservation} holds {held} /{PREFIX_LENGTH} "
                f"prefixes, but {parts} can run in its AZ, {needed} in all; enlarge the "
                "reservation (and its subnet), lower the pools' cpu_limit or prefixes_per_node"
            )
