"""with_static_ipam: the data-plane tier's stand-in for Whereabouts keeps the NAD's addresses
inside its ranges (testing_support/kernel_pods.py), both families, on both sides of each end."""

from __future__ import annotations

import re
from typing import Any

import pytest

from charts.network_attachments import (
    Ipv6Range,
    NetworkAttachment,
    cni_config,
    whereabouts_range_and_gateway,
)
from testing_support.kernel_pods import with_static_ipam

IPV6 = Ipv6Range(
    "2600:1f14:a:b06::/64", "2600:1f14:a:b06::1:0", "2600:1f14:a:b06::1:ffff", "2600:1f14:a:b06::1"
)


def network(ipv6: Ipv6Range | None = None, routes: tuple[str, ...] = ()) -> dict[str, Any]:
    whereabouts_range, gateway = whereabouts_range_and_gateway("10.0.6.0/24", "10.0.6.32/27")
    return cni_config(
        NetworkAttachment(
            "multus2-us-west-2a", "multus2", "l2", whereabouts_range, gateway, routes=routes,
            ipv6=ipv6,
        )
    )  # fmt: skip


@pytest.mark.parametrize("address", ["10.0.6.32", "10.0.6.63"])
def test_the_ends_of_the_ipv4_range_are_taken_with_the_gateway_and_routes(address: str) -> None:
    static = with_static_ipam(network(routes=("10.200.0.0/16",)), address)
    ipam = static["plugins"][0]["ipam"]
    assert ipam == {
        "type": "static",
        "addresses": [{"address": f"{address}/24", "gateway": "10.0.6.1"}],
        "routes": [{"dst": "10.200.0.0/16", "gw": "10.0.6.1"}],
    }


@pytest.mark.parametrize("address", ["10.0.6.31", "10.0.6.64"])
def test_an_ipv4_address_just_outside_the_range_is_refused(address: str) -> None:
    with pytest.raises(
        ValueError, match=re.escape("outside the NAD's range 10.0.6.32-10.0.6.63/24")
    ):
        with_static_ipam(network(), address)


@pytest.mark.parametrize("address", ["2600:1f14:a:b06::1:0", "2600:1f14:a:b06::1:ffff"])
def test_a_dual_stack_nad_takes_both_families_without_a_gateway(address: str) -> None:
    static = with_static_ipam(network(ipv6=IPV6), "10.0.6.40", address)
    ipam = static["plugins"][0]["ipam"]
    assert ipam["addresses"] == [{"address": "10.0.6.40/24"}, {"address": f"{address}/64"}]
    assert ipam["routes"] == [
        {"dst": "0.0.0.0/0", "gw": "10.0.6.1"},
        {"dst": "::/0", "gw": "2600:1f14:a:b06::1"},
    ]


@pytest.mark.parametrize("address", ["2600:1f14:a:b06::ffff", "2600:1f14:a:b06::2:0", "10.0.6.41"])
def test_an_ipv6_address_outside_the_pod_range_is_refused(address: str) -> None:
    with pytest.raises(ValueError, match="outside the NAD's range 2600:1f14:a:b06::1:0-"):
        with_static_ipam(network(ipv6=IPV6), "10.0.6.40", address)
