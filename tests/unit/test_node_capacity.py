"""Max pods per Multus node: Karpenter's ENI arithmetic, the figures in docs/node-capacity.md and
the reservedENIs the app gives Karpenter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config import parse_config

DOC = Path(__file__).resolve().parents[2] / "docs" / "node-capacity.md"

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
