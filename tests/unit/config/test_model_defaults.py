"""Defaults with a source: the seed deployment (shared/reference/seed-karpenter-with-multus-on-eks),
Karpenter's chart and getting-started guide, and the AWS defaults the seed relied on."""

from __future__ import annotations

from config import parse_config


def test_node_pool_defaults_are_the_seeds_nodepool() -> None:
    # config/nodepool.yaml: requirements, disruption.consolidateAfter and limits.
    (pool,) = parse_config({}).node_pools
    # One pool, named like the seed's NodePool, with every Multus network.
    assert (pool.name, pool.networks) == ("multus", None)
    assert pool.instance_categories == ["m", "c", "r"]
    assert pool.instance_cpus == [2, 4, 8, 16]
    assert pool.instance_families == ["m5", "c5", "m6i", "c6i", "r6i"]
    assert pool.capacity_types == ["on-demand"]
    assert (pool.cpu_limit, pool.memory_limit) == ("500", "500Gi")
    assert pool.disruption.consolidate_after == "120s"
    assert pool.disruption.expire_after == "720h"  # Karpenter's own default
    assert pool.disruption.consolidation_policy == "WhenEmpty"
    assert pool.disruption.budgets == []
    # Karpenter's AL2023 default root volume (EC2NodeClass blockDeviceMappings): 20 GiB.
    assert pool.root_volume_gib == 20
    assert pool.ami_alias.startswith("al2023@v")


def test_multus_defaults_are_the_seeds_networks() -> None:
    multus = parse_config({}).multus
    assert [n.name for n in multus.networks] == ["multus1", "multus2"]
    # The seed's NADs: ipvlan mode l2, in the default namespace, default route via the NAT GW.
    assert {(n.ipvlan_mode, n.nat_egress, n.interface_name) for n in multus.networks} == {
        ("l2", True, None)
    }
    # The seed turns every Multus ENI's source/dest check off (modify-network-interface-attribute
    # --no-source-dest-check).
    assert {n.source_dest_check for n in multus.networks} == {False}
    assert multus.nad_namespace == "default"
    # The seed's one group: all traffic from the VPC CIDR, all egress; now each network's own.
    for network in multus.networks:
        assert network.security_group.ingress is None  # the VPC CIDR, as in the seed
        assert [(r.ip_protocol, r.cidr) for r in network.security_group.egress] == [
            ("-1", "0.0.0.0/0")
        ]


def test_cluster_defaults() -> None:
    cluster = parse_config({}).cluster
    # The seed's node group: c5.large; EKS managed node groups default to a 20 GiB disk.
    assert cluster.system_node_group.instance_types == ["c5.large"]
    assert cluster.system_node_group.root_volume_gib == 20
    # Secure by default: a private API endpoint only, nobody but the deployer is admin.
    assert cluster.public_access_cidrs is None
    assert cluster.admin_principal_arns == []


def test_karpenter_defaults_follow_its_chart_and_guide() -> None:
    karpenter = parse_config({}).karpenter
    # chart-values.yaml: replicas 2; the getting-started guide installs into kube-system.
    assert karpenter.replicas == 2
    assert karpenter.namespace == "kube-system"


def test_extras_and_vpc_options_are_off_or_the_seeds() -> None:
    config = parse_config({})
    assert (config.extras.sample_workloads, config.extras.node_latency) == (False, False)
    assert config.vpc.nat_gateways == "per_az"  # the seed: one NAT gateway per AZ
    assert config.account is None
    assert config.name == "karpenterwithmultus"


def test_teardown_defaults_are_the_documented_bounds() -> None:
    # docs/operations.md, `cdk destroy`: drains bounded by 15m, teardown fails after 30 minutes.
    config = parse_config({})
    assert config.node_pools[0].termination_grace_period == "15m"
    assert config.cluster.teardown_timeout_minutes == 30
