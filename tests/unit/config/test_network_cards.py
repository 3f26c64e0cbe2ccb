"""multus.networks[].network_card: the fact table of network cards, device indexes per card in
the plan, the pools that may attach such a network, and Karpenter's reservedENIs."""

from __future__ import annotations

from typing import Any

import pytest

from config import instance_types, parse_config
from config.errors import ConfigError
from config.model import AppConfig
from config.network_plan import networks_in_order
from tests.helpers import seed_network

TWO_CARD_POOL = {"name": "upf", "instance_families": ["c6in"], "instance_cpus": [128]}


def config_with(networks: list[dict[str, Any]], *pools: dict[str, Any]) -> AppConfig:
    return parse_config({"multus": {"networks": networks}, "node_pools": list(pools)})


@pytest.mark.parametrize(
    ("instance_type", "interfaces_per_card"),
    [
        # EC2 User Guide, "Network specifications" of compute / general purpose / memory
        # optimized types (network cards, interfaces); Karpenter's vpclimits (NetworkCards).
        ("c6in.32xlarge", (8, 8)),
        ("m6in.32xlarge", (8, 8)),
        ("r6idn.32xlarge", (8, 8)),
        ("c8in.96xlarge", (12, 12)),
        ("c5n.18xlarge", (15,)),  # 100 Gbps on one card
        ("c6in.24xlarge", (15,)),
        ("m5.large", (3,)),
    ],
)
def test_interfaces_per_network_card(instance_type: str, interfaces_per_card: tuple[int]) -> None:
    family = instance_type.split(".")[0]
    cpus = next(
        cpus
        for cpus in instance_types.NODE_POOL_FAMILIES[family]
        if instance_types.size_name(family, cpus) == instance_type
    )
    assert instance_types.interfaces_per_card(family, cpus) == interfaces_per_card


def test_card_0_of_a_multi_card_size_is_its_node_pool_interface_count() -> None:
    """NODE_POOL_FAMILIES counts the default card (0), which Karpenter's max pods uses."""
    for family, sizes in instance_types.MULTI_CARD_SIZES.items():
        for cpus, cards in sizes.items():
            assert len(cards) > 1, (family, cpus)
            assert cards[0] == instance_types.NODE_POOL_FAMILIES[family][cpus], (family, cpus)


def test_device_indexes_count_per_card_in_attachment_order() -> None:
    config = config_with(
        [seed_network(1), seed_network(2, network_card=1), seed_network(3)],
        {**TWO_CARD_POOL, "networks": ["multus1", "multus2", "multus3"]},
    )
    pool_rows = networks_in_order(config.pool_plan(config.node_pools[0]))
    assert [(row.network, row.attachment_slot) for row in pool_rows] == [
        ("multus1", (0, 1)),
        ("multus3", (0, 2)),
        ("multus2", (1, 1)),
    ]


def test_without_network_card_every_network_is_on_card_0_at_1_to_k() -> None:
    config = config_with([seed_network(1), seed_network(2), seed_network(3)], TWO_CARD_POOL)
    rows = networks_in_order(config.pool_plan(config.node_pools[0]))
    assert [row.attachment_slot for row in rows] == [(0, 1), (0, 2), (0, 3)]


def test_a_pool_of_single_card_sizes_may_not_attach_a_card_1_network() -> None:
    with pytest.raises(ConfigError) as refused:
        config_with(
            [seed_network(1), seed_network(2, network_card=1)],
            {"name": "upf", "instance_families": ["c6in"], "instance_cpus": [64, 128]},
        )
    message = str(refused.value)
    assert "node_pools[0] (upf).networks: multus2 is on network_card 1" in message
    assert "c6in.16xlarge of the pool's instance types have no network card 1" in message
    assert "instance_families ['c6in'] with instance_cpus [128] (c6in.32xlarge)" in message


def test_a_pool_that_leaves_the_card_1_network_out_may_use_any_size() -> None:
    config_with(
        [seed_network(1), seed_network(2, network_card=1)],
        {**TWO_CARD_POOL, "networks": ["multus1", "multus2"]},
        {"name": "control", "networks": ["multus1"]},
    )


def test_networks_on_card_1_count_against_its_own_interfaces_not_card_0s() -> None:
    """c6in.32xlarge: 8 interfaces per card. Card 0 holds the primary ENI, so 8 networks do
    not fit there; with one of them on card 1 they do; 9 on card 1 do not."""
    eight = [seed_network(number) for number in range(1, 9)]
    with pytest.raises(
        ConfigError,
        match=r"8 Multus ENIs \(one per network, .*\) need 9 network interfaces",
    ):
        config_with(eight, TWO_CARD_POOL)
    config_with([*eight[:7], {**eight[7], "network_card": 1}], TWO_CARD_POOL)
    nine_on_card_1 = [seed_network(number, network_card=1) for number in range(1, 10)]
    with pytest.raises(
        ConfigError, match=r"9 Multus ENIs are on network_card 1, but c6in\.32xlarge"
    ):
        config_with(nine_on_card_1, TWO_CARD_POOL)


def test_reserved_enis_count_only_the_networks_on_card_0() -> None:
    """Karpenter's max pods subtracts reservedENIs from the default card's interfaces
    (aws/karpenter-provider-aws pkg/providers/instancetype/types.go, ENILimitedPods): a
    Multus ENI on card 1 takes none of them."""
    on_two_cards = config_with([seed_network(1), seed_network(2, network_card=1)], TWO_CARD_POOL)
    on_card_0 = config_with([seed_network(1), seed_network(2)], TWO_CARD_POOL)
    assert (on_two_cards.reserved_enis, on_card_0.reserved_enis) == (1, 2)
