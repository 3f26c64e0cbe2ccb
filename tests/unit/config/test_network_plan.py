"""The network plan's rows and the IP management modes, from the config alone (no CDK)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest

from config import parse_config
from config.model import MultusNetworkConfig
from config.network_plan import (
    IP_MANAGEMENT_MODES,
    NODE_PREFIX,
    WHEREABOUTS,
    NetworkPlanRow,
    PlannedIpv6,
    PlannedRoute,
    network_attachment_name,
    network_plan,
    networks_in_order,
)
from config.node_bootstrap_plan import node_bootstrap_props
from config.node_prefix import check_node_prefix_settings
from node_bootstrap.renderer import deployed_size

# Not tests.conftest's REPO: importing it starts the CDK (jsii), which these cases do not need.
REPO = Path(__file__).resolve().parents[3]


def example_raw(name: str) -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / name).read_text()))


def facts(row: NetworkPlanRow) -> tuple[object, ...]:
    return (
        row.network,
        row.availability_zone,
        row.device_index,
        row.interface_name,
        row.nad_name,
        row.ip_management.name,
        row.reservation_type,
        row.subnet_cidr,
        row.reservation_cidr,
        row.prefixes_per_node,
    )


def test_default_plan_is_the_seeds_two_networks_in_two_zones() -> None:
    # The seed (DESIGN.md defaults): multus1 10.0.4.0/24 + 10.0.5.0/24 reserving .32/27 of each,
    # multus2 10.0.6.0/24 + 10.0.7.0/24 likewise; the seed's user-data attaches network n at
    # device index n (0 is the primary ENI); the interface is named after the network.
    plan = network_plan(parse_config({}))
    assert [facts(row) for row in plan] == [
        ("multus1", "us-west-2a", 1, "multus1", "multus1-us-west-2a", "whereabouts",
         "explicit", "10.0.4.0/24", "10.0.4.32/27", None),
        ("multus1", "us-west-2b", 1, "multus1", "multus1-us-west-2b", "whereabouts",
         "explicit", "10.0.5.0/24", "10.0.5.32/27", None),
        ("multus2", "us-west-2a", 2, "multus2", "multus2-us-west-2a", "whereabouts",
         "explicit", "10.0.6.0/24", "10.0.6.32/27", None),
        ("multus2", "us-west-2b", 2, "multus2", "multus2-us-west-2b", "whereabouts",
         "explicit", "10.0.7.0/24", "10.0.7.32/27", None),
    ]  # fmt: skip
    # Each network's rows name its own group, keyed by the network's name.
    assert [row.security_group for row in plan] == [row.network for row in plan]
    assert {(row.ipvlan_mode, row.source_dest_check) for row in plan} == {("l2", False)}


def test_three_zones_by_three_networks_follow_the_config_order() -> None:
    raw = example_raw("three-az-three-networks.json")
    plan = network_plan(parse_config(raw))
    zones = raw["availability_zones"]
    networks = raw["multus"]["networks"]
    assert len(plan) == 9
    assert [(row.network, row.availability_zone) for row in plan] == [
        (network["name"], zone) for network in networks for zone in zones
    ]
    for row in plan:
        index = [network["name"] for network in networks].index(row.network)
        az_index = zones.index(row.availability_zone)
        subnet = networks[index]["subnets"][az_index]
        assert row.device_index == index + 1
        assert row.interface_name == row.network  # no interface_name in the example
        assert row.nad_name == f"{row.network}-{row.availability_zone}"
        assert (row.subnet_cidr, row.reservation_cidr) == (subnet["cidr"], subnet["reservation"])
        assert row.source_dest_check is networks[index].get("source_dest_check", False)
        assert row.ip_management is WHEREABOUTS
        assert row.subnet_path == f"multus.networks[{index}] ({row.network}).subnets[{az_index}]"


def test_node_prefix_example_gives_its_second_network_prefixes() -> None:
    # examples/node-prefix.json: signaling on Whereabouts, userplane node_prefix. Its pool
    # (instance_cpus 4 and 8) runs at most 58 pods on an 8-vCPU node (EC2: 4 ENIs x 15 IPv4
    # addresses, 4 x 14 + 2), so ceil(58 / 16) = 4 /28 prefixes per node.
    plan = network_plan(parse_config(example_raw("node-prefix.json")))
    assert [facts(row) for row in plan] == [
        ("signaling", "us-west-2a", 1, "signaling", "signaling-us-west-2a", "whereabouts",
         "explicit", "10.0.4.0/24", "10.0.4.32/27", None),
        ("signaling", "us-west-2b", 1, "signaling", "signaling-us-west-2b", "whereabouts",
         "explicit", "10.0.5.0/24", "10.0.5.32/27", None),
        ("userplane", "us-west-2a", 2, "userplane", "userplane-us-west-2a", "node_prefix",
         "prefix", "10.0.8.0/21", "10.0.10.0/23", 4),
        ("userplane", "us-west-2b", 2, "userplane", "userplane-us-west-2b", "node_prefix",
         "prefix", "10.0.16.0/21", "10.0.18.0/23", 4),
    ]  # fmt: skip


def test_interface_name_overrides_the_network_name_on_the_node_only() -> None:
    raw = example_raw("node-prefix.json")
    raw["multus"]["networks"][1]["interface_name"] = "up0"
    plan = network_plan(parse_config(raw))
    assert {(row.network, row.interface_name) for row in plan} == {
        ("signaling", "signaling"),
        ("userplane", "up0"),
    }
    # The NAD keeps the network's name: pods name networks, not interfaces.
    assert {row.nad_name for row in plan if row.network == "userplane"} == {
        "userplane-us-west-2a",
        "userplane-us-west-2b",
    }


def test_explicit_prefixes_per_node_wins_over_the_default() -> None:
    raw = example_raw("node-prefix.json")
    raw["multus"]["networks"][1]["prefixes_per_node"] = 3
    plan = network_plan(parse_config(raw))
    assert [row.prefixes_per_node for row in plan] == [None, None, 3, 3]


def test_networks_in_order_gives_one_row_per_network_by_device_index() -> None:
    plan = network_plan(parse_config(example_raw("three-az-three-networks.json")))
    assert [(r.network, r.device_index) for r in networks_in_order(tuple(reversed(plan)))] == [
        ("signaling", 1),
        ("userplane", 2),
        ("oam", 3),
    ]


def test_nad_names_are_predictable_from_network_and_zone() -> None:
    assert network_attachment_name("multus1", "us-west-2a") == "multus1-us-west-2a"


def test_each_config_value_names_its_mode() -> None:
    assert {name: mode.name for name, mode in IP_MANAGEMENT_MODES.items()} == {
        "whereabouts": "whereabouts",
        "node_prefix": "node_prefix",
    }
    # The config's Literal lists exactly the modes (the generated docs show its values).
    field = MultusNetworkConfig.model_fields["ip_management"]
    assert get_args(field.annotation) == tuple(IP_MANAGEMENT_MODES)
    network = parse_config({}).multus.networks[0]
    assert network.ip_management_mode is WHEREABOUTS


def test_whereabouts_mode_assigns_each_pod_address_from_an_explicit_reservation() -> None:
    """EC2 API Reference, CreateSubnetCidrReservation, ReservationType: "explicit - You assign
    the reserved IP addresses to network interfaces" (Whereabouts picks one per pod, the pod IP
    agent assigns it to the node's ENI)."""
    assert WHEREABOUTS.reservation_type == "explicit"
    assert WHEREABOUTS.pod_ip_agent
    assert not WHEREABOUTS.node_local_config
    assert WHEREABOUTS.reservation_purpose == "Whereabouts"


def test_node_prefix_mode_lets_ec2_pick_prefixes_and_configures_the_node() -> None:
    """EC2 API Reference, CreateSubnetCidrReservation, ReservationType: "prefix - AWS assigns
    the reserved IP addresses to network interfaces" (the /28 prefixes the bootstrap asks for
    with CreateNetworkInterface Ipv4PrefixCount); the node's host-local IPAM hands addresses
    out of them, so no agent assigns them per pod."""
    assert NODE_PREFIX.reservation_type == "prefix"
    assert not NODE_PREFIX.pod_ip_agent
    assert NODE_PREFIX.node_local_config
    assert NODE_PREFIX.reservation_purpose == "node /28 prefixes"


def test_prefixes_per_node_is_refused_where_the_node_takes_no_prefixes() -> None:
    with pytest.raises(ValueError, match="applies to ip_management 'node_prefix' only"):
        check_node_prefix_settings("n", WHEREABOUTS, 2, ["10.0.0.0/28"])
    check_node_prefix_settings("n", NODE_PREFIX, 2, ["10.0.0.0/28"])
    check_node_prefix_settings("n", WHEREABOUTS, None, ["10.0.0.0/29"])


def test_only_node_local_modes_add_a_bootstrap_line_per_zone() -> None:
    config = parse_config(example_raw("node-prefix.json"))
    props = node_bootstrap_props(
        config.cluster_name,
        network_plan(config),
        subnet_id=lambda row: f"subnet-{row.network}-{row.availability_zone}",
        security_group_id=lambda row: f"sg-{row.security_group}",
    )
    assert [
        (n.availability_zone, n.cni_network_name, n.prefix_count) for n in props.node_prefix
    ] == [
        ("us-west-2a", "userplane-us-west-2a", 4),
        ("us-west-2b", "userplane-us-west-2b", 4),
    ]
    assert [(i.network, i.device_index) for i in props.interfaces] == [
        ("signaling", 1),
        ("userplane", 2),
    ]
    assert props.placements["us-west-2b"].subnet_ids == [
        "subnet-signaling-us-west-2b",
        "subnet-userplane-us-west-2b",
    ]
    # Each interface gets its own network's group.
    assert [i.security_group_ids for i in props.interfaces] == [["sg-signaling"], ["sg-userplane"]]


def test_a_dual_stack_rows_network_gets_an_ipv6_interface_and_the_others_none() -> None:
    # Part C's config fills NetworkPlanRow.ipv6; here a plan row carries it by hand.
    plan = network_plan(parse_config({}))
    ipv6 = PlannedIpv6(subnet_index=6, pod_range_prefix_length=112, pod_range_offset=1)
    dual_stack = tuple(replace(row, ipv6=ipv6) if row.network == "multus2" else row for row in plan)
    props = node_bootstrap_props(
        "cluster",
        dual_stack,
        subnet_id=lambda row: f"subnet-{row.network}",
        security_group_id=lambda row: f"sg-{row.security_group}",
    )
    assert [(i.network, i.ipv6) for i in props.interfaces] == [
        ("multus1", False),
        ("multus2", True),
    ]
    default = node_bootstrap_props(
        "cluster", plan, subnet_id=lambda _: "subnet", security_group_id=lambda _: "sg"
    )
    assert not any(interface.ipv6 for interface in default.interfaces)


def test_a_network_without_a_subnet_for_every_zone_has_no_plan() -> None:
    # The config refuses such a network (one subnet per AZ); a plan of a copy that skipped
    # validation must not silently drop the zone without a subnet.
    config = parse_config({})
    first = config.multus.networks[0]
    short = first.model_copy(update={"subnets": first.subnets[:1]})
    unchecked = config.model_copy(
        update={"multus": config.multus.model_copy(update={"networks": [short]})}
    )
    with pytest.raises(ValueError, match="shorter"):
        network_plan(unchecked)


def test_a_node_local_row_without_prefixes_renders_no_user_data() -> None:
    # The plan always sizes node-local rows; a hand-built one without prefixes must not reach a
    # node as a request for zero prefixes (its pods would get no address).
    row = network_plan(parse_config(example_raw("node-prefix.json")))[2]
    props = node_bootstrap_props(
        "cluster",
        (replace(row, prefixes_per_node=None),),
        subnet_id=lambda _: "subnet",
        security_group_id=lambda _: "sg",
    )
    with pytest.raises(ValueError, match="prefix_count must be at least 1"):
        deployed_size(props)


def test_a_subnet_with_a_static_range_gets_a_static_nad_in_its_zone_only() -> None:
    raw: dict[str, Any] = {
        "multus": {
            "networks": [
                {
                    "name": "n3",
                    "subnets": [
                        {
                            "cidr": "10.0.4.0/24",
                            "reservation": "10.0.4.32/27",
                            "static_range": "10.0.4.48/28",
                        },
                        {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                    ],
                }
            ]
        }
    }
    rows = network_plan(parse_config(raw))

    assert [(r.nad_name, r.static_range, r.static_nad_name) for r in rows] == [
        ("n3-us-west-2a", "10.0.4.48/28", "n3-us-west-2a-static"),
        ("n3-us-west-2b", None, None),
    ]


def test_only_modes_that_move_an_address_with_its_pod_offer_fixed_addresses() -> None:
    """A fixed address follows its pod to another node only where the pod IP agent assigns
    each address to the node's ENI; node_prefix nodes hand out their own /28 prefixes."""
    assert WHEREABOUTS.static_addresses and WHEREABOUTS.pod_ip_agent
    assert not NODE_PREFIX.static_addresses


def pool_view(raw: dict[str, Any], pool_name: str) -> list[tuple[object, ...]]:
    config = parse_config(raw)
    (pool,) = [pool for pool in config.node_pools if pool.name == pool_name]
    return [(row.pool, *facts(row)[:3]) for row in config.pool_plan(pool)]


def test_default_pool_view_is_the_whole_plan() -> None:
    # One pool with every network: its nodes use the plan's device indexes, as the seed did.
    config = parse_config({})
    (pool,) = config.node_pools
    assert [replace(row, pool=None) for row in config.pool_plan(pool)] == list(network_plan(config))
    assert {row.pool for row in config.pool_plan(pool)} == {"multus"}


def test_three_by_three_pool_view_keeps_every_network_and_zone() -> None:
    raw = example_raw("three-az-three-networks.json")
    view = pool_view(raw, "multus")
    assert len(view) == 9
    assert [(network, index) for _, network, _, index in view[::3]] == [
        (network["name"], position + 1)
        for position, network in enumerate(raw["multus"]["networks"])
    ]


def test_a_pools_view_numbers_only_its_networks_from_one_in_config_order() -> None:
    raw = example_raw("5g-core.json")
    assert pool_view(raw, "upf") == [
        ("upf", "n3", "us-west-2a", 1),
        ("upf", "n3", "us-west-2b", 1),
        ("upf", "n6", "us-west-2a", 2),
        ("upf", "n6", "us-west-2b", 2),
    ]
    assert pool_view(raw, "control") == [
        ("control", "n2", "us-west-2a", 1),
        ("control", "n2", "us-west-2b", 1),
    ]
    # The order is multus.networks', not the pool's list.
    raw["node_pools"][0]["networks"] = ["n6", "n3"]
    assert [row[1:4:2] for row in pool_view(raw, "upf")][::2] == [("n3", 1), ("n6", 2)]


def test_a_pools_view_keeps_each_rows_network_facts() -> None:
    config = parse_config(example_raw("5g-core.json"))
    plan = {(row.network, row.availability_zone): row for row in network_plan(config)}
    for pool in config.node_pools:
        for row in config.pool_plan(pool):
            # Only the device index (and the pool) are the pool's; NAD, interface, reservation
            # and security group stay the network's.
            assert replace(row, device_index=0, pool=None) == replace(
                plan[row.network, row.availability_zone], device_index=0
            )


def test_a_pool_without_networks_has_an_empty_view() -> None:
    raw = example_raw("5g-core.json")
    raw["node_pools"].append({"name": "plain", "networks": []})
    assert pool_view(raw, "plain") == []


def test_a_network_no_pool_attaches_is_a_warning_not_an_error() -> None:
    raw = example_raw("5g-core.json")
    raw["node_pools"][1]["networks"] = []
    config = parse_config(raw)
    assert config.warnings == [
        "multus.networks[0] (n2): no node pool attaches it, so no pod can use it; add it to the "
        "networks of a pool in node_pools"
    ]
    assert parse_config(example_raw("5g-core.json")).warnings == []


def test_every_row_of_a_routed_network_and_of_its_pools_view_carries_its_routes() -> None:
    raw = parse_config({}).model_dump(mode="json")
    raw["multus"]["networks"][1]["routes"] = [
        {"destination": "10.200.0.0/16", "transit_gateway_id": "tgw-0123456789abcdef0"},
        {"destination": "198.51.100.0/24", "nat_gateway": True},
    ]
    raw["node_pools"] = [{"name": "upf", "networks": ["multus2"]}]
    config = parse_config(raw)
    planned = (
        PlannedRoute("10.200.0.0/16", "transit_gateway", "tgw-0123456789abcdef0"),
        PlannedRoute("198.51.100.0/24", "nat_gateway", None),
    )

    plan = network_plan(config)
    assert {(row.network, row.routes) for row in plan} == {("multus1", ()), ("multus2", planned)}
    (pool,) = config.node_pools
    assert {row.routes for row in config.pool_plan(pool)} == {planned}


def dual_stack_indexes(raw: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {
        (row.network, row.availability_zone): row.ipv6.subnet_index
        for row in network_plan(parse_config(raw))
        if row.ipv6 is not None
    }


def test_a_dual_stack_subnets_64_follows_its_own_cidr_only() -> None:
    """A subnet's IPv6 CIDR cannot change in place (the subnet is replaced), so its /64 number
    depends on nothing a later change adds: another network before it, or another AZ."""
    raw = example_raw("dual-stack.json")
    before = dual_stack_indexes(raw)
    assert before == {("multus2", "us-west-2a"): 6, ("multus2", "us-west-2b"): 7}
    grown = json.loads(json.dumps(raw))
    grown["availability_zones"] = ["us-west-2a", "us-west-2b", "us-west-2c"]
    grown["vpc"].update(
        public_subnet_cidrs=["10.0.0.0/24", "10.0.1.0/24", "10.0.20.0/24"],
        node_subnet_cidrs=["10.0.2.0/24", "10.0.3.0/24", "10.0.21.0/24"],
    )
    first = {
        "name": "n0",
        "ipv6": {},
        "subnets": [
            {"cidr": f"10.0.{octet}.0/24", "reservation": f"10.0.{octet}.32/27"}
            for octet in (10, 11, 12)
        ],
    }
    for network, octet in zip(grown["multus"]["networks"], (22, 23), strict=True):
        network["subnets"].append(
            {"cidr": f"10.0.{octet}.0/24", "reservation": f"10.0.{octet}.32/27"}
        )
    grown["multus"]["networks"].insert(0, first)
    grown["node_pools"] = [{"name": "multus", "instance_cpus": [4, 8]}]
    after = dual_stack_indexes(grown)
    assert {key: after[key] for key in before} == before
    assert after[("multus2", "us-west-2c")] == 23
    assert after[("n0", "us-west-2a")] == 10
