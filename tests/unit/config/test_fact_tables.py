"""The fact tables behind validation agree with their sources and with each other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from pydantic import BaseModel

from config import aws_regions, instance_types, karpenter_releases
from config.interface_names import reserved_interface_reason
from config.messages import element_type
from config.model import MAX_ENIS_BY_VCPUS, AppConfig, KarpenterConfig
from config.patterns import PLAIN_PATTERNS
from config.pipeline import PipelineConfig


def test_the_region_table_lists_exactly_the_regions_botocore_knows() -> None:
    # A botocore upgrade that brings a Region fails here until its zones are in the table.
    regions = set(botocore.session.get_session().get_available_regions("ec2"))
    assert set(aws_regions.AVAILABILITY_ZONE_LETTERS) == regions


@pytest.mark.parametrize(
    ("region", "zones"),
    [
        ("us-west-2", ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]),
        ("ca-central-1", ["ca-central-1a", "ca-central-1b", "ca-central-1d"]),
        ("eu-central-1", ["eu-central-1a", "eu-central-1b", "eu-central-1c"]),
        ("nowhere-1", []),
    ],
)
def test_zone_names_of_a_region(region: str, zones: list[str]) -> None:
    assert aws_regions.availability_zones(region) == zones


def test_every_graviton_named_family_is_known_as_arm64() -> None:
    graviton_named = {
        family
        for family in instance_types.ec2_families()
        if re.match(r"^[a-z]+[0-9]+g", family) or family == "a1"
    }
    assert graviton_named <= instance_types.ARM64_FAMILIES
    assert instance_types.ec2_families() >= instance_types.ARM64_FAMILIES


@pytest.mark.parametrize(
    ("family", "architecture"),
    [
        ("mac2", "arm64"),  # Apple M1, no "g" in the name
        ("mac-m4pro", "arm64"),
        ("p6e-gb200", "arm64"),  # NVIDIA Grace
        ("m7g", "arm64"),
        ("g5g", "arm64"),
        ("g4dn", "x86_64"),  # NVIDIA GPU on Intel
        ("gr6", "x86_64"),
        ("mac1", "x86_64"),  # Intel Mac mini
        ("m6i", "x86_64"),
    ],
)
def test_architecture_of_families_whatever_their_name(family: str, architecture: str) -> None:
    assert instance_types.architecture(family) == architecture


def _size_name(vcpus: int) -> str:
    return {1: "medium", 2: "large", 4: "xlarge"}.get(vcpus, f"{vcpus // 4}xlarge")


def test_node_pool_sizes_are_real_instance_types() -> None:
    unknown = [
        f"{family}.{_size_name(vcpus)}"
        for family, sizes in instance_types.NODE_POOL_FAMILIES.items()
        for vcpus in sizes
        if f"{family}.{_size_name(vcpus)}" not in instance_types.ec2_instance_types()
    ]
    assert unknown == []


@pytest.mark.parametrize(
    ("family", "vcpus", "interfaces"),
    [
        # EC2 user guide, network specifications of general purpose / compute / memory types
        ("m5", 2, 3),  # m5.large
        ("m5", 4, 4),  # m5.xlarge
        ("m5", 16, 8),  # m5.4xlarge
        ("m5", 96, 15),  # m5.24xlarge
        ("c5", 36, 8),  # c5.9xlarge
        ("c5", 72, 15),  # c5.18xlarge
        ("r6i", 128, 15),  # r6i.32xlarge
        ("c6in", 128, 8),  # c6in.32xlarge: 16 interfaces over 2 network cards
    ],
)
def test_interfaces_per_size(family: str, vcpus: int, interfaces: int) -> None:
    assert instance_types.NODE_POOL_FAMILIES[family][vcpus] == interfaces


def test_the_vcpu_table_is_the_fewest_interfaces_of_any_family() -> None:
    fewest = {
        vcpus: min(
            sizes[vcpus] for sizes in instance_types.NODE_POOL_FAMILIES.values() if vcpus in sizes
        )
        for vcpus in MAX_ENIS_BY_VCPUS
    }
    assert fewest == MAX_ENIS_BY_VCPUS


@pytest.mark.parametrize(
    ("kubernetes", "first_karpenter"),
    # Karpenter's compatibility matrix: 1.33 >= 1.5, 1.34 >= 1.6, 1.35 >= 1.9, 1.36 >= 1.13
    [("1.33", "1.5.0"), ("1.34", "1.6.0"), ("1.35", "1.9.0"), ("1.36", "1.13.0")],
)
def test_first_karpenter_release_per_kubernetes_minor(
    kubernetes: str, first_karpenter: str
) -> None:
    assert karpenter_releases.first_supporting(kubernetes) == first_karpenter


@pytest.mark.parametrize(
    ("version", "known"), [("1.14.1", True), ("1.14.2", False), ("1.99.0", False), ("1.7.3", True)]
)
def test_known_karpenter_releases(version: str, known: bool) -> None:
    assert (karpenter_releases.release_problem(version) is None) is known


def test_the_default_karpenter_release_is_known() -> None:
    default = KarpenterConfig.model_fields["version"].default
    assert karpenter_releases.release_problem(default) is None


@pytest.mark.parametrize(
    "name", ["lo", "eth0", "eth1", "ens5", "ens6", "enp0s5", "eni0a1b2c3d4e5", "vlan7", "dummy3"]
)
def test_reserved_interface_names(name: str) -> None:
    assert reserved_interface_reason(name) is not None


@pytest.mark.parametrize("name", ["multus1", "signaling", "userplane", "oam", "enable", "lo1x"])
def test_free_interface_names(name: str) -> None:
    assert reserved_interface_reason(name) is None


def _pattern_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str]]:
    for name, info in model.model_fields.items():
        for metadata in info.metadata:
            pattern = getattr(metadata, "pattern", None)
            if pattern is not None:
                yield f"{prefix}{name}", str(pattern)
        inner: Any = element_type(info.annotation)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            yield from _pattern_fields(inner, f"{prefix}{name}.")


PATTERN_FIELDS = [*_pattern_fields(AppConfig), *_pattern_fields(PipelineConfig, "pipeline.")]


def test_the_models_have_pattern_fields() -> None:
    assert len(PATTERN_FIELDS) >= 15


@pytest.mark.parametrize(("field", "pattern"), PATTERN_FIELDS, ids=[f for f, _ in PATTERN_FIELDS])
def test_every_pattern_field_has_plain_words(field: str, pattern: str) -> None:
    assert pattern in PLAIN_PATTERNS, f"{field}: add a PlainPattern to config/patterns.py"


@pytest.mark.parametrize("plain", PLAIN_PATTERNS.values(), ids=list(PLAIN_PATTERNS))
def test_every_example_matches_its_own_pattern(plain: Any) -> None:
    for example in plain.example.split(" or "):
        assert re.match(plain.regex, example.strip('"')), example
