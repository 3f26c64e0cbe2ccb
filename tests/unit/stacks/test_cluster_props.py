"""The config -> props mapping of ClusterStack, checked on plain AppConfigs (no app synth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2

from config import AppConfig, ConfigError, parse_config
from config import model as config_model
from config.network_plan import network_plan
from node_bootstrap.node_prefix import CNI_CONFIG_DIR, cni_config_file_name
from node_bootstrap.renderer import deployed_size
from stacks import cluster_props
from stacks.network_stack import MultusAttachment

REPO = Path(__file__).resolve().parents[3]


def example_raw(name: str) -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / name).read_text()))


def example_config(name: str) -> AppConfig:
    return parse_config(example_raw(name))


def attachments_of(config: AppConfig) -> list[MultusAttachment]:
    """What NetworkStack hands over, with literal subnet IDs subnet-<network>-<az> and the
    security group sg-<group>."""
    stack = cdk.Stack(cdk.App(), "Network")
    return [
        MultusAttachment(
            plan=row,
            subnet=ec2.Subnet.from_subnet_attributes(
                stack,
                f"{row.network}-{row.availability_zone}",
                subnet_id=f"subnet-{row.network}-{row.availability_zone}",
            ),
            security_group=ec2.SecurityGroup.from_security_group_id(
                stack, f"{row.network}-{row.availability_zone}-sg", f"sg-{row.security_group}"
            ),
        )
        for row in network_plan(config)
    ]


def workloads(config: AppConfig) -> Any:
    return cluster_props.cluster_workloads_props(
        config,
        attachments_of(config),
        cluster=None,  # type: ignore[arg-type]  # passed through untouched
        karpenter_release=None,  # type: ignore[arg-type]
        node_pool=None,  # type: ignore[arg-type]
    )


def test_node_pool_takes_every_value_from_the_config_in_karpenter_spelling() -> None:
    config = parse_config(
        {
            "node_pool": {
                "root_volume_gib": 50,
                "instance_cpus": [4, 8],
                "capacity_types": ["spot"],
                "consolidate_after": "5m",
                "termination_grace_period": "10m",
            }
        }
    )
    props = cluster_props.node_pool_props(config, node_role_name="role", user_data="data")
    # EC2NodeClass volumeSize is a Kubernetes quantity; NodePool requirement values are strings.
    assert props.root_volume_size == "50Gi"
    assert props.instance_cpus == ["4", "8"]
    assert props.capacity_types == ["spot"]
    assert props.consolidate_after == "5m"
    assert props.termination_grace_period == "10m"
    assert props.ami_alias == config.node_pool.ami_alias
    assert props.zones == ["us-west-2a", "us-west-2b"]
    assert (props.node_role_name, props.user_data) == ("role", "data")


def test_node_pool_selects_the_node_subnets_and_the_cluster_security_group() -> None:
    props = cluster_props.node_pool_props(
        parse_config({"cluster": {"name": "edge"}}), node_role_name="role", user_data="data"
    )
    # NetworkStack tags only the node subnets karpenter.sh/discovery=<cluster>; EKS tags the
    # cluster security group aws:eks:cluster-name=<cluster>.
    assert props.subnet_selector_tags == {"karpenter.sh/discovery": "edge"}
    assert props.security_group_selector_tags == {"aws:eks:cluster-name": "edge"}


def test_karpenter_reserves_one_eni_per_multus_network() -> None:
    config = example_config("three-az-three-networks.json")
    props = cluster_props.karpenter_controller_props(config, cluster=None)  # type: ignore[arg-type]
    assert props.reserved_enis == 3
    assert props.controller_nodes == cluster_props.CONTROLLER_NODES


def test_teardown_forces_termination_before_its_own_timeout() -> None:
    config = parse_config({"cluster": {"teardown_timeout_minutes": 45}})
    props = cluster_props.karpenter_teardown_props(
        config,
        cluster=None,  # type: ignore[arg-type]
        node_subnets=[],
        api_clients=None,  # type: ignore[arg-type]
    )
    assert props.timeout_minutes == 45
    # Ten minutes for EC2 shutdown and Karpenter's finalizers after the forced drain.
    assert props.force_after_minutes == 35


def test_system_node_group_runs_the_controller_nodes_from_the_config() -> None:
    config = parse_config(
        {"cluster": {"system_node_group": {"root_volume_gib": 40, "max_size": 4}}}
    )
    props = cluster_props.system_node_group_props(config, cluster=None, node_subnets=[])  # type: ignore[arg-type]
    assert (props.root_volume_gib, props.max_size) == (40, 4)
    assert props.dedicated == cluster_props.CONTROLLER_NODES


def test_coredns_tolerates_the_controller_nodes() -> None:
    props = cluster_props.eks_cluster_props(AppConfig(), vpc_id="vpc-1", node_subnets=[])
    assert props.core_dns_tolerations == [cluster_props.CONTROLLER_NODES.toleration]
    assert props.cluster_name == "eks-karpenterwithmultus"


def test_node_bootstrap_places_each_network_at_its_device_index_per_az() -> None:
    config = AppConfig()
    props = cluster_props.node_bootstrap_props(config, attachments_of(config))
    assert [(i.network, i.interface_name, i.device_index) for i in props.interfaces] == [
        ("multus1", "multus1", 1),
        ("multus2", "multus2", 2),
    ]
    assert props.placements["us-west-2b"].subnet_ids == [
        "subnet-multus1-us-west-2b",
        "subnet-multus2-us-west-2b",
    ]
    assert [i.security_group_ids for i in props.interfaces] == [["sg-multus1"], ["sg-multus2"]]
    assert props.node_prefix == []


def test_whereabouts_networks_get_nads_and_pod_ips_node_prefix_networks_local_names() -> None:
    config = example_config("node-prefix.json")
    props = workloads(config)
    assert [nad.name for nad in props.network_attachments.attachments] == [
        "signaling-us-west-2a",
        "signaling-us-west-2b",
    ]
    (nad, _) = props.network_attachments.attachments
    assert (nad.whereabouts_range, nad.gateway) == ("10.0.4.32-10.0.4.63/24", "10.0.4.1")
    assert props.network_attachments.node_local_names == [
        "userplane-us-west-2a",
        "userplane-us-west-2b",
    ]
    assert props.pod_ips.interfaces == {"signaling": ["10.0.4.32/27", "10.0.5.32/27"]}
    assert props.clear_taints.wait_for_pod_ips
    # The node_prefix network's CNI config (device index 2) and plugins must exist on the node.
    assert f"{CNI_CONFIG_DIR}/{cni_config_file_name(2)}" in props.clear_taints.cni_files
    assert {"host-local", "ipvlan", "sbr"} <= set(props.clear_taints.cni_binaries)


def test_node_prefix_network_gets_its_prefixes_at_boot() -> None:
    config = example_config("node-prefix.json")
    networks = cluster_props.node_bootstrap_props(config, attachments_of(config)).node_prefix
    assert [(n.availability_zone, n.interface_name, n.device_index) for n in networks] == [
        ("us-west-2a", "userplane", 2),
        ("us-west-2b", "userplane", 2),
    ]
    assert networks[0].reservation_cidr == "10.0.10.0/23"
    assert networks[0].cni_network_name == "userplane-us-west-2a"


def test_only_node_prefix_networks_leave_no_pod_ip_agent() -> None:
    config = example_config("node-prefix.json")
    node_prefix_only = config.model_copy(
        update={
            "multus": config.multus.model_copy(
                update={"networks": [n for n in config.multus.networks if n.name == "userplane"]}
            )
        }
    )
    props = workloads(node_prefix_only)
    assert props.pod_ips is None
    assert not props.clear_taints.wait_for_pod_ips
    assert props.network_attachments.attachments == []


@pytest.mark.parametrize("enabled", [True, False])
def test_sample_workloads_only_when_asked_with_every_network_of_their_az(enabled: bool) -> None:
    props = workloads(parse_config({"extras": {"sample_workloads": enabled}}))
    if not enabled:
        assert props.sample_workloads is None
        return
    first = props.sample_workloads.workloads[0]
    assert first.availability_zone == "us-west-2a"
    assert first.network_attachment_names == ["multus1-us-west-2a", "multus2-us-west-2a"]


def deployed_user_data_size(config: AppConfig) -> int:
    """Bytes of the user-data the cluster stack renders for `config`, with the longest IDs."""
    return deployed_size(cluster_props.node_bootstrap_props(config, attachments_of(config)))


def ten_networks() -> dict[str, Any]:
    """Two-digit device indexes: ten networks need 11 interfaces, an m5.16xlarge has 15."""
    return {
        "multus": {
            "networks": [
                {
                    "name": f"net{n}",
                    "subnets": [
                        {
                            "cidr": f"10.0.{20 + 2 * n + i}.0/24",
                            "reservation": f"10.0.{20 + 2 * n + i}.32/27",
                        }
                        for i in range(2)
                    ],
                }
                for n in range(10)
            ]
        },
        "node_pool": {
            "instance_categories": ["m"],
            "instance_families": ["m5"],
            "instance_cpus": [64],
        },
    }


@pytest.mark.parametrize(
    "raw",
    [
        {},
        example_raw("three-az-three-networks.json"),
        example_raw("node-prefix.json"),
        ten_networks(),
    ],
    ids=["seed", "three-az-three-networks", "node-prefix", "ten-networks"],
)
def test_the_config_check_measures_the_user_data_the_nodes_get(
    raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The config refuses a layout whose user-data would not fit before any construct exists;
    # that only holds if it measures exactly what node_bootstrap_props renders.
    size = deployed_user_data_size(parse_config(raw))
    monkeypatch.setattr(config_model, "USER_DATA_LIMIT_BYTES", size)
    parse_config(raw)
    monkeypatch.setattr(config_model, "USER_DATA_LIMIT_BYTES", size - 1)
    with pytest.raises(ConfigError, match=f"the node user-data would be {size} bytes"):
        parse_config(raw)
