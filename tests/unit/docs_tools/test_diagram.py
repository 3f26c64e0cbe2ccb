"""The generated network picture: current for the default config, and drawn from any config."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from config import parse_config
from docs_tools import diagram
from docs_tools.context import load_from_cli
from tests.conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"
THREE_AZ = "examples/three-az-three-networks.json"


def texts(svg: str) -> list[str]:
    return [element.text or "" for element in ET.fromstring(svg).iter(f"{SVG}text")]


def test_committed_picture_matches_the_default_config() -> None:
    committed = (REPO / "docs" / "architecture.svg").read_text(encoding="utf-8")
    assert committed == diagram.render_svg(load_from_cli([]).base), (
        "docs/architecture.svg is stale: run `make diagram` and commit it"
    )


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
        if element.get("height") == f"{diagram.BAR_HEIGHT:.1f}"
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
        "subnet-0a1b2c3d4e5f60721 (given): system and Karpenter nodes",
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
