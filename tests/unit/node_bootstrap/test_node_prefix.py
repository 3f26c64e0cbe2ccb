"""The node_prefix data lines at the edges of their rules (docs/node-prefix-mode.md)."""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from config.node_bootstrap_plan import NodePrefixNetwork
from node_bootstrap.node_prefix import NODE_PREFIX_CNI_PLUGINS, render_node_prefix_lines

SCRIPT = Path(__file__).parents[3] / "node_bootstrap" / "node_prefix.sh"


def network(**changes: object) -> NodePrefixNetwork:
    base = NodePrefixNetwork(
        availability_zone="us-west-2a",
        interface_name="multus2",
        device_index=2,
        prefix_count=4,
        cni_network_name="multus2-us-west-2a",
        subnet_cidr="10.0.8.0/21",
        reservation_cidr="10.0.10.0/23",
        ipvlan_mode="l2",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_one_line_per_network_with_fields_in_the_scripts_order() -> None:
    # node_prefix.sh reads: az, interface, prefix count, NAD name, subnet, reservation, gateway
    # (the VPC router: the subnet's first host address), ipvlan mode, config file name.
    lines = render_node_prefix_lines(
        [
            network(),
            network(
                availability_zone="us-west-2b",
                device_index=3,
                interface_name="multus3",
                cni_network_name="multus3-us-west-2b",
                subnet_cidr="10.0.16.0/24",
                reservation_cidr="10.0.16.128/28",
                prefix_count=1,
                ipvlan_mode="l3s",
            ),
        ]
    )
    assert lines.split("\n") == [
        "us-west-2a multus2 4 multus2-us-west-2a 10.0.8.0/21 10.0.10.0/23 10.0.8.1 l2 "
        "90-node-prefix-eni2.conflist",
        "us-west-2b multus3 1 multus3-us-west-2b 10.0.16.0/24 10.0.16.128/28 10.0.16.1 l3s "
        "90-node-prefix-eni3.conflist",
    ]


@pytest.mark.parametrize(
    "edge",
    [
        network(prefix_count=1),  # one /28 is the least an ENI can be given
        network(reservation_cidr="10.0.15.240/28"),  # a /28 reservation holds one prefix
        network(reservation_cidr="10.0.8.0/21"),  # the whole subnet
        network(ipvlan_mode="l3"),
        network(ipvlan_mode="l3s"),
    ],
)
def test_the_smallest_valid_values_pass(edge: NodePrefixNetwork) -> None:
    assert render_node_prefix_lines([edge])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (network(prefix_count=0), "prefix_count must be at least 1"),
        (
            network(reservation_cidr="10.0.16.0/28"),  # outside the subnet
            "reservation 10.0.16.0/28 must be a /28 or larger inside 10.0.8.0/21",
        ),
        (network(reservation_cidr="10.0.0.0/20"), "reservation 10.0.0.0/20 must be a /28 or"),
        (network(ipvlan_mode="bridge"), "ipvlan_mode must be l2, l3 or l3s"),
        (network(reservation_cidr="10.0.10.0"), "reservation_cidr must be a literal IPv4 CIDR"),
    ],
)
def test_values_past_the_edges_are_refused(bad: NodePrefixNetwork, message: str) -> None:
    with pytest.raises(ValueError, match=r"^node_prefix\[us-west-2a/multus2\]: " + message):
        render_node_prefix_lines([bad])


def test_a_network_is_an_immutable_value() -> None:
    # What was validated is what gets rendered.
    with pytest.raises(FrozenInstanceError):
        network().prefix_count = 0  # type: ignore[misc]


def test_the_plugins_named_are_those_the_node_config_uses() -> None:
    # cleartaints waits for these binaries: every "type" of the CNI config node_prefix.sh writes.
    types = re.findall(r'"type":"([a-z-]+)"', SCRIPT.read_text())
    assert sorted(types) == sorted(NODE_PREFIX_CNI_PLUGINS)
