"""A Multus network's MTU: the narrowest path its routes take, or the one the config sets.

The limits are config/path_mtu.py's, each with its AWS source: 9001 inside a VPC, 8500 through
a transit gateway, 1446 through a Site-to-Site VPN, 1500 to the internet (a NAT gateway)."""

from __future__ import annotations

from typing import Any

import pytest

from config import ConfigError, parse_config
from config.network_plan import network_plan
from config.node_bootstrap_plan import node_bootstrap_props
from config.path_mtu import ROUTE_TARGET_MTU, path_mtu
from node_bootstrap.renderer import render_configuration

ROUTES = {
    "transit_gateway": {
        "destination": "10.200.0.0/16",
        "transit_gateway_id": "tgw-0123456789abcdef0",
    },
    "vpn_gateway": {"destination": "10.201.0.0/16", "vpn_gateway_id": "vgw-0123456789abcdef0"},
    "nat_gateway": {"destination": "198.51.100.0/24", "nat_gateway": True},
    "network_interface": {
        "destination": "10.202.0.0/16",
        "network_interface_id": "eni-0123456789abcdef0",
    },
}


def with_second_network(**changes: Any) -> dict[str, Any]:
    raw = parse_config({}).model_dump(mode="json", exclude_none=True)
    raw["multus"]["networks"][1].update(changes)
    return raw


def mtus(raw: dict[str, Any]) -> dict[str, set[int]]:
    return {
        network: {row.mtu for row in network_plan(parse_config(raw)) if row.network == network}
        for network in ("multus1", "multus2")
    }


def test_a_network_without_routes_gets_the_vpcs_jumbo_frames() -> None:
    assert mtus(parse_config({}).model_dump(mode="json", exclude_none=True)) == {
        "multus1": {9001},
        "multus2": {9001},
    }


@pytest.mark.parametrize(
    ("target", "mtu"),
    [
        ("transit_gateway", 8500),
        ("vpn_gateway", 1446),
        ("nat_gateway", 1500),
        ("network_interface", 9001),
    ],
)
def test_a_routed_network_gets_the_mtu_of_its_routes_path(target: str, mtu: int) -> None:
    assert mtus(with_second_network(routes=[ROUTES[target]])) == {
        "multus1": {9001},
        "multus2": {mtu},
    }


def test_the_narrowest_route_decides_and_an_explicit_mtu_wins() -> None:
    routes = [ROUTES["transit_gateway"], ROUTES["vpn_gateway"]]
    assert mtus(with_second_network(routes=routes))["multus2"] == {1446}
    # A Direct Connect private interface on the same gateway carries jumbo frames: the
    # operator says so.
    assert mtus(with_second_network(routes=routes, mtu=9001))["multus2"] == {9001}
    assert path_mtu([]) == 9001
    assert set(ROUTE_TARGET_MTU) == set(ROUTES)


@pytest.mark.parametrize("mtu", [1279, 9002])
def test_an_mtu_outside_what_ipv6_and_ec2_allow_is_refused_naming_the_field(mtu: int) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(with_second_network(mtu=mtu))
    assert "multus.networks[1].mtu" in str(refused.value)


def test_the_node_user_data_carries_each_networks_mtu() -> None:
    config = parse_config(with_second_network(routes=[ROUTES["transit_gateway"]]))
    props = node_bootstrap_props(
        config.cluster_name,
        config.pool_plan(config.node_pools[0]),
        subnet_id=lambda row: f"subnet-{row.network}",
        security_group_id=lambda row: f"sg-{row.network}",
    )
    configuration = render_configuration(props)
    assert "multus1 multus1 1 false 9001 sg-multus1\nmultus2 multus2 2 false 8500 sg-multus2" in (
        configuration
    )
