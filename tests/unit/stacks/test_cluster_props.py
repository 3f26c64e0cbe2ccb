"""The config -> props mapping of ClusterStack, checked on plain AppConfigs (no app synth)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2

from charts.karpenter_node_pool import DisruptionBudget
from config import AppConfig, ConfigError, parse_config
from config import model as config_model
from config.eks_addons import ADDON_VERSIONS, EksAddonVersions
from config.network_plan import network_plan
from config.node_bootstrap_plan import USER_DATA_LIMIT_BYTES
from node_bootstrap.node_prefix import CNI_CONFIG_DIR, cni_config_file_name
from node_bootstrap.renderer import deployed_size
from stacks import cluster_props
from stacks.network_stack import MultusAttachment

REPO = Path(__file__).resolve().parents[3]
# A CoreDNS build that is not 1.34's pinned one (EKS lists it for 1.35, config/eks_addons.py).
OVERRIDE = "v1.14.2-eksbuild.4"


def example_raw(name: str) -> dict[str, Any]:
    return dict(json.loads((REPO / "examples" / name).read_text()))


def example_config(name: str) -> AppConfig:
    return parse_config(example_raw(name))


def attachments_of(config: AppConfig) -> list[MultusAttachment]:
    """What NetworkStack hands over, with literal subnet IDs subnet-<network>-<az>, route
    table IDs rtb-<network>-<az> and the security group sg-<group>."""
    stack = cdk.Stack(cdk.App(), "Network")
    return [
        MultusAttachment(
            plan=row,
            subnet=ec2.Subnet.from_subnet_attributes(
                stack,
                f"{row.network}-{row.availability_zone}",
                subnet_id=f"subnet-{row.network}-{row.availability_zone}",
                route_table_id=f"rtb-{row.network}-{row.availability_zone}",
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
        node_pools=[],
    )


def test_node_pool_takes_every_value_from_the_config_in_karpenter_spelling() -> None:
    config = parse_config(
        {
            "node_pools": [
                {
                    "name": "multus",
                    "root_volume_gib": 50,
                    "instance_cpus": [4, 8],
                    "capacity_types": ["spot"],
                    "termination_grace_period": "10m",
                    "disruption": {
                        "expire_after": "Never",
                        "consolidation_policy": "WhenEmptyOrUnderutilized",
                        "consolidate_after": "5m",
                        "budgets": [
                            {"nodes": "0", "reasons": ["Drifted"]},
                            {"nodes": "10%", "schedule": "0 4 * * *", "duration": "2h"},
                        ],
                    },
                }
            ]
        }
    )
    (pool,) = config.node_pools
    props = cluster_props.node_pool_props(config, pool, node_role_name="role", user_data="data")
    # EC2NodeClass volumeSize is a Kubernetes quantity; NodePool requirement values are strings.
    assert props.root_volume_size == "50Gi"
    assert props.instance_cpus == ["4", "8"]
    assert props.capacity_types == ["spot"]
    assert props.consolidate_after == "5m"
    assert (props.expire_after, props.consolidation_policy) == ("Never", "WhenEmptyOrUnderutilized")
    assert props.budgets == [
        DisruptionBudget(nodes="0", reasons=["Drifted"]),
        DisruptionBudget(nodes="10%", schedule="0 4 * * *", duration="2h"),
    ]
    assert props.termination_grace_period == "10m"
    assert props.ami_alias == pool.ami_alias
    assert (props.node_pool_name, props.node_class_name, props.weight) == ("multus", "multus", 10)
    assert props.zones == ["us-west-2a", "us-west-2b"]
    assert (props.node_role_name, props.user_data) == ("role", "data")


def test_node_pool_selects_the_node_subnets_and_the_cluster_security_group() -> None:
    config = parse_config({"cluster": {"name": "edge"}})
    props = cluster_props.node_pool_props(
        config, config.node_pools[0], node_role_name="role", user_data="data"
    )
    # NetworkStack tags only the node subnets karpenter.sh/discovery=<cluster>; EKS tags the
    # cluster security group aws:eks:cluster-name=<cluster>.
    assert props.subnet_selector_terms == [{"tags": {"karpenter.sh/discovery": "edge"}}]
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


def test_the_cluster_gets_its_minors_addon_versions_with_the_configs_overrides() -> None:
    config = parse_config(
        {"cluster": {"kubernetes_version": "1.34", "addon_versions": {"coredns": OVERRIDE}}}
    )
    props = cluster_props.eks_cluster_props(config, vpc_id="vpc-1", node_subnets=[])
    row = ADDON_VERSIONS["1.34"]
    assert props.addon_versions == EksAddonVersions(
        vpc_cni=row["vpc-cni"],
        kube_proxy=row["kube-proxy"],
        coredns=OVERRIDE,
        pod_identity_agent=row["eks-pod-identity-agent"],
    )


def test_node_bootstrap_places_each_network_at_its_device_index_per_az() -> None:
    config = AppConfig()
    props = cluster_props.node_bootstrap_props(config, attachments_of(config), config.node_pools[0])
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
    (agents,) = props.pod_ips.pools
    assert agents.interfaces == {"signaling": ["10.0.4.32/27", "10.0.5.32/27"]}
    (nodes,) = props.clear_taints.pools
    assert nodes.wait_for_pod_ips
    # The node_prefix network's CNI config (device index 2) and plugins must exist on the node.
    assert f"{CNI_CONFIG_DIR}/{cni_config_file_name(2)}" in nodes.cni_files
    assert {"host-local", "ipvlan", "sbr"} <= set(nodes.cni_binaries)


def test_a_static_range_reaches_the_nads_the_agent_and_cleartaints() -> None:
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
    props = workloads(parse_config(raw))

    first, second = props.network_attachments.attachments
    assert (first.static_range, first.static_name) == ("10.0.4.48/28", "n3-us-west-2a-static")
    assert (second.static_range, second.static_name) == (None, None)
    (agents,) = props.pod_ips.pools
    assert agents.interfaces == {"n3": ["10.0.4.32/27", "10.0.5.32/27"]}
    assert agents.static_ranges == {"n3": ["10.0.4.48/28"]}
    (nodes,) = props.clear_taints.pools
    assert "static" in nodes.cni_binaries


def test_floating_addresses_reach_the_agent_of_their_networks_interface() -> None:
    subnets = [
        {
            "cidr": "10.0.4.0/24",
            "reservation": "10.0.4.32/27",
            "static_range": "10.0.4.48/28",
            "floating_addresses": ["10.0.4.60", "10.0.4.61"],
        },
        {
            "cidr": "10.0.5.0/24",
            "reservation": "10.0.5.32/27",
            "static_range": "10.0.5.48/28",
            "floating_addresses": ["10.0.5.60"],
        },
    ]
    raw: dict[str, Any] = {"multus": {"networks": [{"name": "n3", "subnets": subnets}]}}
    props = workloads(parse_config(raw))

    (agents,) = props.pod_ips.pools
    assert agents.floating_addresses == {"n3": ["10.0.4.60", "10.0.4.61", "10.0.5.60"]}
    assert workloads(parse_config({})).pod_ips.pools[0].floating_addresses == {}


def test_pod_routed_ranges_reach_the_nads_and_the_agent_with_every_azs_route_table() -> None:
    raw = example_raw("5g-core.json")
    (n6,) = [n for n in raw["multus"]["networks"] if n["name"] == "n6"]
    n6["pod_routed_ranges"] = ["10.45.0.0/16"]
    props = workloads(parse_config(raw))

    n6_nads = [a for a in props.network_attachments.attachments if a.master_interface == "n6"]
    assert n6_nads and all(list(a.pod_routed_ranges) == ["10.45.0.0/16"] for a in n6_nads)
    others = [a for a in props.network_attachments.attachments if a.master_interface != "n6"]
    assert all(not a.pod_routed_ranges for a in others)
    (upf,) = [p for p in props.pod_ips.pools if "n6" in p.interfaces]
    assert upf.routed_ranges == {"n6": ["10.45.0.0/16"]}
    # A data-network host in either AZ reaches the pool through its own subnet's table.
    assert upf.route_tables == {"n6": ["rtb-n6-us-west-2a", "rtb-n6-us-west-2b"]}
    assert all(not p.route_tables for p in props.pod_ips.pools if p is not upf)


def test_the_seed_has_no_static_range_anywhere() -> None:
    props = workloads(parse_config({}))
    assert all(nad.static_name is None for nad in props.network_attachments.attachments)
    (agents,) = props.pod_ips.pools
    assert agents.static_ranges == {}
    (nodes,) = props.clear_taints.pools
    assert "static" not in nodes.cni_binaries


def test_node_prefix_network_gets_its_prefixes_at_boot() -> None:
    config = example_config("node-prefix.json")
    networks = cluster_props.node_bootstrap_props(
        config, attachments_of(config), config.node_pools[0]
    ).node_prefix
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
    assert not props.clear_taints.pools[0].wait_for_pod_ips
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
    return deployed_size(
        cluster_props.node_bootstrap_props(config, attachments_of(config), config.node_pools[0])
    )


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
        "node_pools": [
            {
                "name": "multus",
                "instance_categories": ["m"],
                "instance_families": ["m5"],
                "instance_cpus": [64],
            }
        ],
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
    # that only holds if what it measures is exactly what node_bootstrap_props renders: the
    # measure shifted so that the rendered size lands on the limit passes, one byte more fails.
    size = deployed_user_data_size(parse_config(raw))
    shift = USER_DATA_LIMIT_BYTES - size
    parse_config(raw, user_data_size=lambda props: deployed_size(props) + shift)
    with pytest.raises(ConfigError, match=f"user-data would be {USER_DATA_LIMIT_BYTES + 1} bytes"):
        parse_config(raw, user_data_size=lambda props: deployed_size(props) + shift + 1)


def two_pools() -> AppConfig:
    """examples/5g-core.json: upf (n3 + n6, a taint), control (n2)."""
    return example_config("5g-core.json")


def pool_named(config: AppConfig, name: str) -> config_model.NodePoolConfig:
    (pool,) = [pool for pool in config.node_pools if pool.name == name]
    return pool


def test_each_pool_boots_only_its_networks_at_indexes_from_one() -> None:
    config = two_pools()
    upf = cluster_props.node_bootstrap_props(
        config, attachments_of(config), pool_named(config, "upf")
    )
    assert [(i.network, i.device_index) for i in upf.interfaces] == [("n3", 1), ("n6", 2)]
    assert upf.placements["us-west-2a"].subnet_ids == [
        "subnet-n3-us-west-2a",
        "subnet-n6-us-west-2a",
    ]
    control = cluster_props.node_bootstrap_props(
        config, attachments_of(config), pool_named(config, "control")
    )
    assert [(i.network, i.device_index) for i in control.interfaces] == [("n2", 1)]
    assert control.placements["us-west-2b"].subnet_ids == ["subnet-n2-us-west-2b"]


def test_each_pool_labels_its_nodes_with_its_networks_and_its_own_labels_and_taints() -> None:
    config = two_pools()
    upf = cluster_props.node_pool_props(
        config, pool_named(config, "upf"), node_role_name="role", user_data="upf"
    )
    assert (upf.node_pool_name, upf.node_class_name, upf.weight) == ("upf", "upf", 20)
    assert upf.labels == {
        "multus.network/n3": "true",
        "multus.network/n6": "true",
        "example.com/network-function": "upf",
    }
    assert [t.as_dict() for t in upf.taints] == [
        {"key": "example.com/upf", "value": "true", "effect": "NoSchedule"}
    ]
    assert upf.startup_taint is not None
    assert upf.instance_families == ["c5n", "c6in"]
    control = cluster_props.node_pool_props(
        config, pool_named(config, "control"), node_role_name="role", user_data="control"
    )
    assert set(control.labels) == {"multus.network/n2", "example.com/network-function"}
    assert control.taints == []


def test_a_pool_without_networks_gets_no_startup_taint_and_no_daemon_sets() -> None:
    raw = example_raw("5g-core.json")
    raw["node_pools"].append({"name": "plain", "networks": []})
    config = parse_config(raw)
    plain = pool_named(config, "plain")
    props = cluster_props.node_pool_props(config, plain, node_role_name="role", user_data=None)
    assert props.startup_taint is None
    assert not any(key.startswith("multus.network/") for key in props.labels)
    workload = workloads(config)
    assert [nodes.pool for nodes in workload.clear_taints.pools] == ["upf", "control"]
    assert [nodes.pool for nodes in workload.pod_ips.pools] == ["upf", "control"]


def test_cleartaints_and_the_pod_ip_agent_of_a_pool_know_only_its_networks() -> None:
    props = workloads(two_pools())
    upf, control = props.clear_taints.pools
    # Karpenter labels every node with the NodePool it belongs to (karpenter.sh/nodepool).
    assert upf.node_selector == {"karpenter-node": "true", "karpenter.sh/nodepool": "upf"}
    assert control.node_selector == {"karpenter-node": "true", "karpenter.sh/nodepool": "control"}
    assert (upf.daemon_set_name, control.daemon_set_name) == (
        "cleartaints-upf",
        "cleartaints-control",
    )
    upf_agent, control_agent = props.pod_ips.pools
    assert upf_agent.interfaces == {
        "n3": ["10.0.6.32/27", "10.0.7.32/27"],
        "n6": ["10.0.8.32/27", "10.0.9.32/27"],
    }
    assert control_agent.interfaces == {"n2": ["10.0.4.32/27", "10.0.5.32/27"]}
    assert control_agent.node_selector["karpenter.sh/nodepool"] == "control"


def test_the_default_pool_keeps_the_seeds_object_names() -> None:
    props = workloads(AppConfig())
    (nodes,) = props.clear_taints.pools
    (agents,) = props.pod_ips.pools
    assert (nodes.daemon_set_name, agents.daemon_set_name, agents.config_file) == (
        "cleartaints",
        "multus-pod-ips",
        "config.json",
    )


def test_reserved_enis_is_the_most_any_pool_attaches() -> None:
    # karpenter-provider-aws v1.14.1 pkg/providers/instancetype/types.go: pods() takes
    # options.ReservedENIs, one global setting, into ENILimitedPods for every NodePool.
    config = two_pools()
    props = cluster_props.karpenter_controller_props(config, cluster=None)  # type: ignore[arg-type]
    assert props.reserved_enis == 2  # upf's n3 + n6; control attaches 1
    raw = example_raw("5g-core.json")
    raw["node_pools"][0]["networks"] = ["n3"]
    assert parse_config(raw).reserved_enis == 1
    raw["node_pools"][1]["networks"] = []
    raw["node_pools"][0]["networks"] = []
    del raw["node_pools"][0]["node_profile"]  # a pool without networks carries none
    assert parse_config(raw).reserved_enis == 0


def test_one_ami_check_per_distinct_alias_naming_every_pool_that_pins_it() -> None:
    raw = example_raw("5g-core.json")
    raw["node_pools"].append({"name": "oam", "networks": [], "ami_alias": "al2023@v20261001"})
    checks = cluster_props.ami_release_check_props(parse_config(raw))
    assert [(c.ami_alias, c.config_field) for c in checks] == [
        (
            "al2023@v20261112",
            "node_pools[0] (upf).ami_alias, node_pools[1] (control).ami_alias",
        ),
        ("al2023@v20261001", "node_pools[2] (oam).ami_alias"),
    ]


def test_sample_workloads_follow_the_pools() -> None:
    raw = example_raw("5g-core.json")
    raw["extras"] = {"sample_workloads": True}
    props = workloads(parse_config(raw))
    assert [
        (w.pool, w.availability_zone, list(w.networks), list(w.network_attachment_names))
        for w in props.sample_workloads.workloads
    ] == [
        ("upf", "us-west-2a", ["n3", "n6"], ["n3-us-west-2a", "n6-us-west-2a"]),
        ("upf", "us-west-2b", ["n3", "n6"], ["n3-us-west-2b", "n6-us-west-2b"]),
        ("control", "us-west-2a", ["n2"], ["n2-us-west-2a"]),
        ("control", "us-west-2b", ["n2"], ["n2-us-west-2b"]),
    ]
    # The UPF pool's taint: its sample pods tolerate it, the control pool's have none to.
    assert [len(w.tolerations) for w in props.sample_workloads.workloads] == [1, 1, 0, 0]


def test_node_pools_select_an_existing_vpcs_node_subnets_by_id() -> None:
    """EC2NodeClass CRD (shared/reference/karpenter-v1.14.1/crds/
    karpenter.k8s.aws_ec2nodeclasses.yaml): a subnetSelectorTerms entry selects by `id`, so
    the network team's subnets need no tag of ours."""
    ids = ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]
    config = parse_config(
        {
            "vpc": {
                "existing": {
                    "vpc_id": "vpc-0123456789abcdef0",
                    "cidrs": ["10.0.0.0/16"],
                    "node_subnets": [
                        {"id": ids[0], "cidr": "10.0.2.0/24"},
                        {"id": ids[1], "cidr": "10.0.3.0/24"},
                    ],
                    "nat_gateway_ids": ["nat-0123456789abcdef1", "nat-0123456789abcdef2"],
                }
            }
        }
    )
    props = cluster_props.node_pool_props(
        config, config.node_pools[0], node_role_name="role", user_data="data"
    )
    assert props.subnet_selector_terms == [{"id": ids[0]}, {"id": ids[1]}]
