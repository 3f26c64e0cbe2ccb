"""The generated network pictures: current for the default config and every example, and every
element of a config (pool, attachment, route, security group rule, fixed range) drawn."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import pytest

from config import AppConfig, parse_config
from config.node_prefix import PREFIX_LENGTH
from docs_tools import diagram
from docs_tools.context import load_from_cli
from docs_tools.diagram.svg import BAR_HEIGHT
from tests.conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"
THREE_AZ = "examples/three-az-three-networks.json"


def texts(svg: str) -> list[str]:
    return [element.text or "" for element in ET.fromstring(svg).iter(f"{SVG}text")]


@pytest.mark.parametrize(
    ("picture", "context"),
    diagram.committed_pictures().items(),
    ids=lambda value: value.name if isinstance(value, Path) else None,
)
def test_committed_picture_matches_its_config(picture: Path, context: list[str]) -> None:
    assert picture.exists(), f"{picture.relative_to(REPO)} is missing: run `make docs`"
    committed = picture.read_text(encoding="utf-8")
    assert committed == diagram.render_svg(load_from_cli(context).base), (
        f"{picture.relative_to(REPO)} is stale: run `make docs` and commit it"
    )


def test_every_example_has_a_picture_linked_from_the_network_page() -> None:
    network_page = (REPO / "docs" / "network.md").read_text(encoding="utf-8")
    for example in sorted((REPO / "examples").glob("*.json")):
        assert f"(pictures/{example.stem}.svg)" in network_page, example.name


def test_default_picture_shows_the_seed_layout() -> None:
    # The seed (DESIGN.md): multus1 10.0.4.0/24 + 10.0.5.0/24 reserving .32/27 in each; NADs
    # <network>-<az> with a Whereabouts range equal to the reservation via the subnet's .1.
    lines = texts(diagram.render_svg(parse_config({})))
    for expected in (
        "Availability zone us-west-2a",
        "Availability zone us-west-2b",
        "public  10.0.0.0/24",
        "nodes  10.0.3.0/24",
        "multus1  10.0.4.0/24",
        "reservation 10.0.5.32/27",
        "NAD multus2-us-west-2b",
        "range 10.0.4.32-10.0.4.63/24 via 10.0.4.1",
        "range 10.0.7.32-10.0.7.63/24 via 10.0.7.1",
    ):
        assert expected in lines


def test_reservation_sits_where_its_addresses_are_in_the_subnet() -> None:
    # 10.0.4.32/27 in 10.0.4.0/24: starts 32/256 of the way along, covers 32/256 of the bar.
    bar, reservation = [
        element
        for element in ET.fromstring(diagram.render_svg(parse_config({}))).iter(f"{SVG}rect")
        if element.get("height") == f"{BAR_HEIGHT:.1f}"
    ][:2]
    width = float(bar.attrib["width"])
    start = float(reservation.attrib["x"]) - float(bar.attrib["x"])
    assert start == pytest.approx(width * 32 / 256, abs=0.1)
    assert float(reservation.attrib["width"]) == pytest.approx(width * 32 / 256, abs=0.1)


def test_config_file_draws_every_zone_and_network(tmp_path: Path) -> None:
    output = tmp_path / "not-yet" / "three.svg"
    assert diagram.main(["-c", f"config_file={THREE_AZ}", "--output", str(output)]) == 0
    lines = texts(output.read_text(encoding="utf-8"))
    zones = [line for line in lines if line.startswith("Availability zone ")]
    assert zones == [f"Availability zone us-west-2{letter}" for letter in "abc"]
    nads = sorted(line for line in lines if line.startswith("NAD "))
    assert len(nads) == 9
    assert "NAD oam-us-west-2c" in nads
    assert "oam  10.1.41.0/25  (no NAT route)" in lines


def test_single_override_reaches_the_picture(tmp_path: Path) -> None:
    output = tmp_path / "single.svg"
    diagram.main(["-c", "config.vpc.nat_gateways=single", "--output", str(output)])
    lines = texts(output.read_text(encoding="utf-8"))
    assert lines.count("NAT gateway, load balancers") == 1


def test_bad_config_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "never.svg"
    assert diagram.main(["-c", "config.vpc.cidr=10.0.0.0/33", "--output", str(output)]) == 1
    assert "vpc.cidr" in capsys.readouterr().err
    assert not output.exists()


def test_node_prefix_network_shows_prefixes_instead_of_a_range(tmp_path: Path) -> None:
    # examples/node-prefix.json: userplane is node_prefix, signaling stays on Whereabouts.
    loaded = load_from_cli(["config_file=examples/node-prefix.json"]).base
    lines = texts(diagram.render_svg(loaded))
    assert "NAD userplane-us-west-2a (node-local config)" in lines
    # cpu_limit 32 / 4 vCPUs: 8 nodes x 4 prefixes fill the /23 (see test_node_prefix.py).
    per_node = "4 x /28 prefix(es) per node, host-local"
    assert lines.count(per_node) == 2
    assert not [line for line in lines if line.startswith("range 10.0.10.")]
    assert "range 10.0.4.32-10.0.4.63/24 via 10.0.4.1" in lines


def test_an_existing_vpc_is_drawn_with_the_teams_ids_and_no_subnet_of_a_new_vpc() -> None:
    lines = texts(
        diagram.render_svg(load_from_cli(["config_file=examples/existing-vpc.json"]).base)
    )
    for expected in (
        "nodes  10.0.2.0/24",
        "subnet-0a1b2c3d4e5f60721 (given)",
        "system and Karpenter nodes (primary ENI)",
        "public  10.0.1.0/24",
        "n6  10.0.68.0/24",
    ):
        assert expected in lines, expected
    assert any("vpc-0a1b2c3d4e5f60718 10.0.0.0/16 (given)" in line for line in lines)
    assert any(
        "NAT gateways: nat-0a1b2c3d4e5f60731, nat-0a1b2c3d4e5f60732" in line for line in lines
    )
    assert not any("NAT gateway, load balancers" in line for line in lines)


def test_dual_stack_subnets_show_their_64_and_pod_range() -> None:
    loaded = load_from_cli(["config_file=examples/dual-stack.json"]).base
    lines = texts(diagram.render_svg(loaded))
    assert "IPv6 /64 no. 6 of the VPC /56, pods /112 no. 1" in lines
    assert "IPv6 /64 no. 7 of the VPC /56, pods /112 no. 1" in lines
    assert len([line for line in lines if line.startswith("IPv6 ")]) == 2


# Every kind of element at once: each route target, a network as a rule's peer, a port range,
# a description to escape, an empty egress, a fixed range and a pool without a Multus network.
EVERY_KIND = {
    "multus": {
        "networks": [
            {
                "name": "n3",
                "nat_egress": False,
                "subnets": [
                    {
                        "cidr": "10.0.4.0/24",
                        "reservation": "10.0.4.32/27",
                        "static_range": "10.0.4.48/28",
                    },
                    {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                ],
                "routes": [
                    {"destination": "10.100.0.0/16", "transit_gateway_id": "tgw-0a1b2c3d4e5f60741"},
                    {"destination": "10.101.0.0/16", "vpn_gateway_id": "vgw-0a1b2c3d4e5f60742"},
                    {
                        "destination": "10.102.0.0/16",
                        "network_interface_id": "eni-0a1b2c3d4e5f60743",
                    },
                    {"destination": "198.51.100.0/24", "nat_gateway": True},
                ],
                "security_group": {
                    "ingress": [
                        {
                            "protocol": "udp",
                            "ports": 2152,
                            "cidr": "10.100.0.0/16",
                            "description": "GTP-U & PFCP",
                        },
                        {"protocol": "tcp", "ports": "30000-32767", "network": "n6"},
                        {"protocol": 132, "network": "n3"},
                    ],
                    "egress": [],
                },
            },
            {
                "name": "n6",
                "subnets": [
                    {"cidr": "10.0.6.0/24", "reservation": "10.0.6.32/27"},
                    {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
                ],
                "security_group": {"ingress": []},
            },
        ]
    },
    "node_pools": [
        {"name": "upf", "networks": ["n3", "n6"]},
        {"name": "control", "networks": ["n6"]},
        {"name": "plain", "networks": []},
    ],
}

#: A word of each route target's kind, as a reader looks for it.
TARGET_WORDS = {
    "transit_gateway": "transit",
    "vpn_gateway": "VPN",
    "network_interface": "interface",
    "nat_gateway": "NAT",
}


@cache  # both parametrized tests draw the same configs; load each once
def configs_to_draw() -> list[tuple[str, AppConfig]]:
    return [
        ("default", load_from_cli([]).base),
        ("every-kind", parse_config(EVERY_KIND)),
        *(
            (example.name, load_from_cli([f"config_file={example.relative_to(REPO)}"]).base)
            for example in sorted((REPO / "examples").glob("*.json"))
        ),
    ]


def group_lines(svg: str) -> dict[str, list[str]]:
    """Each named group's text lines (zone-<az>, network-<name>, pool-<name>, legend)."""
    return {
        group.attrib["id"]: [element.text or "" for element in group.iter(f"{SVG}text")]
        for group in ET.fromstring(svg).iter(f"{SVG}g")
    }


def words(line: str) -> list[str]:
    # A colon ends a label ("ports: 2152"); inside a word it is IPv6's (2001:db8::/32).
    return re.sub(r":(\s|$)", " ", line.replace(",", " ")).split()


def has_line(lines: list[str], *expected: str) -> bool:
    """Whether one line holds each expected word (a CIDR, an ID, a name, a port)."""
    return any(set(expected) <= set(words(line)) for line in lines)


@pytest.mark.parametrize(("name", "config"), configs_to_draw(), ids=lambda value: None)
def test_every_element_of_the_config_is_in_the_picture(name: str, config: AppConfig) -> None:
    groups = group_lines(diagram.render_svg(config))
    all_networks = [network.name for network in config.multus.networks]
    for pool in config.node_pools:
        pool_lines = groups[f"pool-{pool.name}"]
        assert has_line(pool_lines, pool.name), (name, pool.name)
        for attached in all_networks if pool.networks is None else pool.networks:
            assert has_line(pool_lines[1:], attached), (name, pool.name, attached)
            assert has_line(groups[f"network-{attached}"], pool.name), (name, pool.name, attached)
        if any(row.prefixes_per_node for row in config.pool_plan(pool)):
            assert any(f"/{PREFIX_LENGTH} prefixes" in line for line in pool_lines), pool.name
    for network in config.multus.networks:
        lines = groups[f"network-{network.name}"]
        assert has_line(lines, network.name)
        if network.nat_egress:
            assert has_line(lines, "0.0.0.0/0", "NAT"), (name, network.name)
        for route in network.routes:
            target = [route.target_id] if route.target_id else []
            assert has_line(lines, route.destination, TARGET_WORDS[route.target], *target), (
                name,
                route,
            )
        rules = [
            ("ingress", config.multus_ingress_rules(network)),
            ("egress", network.security_group.egress),
        ]
        for direction, direction_rules in rules:
            assert any(line.startswith(direction) for line in lines), (name, direction)
            for rule in direction_rules:
                peer = rule.cidr or rule.network or ""
                ports = [] if rule.ports is None else [str(rule.ports)]
                assert has_line(lines, direction, str(rule.protocol), *ports, peer), (name, rule)
                description = rule.description or ""
                assert any(description in line for line in lines), (name, rule)
        for zone, subnet in zip(config.availability_zones, network.subnets, strict=True):
            zone_lines = groups[f"zone-{zone}"]
            assert has_line(zone_lines, network.name, subnet.cidr), (name, subnet.cidr)
            if subnet.static_range:
                assert has_line(zone_lines, "fixed", subnet.static_range), (name, subnet)
            if network.ip_management == "node_prefix":
                assert any(f"/{PREFIX_LENGTH} prefix" in line for line in zone_lines), name


@pytest.mark.parametrize(("name", "config"), configs_to_draw(), ids=lambda value: None)
def test_the_legend_explains_exactly_the_kinds_drawn(name: str, config: AppConfig) -> None:
    legend = " | ".join(group_lines(diagram.render_svg(config))["legend"])
    networks = config.multus.networks
    drawn = {
        "public subnet": config.vpc.existing is None or bool(config.vpc.existing.public_subnets),
        "node subnet": True,
        "Multus subnet": True,
        "CIDR reservation": True,
        "fixed range": any(subnet.static_range for n in networks for subnet in n.subnets),
        "Multus network": True,
        "Karpenter node pool": True,
        "route:": any(network.nat_egress or network.routes for network in networks),
        "security group rule": True,
    }
    for entry, expected in drawn.items():
        assert (entry in legend) == expected, (name, entry)
    assert "on every Karpenter node" not in legend


def test_text_from_the_config_is_escaped() -> None:
    svg = diagram.render_svg(parse_config(EVERY_KIND))
    assert "GTP-U &amp; PFCP" in svg
    assert any("GTP-U & PFCP" in line for line in group_lines(svg)["network-n3"])


def test_a_network_on_the_second_card_is_drawn_with_its_card() -> None:
    """Device indexes count per network card: two networks at device 1 differ by card."""

    def network(name: str, third: int, **settings: object) -> dict[str, object]:
        subnets = [
            {"cidr": f"10.0.{n}.0/24", "reservation": f"10.0.{n}.32/27"} for n in (third, third + 1)
        ]
        return {"name": name, "subnets": subnets, **settings}

    config = parse_config(
        {
            "multus": {"networks": [network("multus1", 4), network("multus2", 6, network_card=1)]},
            "node_pools": [{"name": "upf", "instance_families": ["c6in"], "instance_cpus": [128]}],
        }
    )
    drawn = texts(diagram.render_svg(config))
    assert "device 1: multus1 as multus1" in drawn
    assert "card 1 device 1: multus2 as multus2" in drawn
