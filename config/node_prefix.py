"""Rules of the node_prefix IP management mode of a Multus network (docs/node-prefix-mode.md).

In that mode every node's ENI of the network gets K /28 prefixes out of the subnet's
prefix-type CIDR reservation when it is created, and pods get addresses from them on the node.
The reservation therefore has to hold K prefixes for every node that can land in its AZ.
"""

from __future__ import annotations

import ipaddress
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config.model import AppConfig, MultusNetworkConfig

#: EC2 delegates IPv4 prefixes of this length only.
PREFIX_LENGTH = 28
ADDRESSES_PER_PREFIX = 2 ** (32 - PREFIX_LENGTH)


def default_prefixes_per_node(max_pods: int, prefix_slots_per_eni: int) -> int:
    """Enough prefixes for every pod a node of the largest size can run (EKS max pods), as long
    as an ENI of the smallest size can hold them; otherwise as many as it holds."""
    return min(math.ceil(max_pods / ADDRESSES_PER_PREFIX), prefix_slots_per_eni)


def prefixes_in(cidr: str) -> int:
    """How many whole /28 prefixes a reservation holds (0 if it is smaller than a /28)."""
    length = ipaddress.IPv4Network(cidr).prefixlen
    return 2 ** (PREFIX_LENGTH - length) if length <= PREFIX_LENGTH else 0


def check_node_prefix_settings(network: MultusNetworkConfig) -> None:
    if network.ip_management != "node_prefix":
        if network.prefixes_per_node is not None:
            raise ValueError(
                f"prefixes_per_node applies to ip_management 'node_prefix' only; network "
                f"{network.name!r} uses {network.ip_management!r}: remove prefixes_per_node"
            )
        return
    for index, subnet in enumerate(network.subnets):
        if prefixes_in(subnet.reservation) == 0:
            raise ValueError(
                f"subnets[{index}].reservation {subnet.reservation}: a node_prefix network's "
                f"reservation must hold whole /{PREFIX_LENGTH} prefixes; use a "
                f"/{PREFIX_LENGTH} or larger block"
            )


def check_node_prefix_reservations(config: AppConfig) -> None:
    """Each node_prefix reservation must hold K prefixes for every node the NodePool can run in
    its AZ. Karpenter may put every node in one AZ, so that is node_pool.max_nodes per AZ."""
    pool = config.node_pool
    for n, network in enumerate(config.multus.networks):
        if network.ip_management != "node_prefix":
            continue
        per_node = config.prefixes_per_node(network)
        slots = pool.prefix_slots_per_eni_of_smallest_size
        if per_node > slots:
            raise ValueError(
                f"multus.networks[{n}] ({network.name}).prefixes_per_node: {per_node} /28 "
                f"prefixes do not fit on one ENI of the smallest size in node_pool.instance_cpus "
                f"({min(pool.instance_cpus)} vCPUs, {slots} prefixes); lower prefixes_per_node "
                "or drop small sizes from node_pool.instance_cpus"
            )
        needed = pool.max_nodes * per_node
        for i, subnet in enumerate(network.subnets):
            held = prefixes_in(subnet.reservation)
            if held < needed:
                raise ValueError(
                    f"multus.networks[{n}] ({network.name}).subnets[{i}].reservation: "
                    f"{subnet.reservation} holds {held} /{PREFIX_LENGTH} prefixes, but up to "
                    f"{pool.max_nodes} nodes (node_pool.cpu_limit {pool.cpu_limit} / smallest "
                    f"node_pool.instance_cpus {min(pool.instance_cpus)}) can run in its AZ with "
                    f"{per_node} prefixes each, {needed} in all; enlarge the reservation "
                    f"(and its subnet), lower node_pool.cpu_limit or prefixes_per_node"
                )
