"""The config model: seed defaults and a clear, field-naming error for each kind of bad input."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from config import ConfigError, parse_config


def seed_raw() -> dict[str, Any]:
    """The seed config spelled out in full, so each test can break exactly one field."""
    return parse_config({}).model_dump(mode="json")


def error_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


def test_defaults_reproduce_the_seed() -> None:
    config = parse_config({})
    assert config.region == "us-west-2"
    assert config.availability_zones == ["us-west-2a", "us-west-2b"]
    assert config.vpc.cidr == "10.0.0.0/16"
    assert config.vpc.public_subnet_cidrs == ["10.0.0.0/24", "10.0.1.0/24"]
    assert config.vpc.node_subnet_cidrs == ["10.0.2.0/24", "10.0.3.0/24"]
    assert [
        [(s.cidr, s.reservation) for s in network.subnets] for network in config.multus.networks
    ] == [
        [("10.0.4.0/24", "10.0.4.32/27"), ("10.0.5.0/24", "10.0.5.32/27")],
        [("10.0.6.0/24", "10.0.6.32/27"), ("10.0.7.0/24", "10.0.7.32/27")],
    ]
    assert config.cluster.system_node_group.min_size == 1
    assert config.cluster.system_node_group.desired_size == 2
    assert config.cluster.system_node_group.max_size == 3


def test_the_full_seed_dump_round_trips() -> None:
    assert parse_config(seed_raw()) == parse_config({})


def with_change(path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(seed_raw())
    node: Any = raw
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if leaf.isdigit():
        node[int(leaf)] = value
    else:
        node[leaf] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("vpc.cidr", "10.0.0.0/33", ["vpc.cidr", "not an IPv4 CIDR"]),
        ("vpc.public_subnet_cidrs.0", "10.0.0.1/24", ["vpc.public_subnet_cidrs[0]", "host bits"]),
        (
            "multus.networks.0.subnets.0.cidr",
            "10.9.4.0/24",
            ["multus.networks[0].subnets[0]", "not inside subnet 10.9.4.0/24"],
        ),
        (
            "vpc.node_subnet_cidrs.1",
            "10.1.3.0/24",
            ["vpc.node_subnet_cidrs[1]", "outside the VPC CIDR 10.0.0.0/16"],
        ),
        (
            "vpc.node_subnet_cidrs.1",
            "10.0.4.128/25",
            ["vpc.node_subnet_cidrs[1]", "overlaps", "multus.networks[0].subnets[0].cidr"],
        ),
        (
            "multus.networks.0.subnets.0.reservation",
            "10.1.4.32/27",
            ["multus.networks[0].subnets[0]", "not inside subnet 10.0.4.0/24"],
        ),
        (
            "multus.networks.0.subnets.0.reservation",
            "10.0.4.0/28",
            ["multus.networks[0].subnets[0]", "addresses AWS keeps", "10.0.4.4-10.0.4.254"],
        ),
        (
            "multus.networks.0.subnets.0.reservation",
            "10.0.4.240/28",
            ["multus.networks[0].subnets[0]", "addresses AWS keeps"],
        ),
        ("availability_zones", ["us-west-2a"], ["availability_zones", "at least 2"]),
        (
            "availability_zones",
            ["us-west-2a", "us-east-1b"],
            ["availability_zones", "'us-east-1b' is not an availability zone of us-west-2"],
        ),
        ("region", "us-west-9", ["region", "not an AWS Region"]),
        (
            "multus.networks.1.name",
            "multus1",
            ["multus.networks[1].name", "'multus1' is also networks[0]'s name"],
        ),
        ("vpc.nat_gatways", "single", ["vpc.nat_gatways", "unknown key"]),
        ("clustr", {}, ["clustr", "unknown key"]),
        ("cluster.kubernetes_version", "1.31", ["cluster.kubernetes_version", "'1.33'"]),
        (
            "karpenter.version",
            "1.5.3",
            ["karpenter.version: 1.5.3 does not support Kubernetes 1.35", ">= 1.9.0"],
        ),
        (
            "cluster.system_node_group.instance_types",
            ["c5.lage"],
            ["cluster.system_node_group.instance_types[0]", "'c5.lage' is not an EC2 instance"],
        ),
        (
            "cluster.system_node_group.min_size",
            3,
            ["cluster.system_node_group", "min_size <= desired_size <= max_size", "3 / 2 / 3"],
        ),
        (
            "cluster.system_node_group.max_size",
            1,
            ["cluster.system_node_group", "min_size <= desired_size <= max_size", "1 / 2 / 1"],
        ),
    ],
)
def test_bad_input_names_the_field(path: str, value: Any, expected: list[str]) -> None:
    message = error_for(with_change(path, value))
    for fragment in expected:
        assert fragment in message, message


def test_network_missing_a_subnet_for_an_az_is_named() -> None:
    raw = seed_raw()
    raw["multus"]["networks"][1]["subnets"].pop()
    message = error_for(raw)
    assert "multus.networks[1] (multus2).subnets: 1 subnet(s) for 2 availability zones" in message


def test_a_third_az_needs_subnets_everywhere() -> None:
    raw = seed_raw()
    raw["availability_zones"].append("us-west-2c")
    message = error_for(raw)
    # The line starts with the field's path, so the reader can find the key to fix.
    assert " vpc.public_subnet_cidrs: 2 subnet(s) for 3 availability zones" in message, message
    raw["vpc"]["public_subnet_cidrs"].append("10.0.10.0/24")
    message = error_for(raw)
    assert " vpc.node_subnet_cidrs: 2 subnet(s) for 3 availability zones" in message, message


def test_small_reservation_just_inside_the_usable_range_is_accepted() -> None:
    config = parse_config(with_change("multus.networks.0.subnets.0.reservation", "10.0.4.4/30"))
    assert config.multus.networks[0].subnets[0].reservation == "10.0.4.4/30"


def test_several_errors_are_reported_together() -> None:
    raw = with_change("vpc.cidr", "nonsense")
    raw["typo"] = 1
    message = error_for(raw)
    assert "vpc.cidr" in message
    assert "typo: unknown key" in message


@pytest.mark.parametrize(
    ("kubernetes", "karpenter", "accepted"),
    [
        ("1.33", "1.5.0", True),
        ("1.34", "1.5.8", False),
        ("1.34", "1.6.0", True),
        ("1.35", "1.8.8", False),
        ("1.35", "1.9.0", True),
        ("1.36", "1.12.2", False),
        ("1.36", "1.13.0", True),
    ],
)
def test_karpenter_kubernetes_matrix(kubernetes: str, karpenter: str, accepted: bool) -> None:
    raw = with_change("cluster.kubernetes_version", kubernetes)
    raw["karpenter"]["version"] = karpenter
    if accepted:
        assert parse_config(raw).karpenter.version == karpenter
    else:
        assert "does not support Kubernetes" in error_for(raw)


def test_karpenter_controller_resources_default() -> None:
    karpenter = parse_config({}).karpenter
    assert (karpenter.controller_cpu, karpenter.controller_memory) == ("1", "1Gi")
    assert karpenter.spot_service_linked_role is False


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("karpenter.controller_cpu", "1 core", ["karpenter.controller_cpu"]),
        ("karpenter.controller_cpu", "0", ["karpenter.controller_cpu"]),
        ("karpenter.controller_memory", "1GB", ["karpenter.controller_memory"]),
        ("karpenter.controller_memory", "0Gi", ["karpenter.controller_memory"]),
        (
            "cluster.system_node_group.instance_types",
            ["c5.large", "m7g.large"],
            ["cluster.system_node_group", "['m7g.large'] are arm64", "x86_64"],
        ),
        (
            "cluster.system_node_group.instance_types",
            ["t4g.medium"],
            ["cluster.system_node_group", "arm64"],
        ),
    ],
)
def test_bad_cluster_and_karpenter_fields_are_named(
    path: str, value: Any, expected: list[str]
) -> None:
    message = error_for(with_change(path, value))
    for fragment in expected:
        assert fragment in message, message


def test_more_controller_replicas_than_system_nodes_is_refused() -> None:
    raw = with_change("karpenter.replicas", 3)
    message = error_for(raw)
    assert "karpenter.replicas: 3 controller replicas need as many system nodes" in message
    assert "cluster.system_node_group.desired_size is 2" in message
    raw["cluster"]["system_node_group"]["desired_size"] = 3
    assert parse_config(raw).karpenter.replicas == 3


@pytest.mark.parametrize(("cpu", "memory"), [("500m", "512Mi"), ("0.5", "2Gi"), ("2", "1024Mi")])
def test_kubernetes_quantities_are_accepted(cpu: str, memory: str) -> None:
    raw = with_change("karpenter.controller_cpu", cpu)
    raw["karpenter"]["controller_memory"] = memory
    karpenter = parse_config(raw).karpenter
    assert (karpenter.controller_cpu, karpenter.controller_memory) == (cpu, memory)


def test_x86_instance_types_with_a_g_elsewhere_are_accepted() -> None:
    # g4dn/g5 are NVIDIA GPU x86_64 families, not Graviton.
    raw = with_change("cluster.system_node_group.instance_types", ["g4dn.xlarge", "g5.xlarge"])
    assert parse_config(raw).cluster.system_node_group.instance_types == [
        "g4dn.xlarge",
        "g5.xlarge",
    ]


def test_more_networks_than_the_smallest_instance_has_interfaces() -> None:
    raw = seed_raw()
    third = copy.deepcopy(raw["multus"]["networks"][1])
    third["name"] = "multus3"
    third["subnets"] = [
        {"cidr": "10.0.8.0/24", "reservation": "10.0.8.32/27"},
        {"cidr": "10.0.9.0/24", "reservation": "10.0.9.32/27"},
    ]
    raw["multus"]["networks"].append(third)
    message = error_for(raw)
    assert (
        "3 Multus ENIs (one per network, enis_per_node per host-device network) need 4 "
        "network interfaces per node" in message
    )
    assert "node_pools[0] (multus).instance_cpus (2 vCPUs) has 3 (m5)" in message
    raw["node_pools"][0]["instance_cpus"] = [4, 8]
    assert len(parse_config(raw).multus.networks) == 3


@pytest.mark.parametrize(
    ("families", "cpus"),
    [
        # m5.12xlarge (48 vCPUs) and c5.9xlarge (36) both take 8 ENIs (m5 has no 36-vCPU size):
        # among equals, the error names the smaller.
        (["m5", "c5"], [36, 48]),
        # c8a.8xlarge has fewer vCPUs (32) but more ENIs (10) than c5.9xlarge (36, 8): the size
        # that cannot take the networks is the one with the fewest ENIs, not the fewest vCPUs.
        (["c8a", "c5"], [32, 36, 48]),
    ],
)
def test_the_error_names_the_size_with_the_fewest_interfaces(
    families: list[str], cpus: list[int]
) -> None:
    raw = seed_raw()
    template = raw["multus"]["networks"][0]
    raw["multus"]["networks"] = []
    for index in range(8):
        network = copy.deepcopy(template)
        network["name"] = f"multus{index + 1}"
        network["subnets"] = [
            {
                "cidr": f"10.0.{32 + 2 * index + az}.0/24",
                "reservation": f"10.0.{32 + 2 * index + az}.32/27",
            }
            for az in range(2)
        ]
        raw["multus"]["networks"].append(network)
    raw["node_pools"][0]["instance_families"] = families
    raw["node_pools"][0]["instance_cpus"] = cpus
    message = error_for(raw)
    assert (
        "8 Multus ENIs (one per network, enis_per_node per host-device network) need 9 "
        "network interfaces per node" in message
    )
    assert "node_pools[0] (multus).instance_cpus (36 vCPUs) has 8 (c5)" in message


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            "node_pools.0.instance_cpus",
            [3],
            ["node_pools[0].instance_cpus", "[3]: pick vCPU counts"],
        ),
        (
            "node_pools.0.ami_alias",
            "al2023@latest",
            ["node_pools[0].ami_alias", "al2023@v20261112"],
        ),
        ("node_pools.0.capacity_types", ["reserved"], ["node_pools[0].capacity_types[0]"]),
        ("extras.sample_workload", True, ["extras.sample_workload", "unknown key"]),
    ],
)
def test_bad_node_pool_input_names_the_field(path: str, value: Any, expected: list[str]) -> None:
    message = error_for(with_change(path, value))
    for fragment in expected:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("raw", "section", "message"),
    [
        (
            {"vpc": {"private_subnet_cidrs": ["10.0.2.0/24", "10.0.3.0/24"]}},
            "vpc",
            "private_subnet_cidrs was replaced by node_subnet_cidrs",
        ),
        (
            {"cluster": {"system_node_group": {"disk_size_gib": 30}}},
            "cluster.system_node_group",
            "disk_size_gib was replaced by root_volume_gib",
        ),
    ],
)
def test_renamed_keys_name_their_replacement(
    raw: dict[str, Any], section: str, message: str
) -> None:
    error = error_for(raw)
    assert f"{section}: {message}" in error
