"""node_prefix mode in the config: prefixes per node and reservation sizing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from config import AppConfig, ConfigError, parse_config
from config.instance_types import NODE_POOL_FAMILIES
from config.interface_addresses import IPV4_ADDRESSES_PER_INTERFACE
from config.model import NodePoolConfig
from config.network_plan import network_plan
from config.node_prefix import max_nodes, max_pods, prefixes_in
from node_bootstrap.renderer import deployed_size

# Not tests.conftest's REPO: importing it starts the CDK (jsii), which these cases do not need.
REPO = Path(__file__).resolve().parents[3]


def example_raw() -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / "node-prefix.json").read_text()))


def error_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


def node_prefix_seed(**network_changes: Any) -> dict[str, Any]:
    """The seed with multus2 switched to node_prefix."""
    raw = parse_config({}).model_dump(mode="json")
    raw["multus"]["networks"][1].update(ip_management="node_prefix", **network_changes)
    return raw


def prefixes_per_node(config: AppConfig) -> int | None:
    """K of the second network (the node_prefix one), the same in every AZ."""
    (per_node,) = {row.prefixes_per_node for row in network_plan(config) if row.device_index == 2}
    return per_node


def test_whereabouts_stays_the_default() -> None:
    assert {n.ip_management for n in parse_config({}).multus.networks} == {"whereabouts"}


# EKS's ENI-limited max pods, ENIs x (IPv4 per ENI - 1) + 2 (EC2's limits: m5.large 3 ENIs x
# 10 addresses, m5.xlarge/2xlarge 4 x 15, m5.4xlarge 8 x 30): 29, 58, 58, 234. A /28 takes one
# address slot of an ENI and the ENI's primary address another: an m5.large ENI holds 9.
@pytest.mark.parametrize(
    ("instance_cpus", "expected"),
    [
        ([4, 8], 4),  # 58 pods -> ceil(58 / 16)
        ([2], 2),  # 29 pods -> 2
        ([16], 15),  # 234 pods -> 15 (an m5.4xlarge ENI holds 29)
        ([2, 4, 8, 16], 9),  # 15 wanted, but an m5.large ENI holds only 9
    ],
)
def test_default_prefixes_per_node_follow_max_pods(instance_cpus: list[int], expected: int) -> None:
    raw = example_raw()
    raw["node_pools"] = [{"name": "multus", "instance_cpus": instance_cpus, "cpu_limit": "1"}]
    assert prefixes_per_node(parse_config(raw)) == expected


@pytest.mark.parametrize(
    ("instance_cpus", "expected"),
    # The EKS AMI's eni-max-pods.txt: m5.large 29, m5.xlarge 58, m5.2xlarge 58, m5.4xlarge 234.
    [([2], 29), ([4], 58), ([8], 58), ([16], 234), ([2, 16], 234)],
)
def test_max_pods_is_the_eni_limited_count_of_the_largest_size(
    instance_cpus: list[int], expected: int
) -> None:
    pool = NodePoolConfig(
        name="multus",
        instance_categories=["m"],
        instance_families=["m5"],
        instance_cpus=instance_cpus,
    )
    assert max_pods(pool) == expected


@pytest.mark.parametrize(
    ("cpu_limit", "nodes"),
    # Whole 2-vCPU nodes within the limit; 8000m is 8 CPUs (Kubernetes quantity), 7999m is not.
    [("8", 4), ("8000m", 4), ("7999m", 3), ("9", 4), ("1.5", 0)],
)
def test_max_nodes_counts_whole_smallest_nodes_within_the_cpu_limit(
    cpu_limit: str, nodes: int
) -> None:
    pool = NodePoolConfig(
        name="multus",
        instance_categories=["m"],
        instance_families=["m5"],
        instance_cpus=[2, 4],
        cpu_limit=cpu_limit,
    )
    assert max_nodes(pool) == nodes


@pytest.mark.parametrize(
    ("reservation", "prefixes"),
    [("10.0.10.0/23", 32), ("10.0.10.0/27", 2), ("10.0.10.16/28", 1), ("10.0.10.16/29", 0)],
)
def test_a_reservation_holds_its_whole_28_prefixes(reservation: str, prefixes: int) -> None:
    # EC2 delegates /28 prefixes only: a /28 reservation holds one, a /29 none.
    assert prefixes_in(reservation) == prefixes


def test_example_reservation_holds_exactly_the_pools_nodes() -> None:
    config = parse_config(example_raw())
    # cpu_limit 32 / 4 vCPUs = 8 nodes, all possibly in one AZ, x 4 prefixes = 32 = a /23.
    assert (max_nodes(config.node_pools[0]), prefixes_per_node(config)) == (8, 4)
    raw = example_raw()
    raw["node_pools"][0]["cpu_limit"] = "36"  # a ninth node
    message = error_for(raw)
    assert "multus.networks[1] (userplane).subnets[0].reservation" in message
    assert "10.0.10.0/23 holds 32 /28 prefixes, but up to 9 nodes" in message
    assert "36 in all" in message


def test_seed_reservation_is_far_too_small_for_the_seed_pool() -> None:
    message = error_for(node_prefix_seed())
    assert "multus.networks[1] (multus2).subnets[0].reservation: 10.0.6.32/27 holds 2" in message
    assert (
        "up to 250 nodes of node_pools[0] (multus) (node_pools[0] (multus).cpu_limit 500 / "
        "smallest node_pools[0] (multus).instance_cpus 2)"
    ) in message


def test_every_pool_on_a_node_prefix_network_draws_from_its_reservation() -> None:
    # Two pools attach userplane: each may put all its nodes in one AZ, and both take their
    # prefixes from the same reservation, so the /23 (32 prefixes) must hold both pools' nodes.
    raw = example_raw()
    first = raw["node_pools"][0]
    raw["node_pools"] = [
        {**first, "cpu_limit": "16"},  # 4 nodes x 4 prefixes
        {**first, "name": "second", "cpu_limit": "16"},
    ]
    assert len(parse_config(raw).node_pools) == 2  # 16 + 16 = 32 prefixes: fits exactly
    raw["node_pools"][1]["cpu_limit"] = "20"  # a fifth node of the second pool: 36
    message = error_for(raw)
    assert "multus.networks[1] (userplane).subnets[0].reservation" in message
    assert "up to 4 nodes of node_pools[0] (multus)" in message
    assert "with 4 prefixes each; up to 5 nodes of node_pools[1] (second)" in message
    assert "36 in all" in message
    raw["node_pools"][1]["networks"] = ["signaling"]  # the second pool no longer draws from it
    assert len(parse_config(raw).node_pools) == 2


def test_explicit_prefixes_per_node_is_used_for_sizing() -> None:
    raw = example_raw()
    raw["multus"]["networks"][1]["prefixes_per_node"] = 1
    raw["node_pools"][0]["cpu_limit"] = "128"  # 32 nodes x 1 prefix still fits the /23
    assert prefixes_per_node(parse_config(raw)) == 1


def test_prefixes_per_node_is_at_least_one() -> None:
    # 0 would request no prefix: the network's pods would get no address on any node.
    raw = example_raw()
    raw["multus"]["networks"][1]["prefixes_per_node"] = 0
    message = error_for(raw)
    assert "multus.networks[1].prefixes_per_node" in message, message
    assert "0 /28 prefixes is below what this field takes: at least 1 /28 prefix" in message


def test_prefixes_per_node_must_fit_one_eni_of_the_smallest_size() -> None:
    raw = example_raw()
    raw["multus"]["networks"][1]["prefixes_per_node"] = 15
    message = error_for(raw)
    assert "(userplane).prefixes_per_node: 15 /28 prefixes do not fit" in message
    assert "(4 vCPUs, 14 prefixes)" in message


def test_prefixes_per_node_needs_node_prefix_mode() -> None:
    raw = example_raw()
    raw["multus"]["networks"][0]["prefixes_per_node"] = 2
    assert "prefixes_per_node applies to ip_management 'node_prefix' only" in error_for(raw)


def test_node_prefix_reservation_must_hold_whole_prefixes() -> None:
    raw = copy.deepcopy(example_raw())
    raw["multus"]["networks"][1]["subnets"][0]["reservation"] = "10.0.10.0/29"
    message = error_for(raw)
    assert "subnets[0].reservation 10.0.10.0/29" in message
    assert "must hold whole /28 prefixes" in message


def test_unknown_ip_management_is_named() -> None:
    raw = example_raw()
    raw["multus"]["networks"][1]["ip_management"] = "dhcp"
    assert "ip_management" in error_for(raw)


def test_every_node_pool_size_has_its_addresses_per_interface() -> None:
    assert {f: set(sizes) for f, sizes in IPV4_ADDRESSES_PER_INTERFACE.items()} == {
        f: set(sizes) for f, sizes in NODE_POOL_FAMILIES.items()
    }


def test_newer_families_with_more_addresses_raise_the_default() -> None:
    # m8i.2xlarge: 4 ENIs x 30 addresses (EC2 limits; m5.2xlarge has 15) -> 118 max pods ->
    # 8 prefixes, which one m8i.xlarge ENI (30 addresses) holds.
    raw = example_raw()
    raw["node_pools"] = [
        {
            "name": "multus",
            "instance_categories": ["m"],
            "instance_families": ["m8i"],
            "instance_cpus": [4, 8],
            "cpu_limit": "4",
        }
    ]
    assert prefixes_per_node(parse_config(raw)) == 8


def six_zone_node_prefix_layout(networks: int) -> dict[str, Any]:
    """us-east-1's six zones, `networks` node_prefix networks with one /28 per node (one node)."""
    zones = [f"us-east-1{letter}" for letter in "abcdef"]
    return {
        "region": "us-east-1",
        "availability_zones": zones,
        "vpc": {
            "public_subnet_cidrs": [f"10.0.{i}.0/24" for i in range(6)],
            "node_subnet_cidrs": [f"10.0.{10 + i}.0/24" for i in range(6)],
        },
        "node_pools": [{"name": "multus", "instance_cpus": [16], "cpu_limit": "16"}],
        "multus": {
            "networks": [
                {
                    "name": f"prefixed{n}",
                    "ip_management": "node_prefix",
                    "prefixes_per_node": 1,
                    "subnets": [
                        {
                            "cidr": f"10.0.{100 + 10 * n + i}.0/24",
                            "reservation": f"10.0.{100 + 10 * n + i}.128/28",
                        }
                        for i in range(6)
                    ],
                }
                for n in range(networks)
            ]
        },
    }


def test_node_prefix_lines_count_toward_the_user_data_budget() -> None:
    # Each (AZ, node_prefix network) adds a line to every node's user-data: six zones take three
    # such networks, not four (the cluster stack would otherwise fail to render the user-data).
    fits = parse_config(six_zone_node_prefix_layout(3), user_data_size=deployed_size)
    assert len(fits.multus.networks) == 3
    with pytest.raises(ConfigError) as refused:
        parse_config(six_zone_node_prefix_layout(4), user_data_size=deployed_size)
    message = str(refused.value)
    assert (
        "node_pools[0] (multus).networks: with availability_zones, the node user-data would be"
        in message
    )
