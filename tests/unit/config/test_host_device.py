"""multus.networks[].mode host-device, from the config to the plan, the bootstrap's data lines
and what the cluster's charts are given (docs/network.md, Whole-ENI networks); the rendered
script on the emulator and the real plugin: tests/integration/node_bootstrap/
test_host_device_bootstrap.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from config import AppConfig, ConfigError, parse_config
from config.node_bootstrap_plan import node_bootstrap_props
from node_bootstrap.renderer import render_configuration

REPO = Path(__file__).resolve().parents[3]


def example_raw() -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / "host-device.json").read_text()))


def n6(**changes: Any) -> dict[str, Any]:
    """The example with its host-device network n6 changed."""
    raw = example_raw()
    raw["multus"]["networks"][1].update(changes)
    return raw


def error_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


def upf_plan(config: AppConfig) -> Any:
    return config.pool_plan(config.node_pools[0])


def test_the_enis_take_consecutive_device_indexes_after_the_networks_before() -> None:
    config = parse_config(example_raw())
    rows = [row for row in upf_plan(config) if row.availability_zone == "us-west-2b"]
    assert [
        (slot.interface_name, slot.device_index, slot.nad_name)
        for row in rows
        for slot in row.eni_slots
    ] == [
        ("n3", 1, "n3-us-west-2b"),
        ("n60", 2, "n6-us-west-2b-0"),
        ("n61", 3, "n6-us-west-2b-1"),
    ]


def test_a_network_after_a_host_device_one_starts_after_its_last_eni() -> None:
    raw = example_raw()
    raw["multus"]["networks"][1]["enis_per_node"] = 3
    raw["multus"]["networks"].append(
        {
            "name": "oam",
            "subnets": [
                {"cidr": "10.0.10.0/24", "reservation": "10.0.10.32/27"},
                {"cidr": "10.0.11.0/24", "reservation": "10.0.11.32/27"},
            ],
        }
    )
    raw["node_pools"][0]["networks"].append("oam")
    raw["node_pools"][0].update(instance_families=["c6in"], instance_cpus=[16])
    config = parse_config(raw)
    devices = {row.network: row.device_index for row in upf_plan(config)}
    assert devices == {"n3": 1, "n6": 2, "oam": 5}
    assert config.reserved_enis == 5


def test_every_eni_counts_against_the_smallest_size() -> None:
    """c5n.xlarge (4 vCPUs) takes 4 network interfaces (config/instance_types.py, from
    botocore's EC2 model): the primary, n3 and two n6 ENIs fit; a third n6 ENI does not."""
    parse_config(example_raw())
    message = error_for(n6(enis_per_node=3))
    assert "node_pools[0] (upf).networks: 4 Multus ENIs" in message
    assert "need 5 network interfaces per node" in message
    assert "or lower enis_per_node" in message


def test_every_eni_counts_against_its_network_card() -> None:
    raw = n6(network_card=1, enis_per_node=9)
    raw["node_pools"][0].update(instance_families=["c6in"], instance_cpus=[128])
    assert "9 Multus ENIs are on network_card 1, but c6in.32xlarge takes 8" in error_for(raw)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"ip_management": "node_prefix"},
            "ip_management: 'node_prefix' hands out pod addresses from /28 prefixes",
        ),
        ({"pod_routed_ranges": ["10.45.0.0/16"]}, "pod_routed_ranges: the pod IP agent"),
        ({"ipvlan_mode": "l2"}, "ipvlan_mode: a host-device network has no ipvlan interface"),
        ({"ipv6": True}, "ipv6: host-device networks are IPv4 only for now"),
    ],
)
def test_settings_of_shared_enis_are_refused_naming_the_field(
    changes: dict[str, Any], expected: str
) -> None:
    assert expected in error_for(n6(**changes))


def test_every_host_device_problem_is_reported_at_once() -> None:
    raw = n6(pod_routed_ranges=["10.45.0.0/16"], ipvlan_mode="l2")
    raw["multus"]["networks"][1]["subnets"][0]["static_range"] = "10.0.8.48/28"
    message = error_for(raw)
    for field in ("subnets[0].static_range", "pod_routed_ranges", "ipvlan_mode"):
        assert f"multus.networks[1].{field}: " in message


def test_enis_per_node_above_one_is_refused_on_an_ipvlan_network() -> None:
    raw = example_raw()
    raw["multus"]["networks"][0]["enis_per_node"] = 2
    message = error_for(raw)
    assert "multus.networks[0].enis_per_node: 2 ENIs per node only serve a host-device" in message
    assert 'set mode "host-device"' in message


def test_the_slot_digits_count_against_linuxs_fifteen_characters() -> None:
    """IFNAMSIZ is 16 with the terminating NUL (include/uapi/linux/if.h): a 14-character name
    takes slots 0-9, not 10."""
    parse_config(n6(interface_name="abcdefghijklmn", enis_per_node=2))
    raw = n6(interface_name="abcdefghijklmn", enis_per_node=11)
    raw["node_pools"][0].update(instance_families=["c6in"], instance_cpus=[64])
    message = error_for(raw)
    assert "interface_name: with enis_per_node 11 the ENIs are named abcdefghijklmn0," in message
    assert "'abcdefghijklmn10' is not a usable interface name" in message


def test_a_slot_name_may_not_be_a_name_the_node_already_uses() -> None:
    assert "'eth0' is a kernel name of the node's own ENIs" in error_for(n6(interface_name="eth"))


def test_a_slot_name_may_not_be_another_networks_interface() -> None:
    raw = example_raw()
    raw["multus"]["networks"][0]["name"] = "n60"
    raw["node_pools"][0]["networks"] = ["n60", "n6"]
    assert "networks[1].interface_name: 'n60' is also the interface name of networks[0]" in (
        error_for(raw)
    )


def test_the_bootstrap_gets_one_interface_and_one_host_device_line_per_eni() -> None:
    config = parse_config(example_raw())
    props = node_bootstrap_props(
        "c",
        upf_plan(config),
        subnet_id=lambda row: f"subnet-{row.network}-{row.availability_zone[-1]}",
        security_group_id=lambda row: f"sg-{row.network}",
    )
    configuration = render_configuration(props)
    # Each ENI its own MULTUS_NETWORKS line (the network tag is n6 on both), at its index,
    # with n6's MTU (its transit-gateway route: 8500) and group; its subnet once per ENI.
    assert "MULTUS_NETWORKS='n3 n3 1 false 9001 sg-n3\nn6 n60 2 false 8500 sg-n6\n" in (
        configuration
    )
    assert "n6 n61 3 false 8500 sg-n6'\n" in configuration
    assert "us-west-2a subnet-n3-a,subnet-n6-a,subnet-n6-a\n" in configuration
    # az, interface, NAD name, the subnet's prefix length, its VPC router, config file, routes.
    assert (
        "MULTUS_HOST_DEVICE='us-west-2a n60 n6-us-west-2a-0 24 10.0.8.1 "
        "90-host-device-eni2.conf 10.200.0.0/16\n"
        "us-west-2a n61 n6-us-west-2a-1 24 10.0.8.1 90-host-device-eni3.conf 10.200.0.0/16\n"
    ) in configuration
    assert "MULTUS_CNI_CONFIG_DIR=/etc/cni/net.d\n" in configuration
    assert "MULTUS_NODE_PREFIX" not in configuration
