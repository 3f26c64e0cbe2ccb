"""Max pods per Multus node: Karpenter's ENI arithmetic, the figures in docs/node-capacity.md and
the reservedENIs the app gives Karpenter."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from config import parse_config
from config.instance_types import NODE_POOL_FAMILIES
from config.interface_addresses import IPV4_ADDRESSES_PER_INTERFACE

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "node-capacity.md"

# (ENIs, IPv4 addresses per ENI) as AWS publishes them for these types (EC2 user guide table;
# the VPC CNI's vpc_ip_resource_limit.go: m5.large ENILimit 3 IPv4Limit 10, c5.xlarge 4 / 15).
LIMITS = {"m5.large": (3, 10), "c5.xlarge": (4, 15)}
# The EKS AMI's eni-max-pods.txt (no reserved ENI).
ENI_MAX_PODS = {"m5.large": 29, "c5.xlarge": 58}


def eni_limited_pods(enis: int, ipv4_per_eni: int, reserved_enis: int) -> int:
    """Karpenter v1.14.1's ENILimitedPods (0 when no ENI is left for pods)."""
    usable = max(enis - reserved_enis, 0)
    return usable * (ipv4_per_eni - 1) + 2 if usable else 0


def doc_row(instance_type: str) -> list[str]:
    (line,) = [row for row in DOC.read_text().splitlines() if row.startswith(f"| {instance_type} ")]
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize("instance_type", sorted(LIMITS))
def test_formula_reproduces_the_eks_ami_table_without_reserved_enis(instance_type: str) -> None:
    assert eni_limited_pods(*LIMITS[instance_type], reserved_enis=0) == ENI_MAX_PODS[instance_type]


@pytest.mark.parametrize(
    ("instance_type", "networks", "expected"),
    [("m5.large", 2, 11), ("c5.xlarge", 2, 30), ("c5.xlarge", 3, 16)],
)
def test_max_pods_with_multus_networks(instance_type: str, networks: int, expected: int) -> None:
    assert eni_limited_pods(*LIMITS[instance_type], reserved_enis=networks) == expected


@pytest.mark.parametrize("instance_type", sorted(LIMITS))
def test_documented_figures_match_the_formula(instance_type: str) -> None:
    _, enis, ipv4, *cells = doc_row(instance_type)
    assert (int(enis), int(ipv4)) == LIMITS[instance_type]
    for reserved, cell in zip((0, 2, 3), cells, strict=True):
        if reserved + 1 > LIMITS[instance_type][0]:
            assert cell.startswith("not possible")
            continue
        (figure,) = re.findall(r"\*\*(\d+)\*\*", cell)
        assert int(figure) == eni_limited_pods(*LIMITS[instance_type], reserved_enis=reserved)


def test_seed_reserves_one_eni_per_multus_network() -> None:
    # The synthesized value is checked in tests/unit/stacks (test_controller_values, test_images);
    # this pins the seed's figure the docs quote: 2 networks -> an m5.large runs 11 pods.
    networks = len(parse_config({}).multus.networks)
    assert networks == 2
    assert eni_limited_pods(*LIMITS["m5.large"], reserved_enis=networks) == 11


POOL_CONFIGS = {
    "default": {},
    "5g-core": json.loads((REPO / "examples" / "5g-core.json").read_text()),
}
SIZE_NAMES = {2: "large", 4: "xlarge", 8: "2xlarge", 16: "4xlarge"}


def pool_rows() -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in DOC.read_text().splitlines()
        if line.split("|")[1:2] and line.split("|")[1].strip() in POOL_CONFIGS
    ]


def test_the_per_pool_table_matches_karpenters_formula_for_each_pools_sizes() -> None:
    """karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go: pods() feeds the
    global options.ReservedENIs into ENILimitedPods for every NodePool's instance types."""
    rows = pool_rows()
    assert len(rows) == 11
    for config_name, pool_cell, instance_type, enis, ipv4, ours, own, lost in rows:
        config = parse_config(POOL_CONFIGS[config_name])
        pool_name, networks = re.fullmatch(r"(\S+) \((\d+)\)", pool_cell).groups()  # type: ignore[union-attr]
        (pool,) = [pool for pool in config.node_pools if pool.name == pool_name]
        assert len({row.network for row in config.pool_plan(pool)}) == int(networks)
        family, _, size = instance_type.partition(".")
        (cpus,) = [cpus for cpus, name in SIZE_NAMES.items() if name == size]
        assert (family, cpus) in {(f, c) for f, c, _ in pool.allowed_sizes()}, instance_type
        assert int(enis) == NODE_POOL_FAMILIES[family][cpus]
        assert int(ipv4) == IPV4_ADDRESSES_PER_INTERFACE[family][cpus]
        with_app = eni_limited_pods(int(enis), int(ipv4), reserved_enis=config.reserved_enis)
        with_own = eni_limited_pods(int(enis), int(ipv4), reserved_enis=int(networks))
        assert re.findall(r"\*\*(\d+)\*\*", " ".join((ours, own, lost))) == [
            str(with_app),
            str(with_own),
            str(with_own - with_app),
        ], instance_type


def test_reserved_enis_is_the_most_networks_of_any_pool() -> None:
    assert parse_config({}).reserved_enis == 2
    assert parse_config(POOL_CONFIGS["5g-core"]).reserved_enis == 2
