"""Every config rule on both sides of its boundary: the last valid value passes (a rule that
became too strict would refuse a working deployment), the first invalid one names its field.

Limits come from AWS and Kubernetes: subnets and VPCs are /16 to /28 and AWS keeps the first
four and the last address of each subnet (VPC user guide, subnet sizing); gp3 volumes hold
1-16,384 GiB (EC2 API, EbsBlockDevice); Kubernetes names are DNS labels of at most 63
characters; Linux interface names at most 15 (IFNAMSIZ - 1)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal, get_args

import pytest

from config import ConfigError, load_config, parse_config
from config.logs import LogRetention
from config.model import MultusSubnetConfig, VpcConfig
from config.network_plan import network_plan
from config.node_bootstrap_plan import node_bootstrap_props


def seed_raw() -> dict[str, Any]:
    return parse_config({}).model_dump(mode="json")


def changed(path: str, value: Any, raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The seed config (or `raw`) with the dotted `path` set to `value`."""
    result = copy.deepcopy(raw if raw is not None else seed_raw())
    node: Any = result
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(leaf) if leaf.isdigit() else leaf] = value
    return result


def error_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


def one_network(**fields: Any) -> dict[str, Any]:
    network: dict[str, Any] = {
        "name": "multus1",
        "subnets": [
            {"cidr": "10.0.4.0/24", "reservation": "10.0.4.32/27"},
            {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
        ],
    }
    return {**network, **fields}


def subnets(third_octet: int) -> list[dict[str, str]]:
    """A network's two subnets, one per seed AZ, from 10.0.<third_octet>.0/24 on."""
    return [
        {"cidr": f"10.0.{n}.0/24", "reservation": f"10.0.{n}.32/27"}
        for n in (third_octet, third_octet + 1)
    ]


def with_networks(*networks: dict[str, Any]) -> dict[str, Any]:
    return changed("multus.networks", list(networks))


SYSTEM = "cluster.system_node_group"


@pytest.mark.parametrize(
    ("sizes", "replicas"),
    [
        ({"min_size": 0, "desired_size": 2, "max_size": 3}, 2),  # may scale in to nothing
        ({"min_size": 1, "desired_size": 1, "max_size": 1}, 1),  # one node, one controller
        ({"min_size": 2, "desired_size": 2, "max_size": 2}, 2),  # min = desired = max
    ],
)
def test_smallest_system_node_groups_and_controller_counts_pass(
    sizes: dict[str, int], replicas: int
) -> None:
    raw = changed(SYSTEM, {**seed_raw()["cluster"]["system_node_group"], **sizes})
    raw["karpenter"]["replicas"] = replicas
    config = parse_config(raw)
    group = config.cluster.system_node_group
    assert (group.min_size, group.desired_size, group.max_size) == tuple(sizes.values())
    assert config.karpenter.replicas == replicas


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (f"{SYSTEM}.min_size", -1),
        (f"{SYSTEM}.desired_size", -1),
        (f"{SYSTEM}.max_size", 0),
        ("karpenter.replicas", 0),
    ],
)
def test_counts_below_their_minimum_are_refused(path: str, value: int) -> None:
    raw = changed(path, value)
    if path.endswith("size"):
        raw["cluster"]["system_node_group"]["min_size"] = min(value, 0)
        raw["cluster"]["system_node_group"]["desired_size"] = min(value, 0)
    message = error_for(raw)
    assert f"{path}: " in message, message
    assert "is below what this field takes: at least" in message, message


@pytest.mark.parametrize(
    ("path", "reported"),
    [
        (f"{SYSTEM}.root_volume_gib", f"{SYSTEM}.root_volume_gib"),
        ("node_pools.0.root_volume_gib", "node_pools[0].root_volume_gib"),
    ],
)
@pytest.mark.parametrize(
    ("gib", "accepted"), [(19, False), (20, True), (16384, True), (16385, False)]
)
def test_volume_sizes_from_20_gib_to_the_gp3_maximum(
    path: str, reported: str, gib: int, accepted: bool
) -> None:
    # 20 GiB: the EKS AL2023 AMI's root volume; 16,384 GiB: the largest gp3 volume.
    raw = changed(path, gib)
    if accepted:
        section, _, field = path.rpartition(".")
        node: Any = parse_config(raw)
        for part in section.split("."):
            node = node[int(part)] if part.isdigit() else getattr(node, part)
        assert getattr(node, field) == gib
    else:
        assert reported in error_for(raw)


@pytest.mark.parametrize(
    ("cidr", "accepted"),
    [("10.0.0.0/15", False), ("10.0.0.0/16", True), ("10.0.0.0/28", True), ("10.0.0.0/29", False)],
)
def test_vpc_prefix_from_16_to_28(cidr: str, accepted: bool) -> None:
    # The VPC section alone: whether its subnets fit is another rule.
    if accepted:
        assert VpcConfig(cidr=cidr).cidr == cidr
    else:
        with pytest.raises(ValueError, match="a VPC's prefix must be /16 to /28"):
            VpcConfig(cidr=cidr)


@pytest.mark.parametrize(
    ("cidr", "reservation", "accepted"),
    [
        ("10.0.0.0/16", "10.0.4.0/24", True),
        ("10.0.4.0/28", "10.0.4.4/31", True),
        ("10.0.0.0/15", "10.0.4.0/24", False),
        ("10.0.4.0/29", "10.0.4.4/31", False),
    ],
)
def test_subnet_prefix_from_16_to_28(cidr: str, reservation: str, accepted: bool) -> None:
    if accepted:
        assert MultusSubnetConfig(cidr=cidr, reservation=reservation).cidr == cidr
    else:
        with pytest.raises(ValueError, match="AWS subnets are /16 to /28"):
            MultusSubnetConfig(cidr=cidr, reservation=reservation)


@pytest.mark.parametrize(
    ("reservation", "accepted"),
    [
        ("10.0.4.2/31", False),  # .2-.3: AWS keeps .0-.3 (network, router, DNS, future)
        ("10.0.4.4/31", True),  # the first usable address
        ("10.0.4.252/31", True),  # .252-.253
        ("10.0.4.254/31", False),  # .255 is the broadcast address AWS keeps
        ("10.0.4.253/32", True),
        ("10.0.4.254/32", True),  # the last usable address
    ],
)
def test_reservation_within_the_addresses_aws_leaves_usable(
    reservation: str, accepted: bool
) -> None:
    raw = changed("multus.networks.0.subnets.0.reservation", reservation)
    if accepted:
        assert parse_config(raw).multus.networks[0].subnets[0].reservation == reservation
    else:
        assert "overlaps the addresses AWS keeps" in error_for(raw)


def test_one_network_with_its_own_interface_name_and_options_passes() -> None:
    network = one_network(
        interface_name="sig0", ipvlan_mode="l2", nat_egress=False, source_dest_check=True
    )
    config = parse_config(with_networks(network))
    (only,) = config.multus.networks
    assert (
        only.name,
        only.device_name,
        only.ipvlan_mode,
        only.nat_egress,
        only.source_dest_check,
    ) == ("multus1", "sig0", "l2", False, True)


def test_no_networks_is_refused() -> None:
    assert "multus.networks: " in error_for(with_networks())


def test_ipvlan_l2_passes() -> None:
    raw = changed("multus.networks.0.ipvlan_mode", "l2")
    assert parse_config(raw).multus.networks[0].ipvlan_mode == "l2"


@pytest.mark.parametrize("mode", ["l3", "l3s"])
def test_host_routed_ipvlan_modes_are_refused_naming_the_field_and_l2(mode: str) -> None:
    """Kernel Documentation/networking/ipvlan.rst, "4.2 L3 mode" (and 4.3 L3S, "very similar"):
    the pods' packets are switched to the master's stack and "routing from that instance will
    be used". The bootstrap leaves the master without address, route or rule (systemd-networkd
    Unmanaged=yes), so that routing would send them out by whatever the host routes there."""
    message = error_for(changed("multus.networks.1.ipvlan_mode", mode))
    assert "multus.networks[1].ipvlan_mode" in message
    assert f"{mode} is not supported" in message
    assert 'use "l2"' in message


@pytest.mark.parametrize("value", [True, False])
def test_source_dest_check_is_a_per_network_choice(value: bool) -> None:
    config = parse_config(changed("multus.networks.1.source_dest_check", value))
    assert [n.source_dest_check for n in config.multus.networks] == [False, value]
    props = node_bootstrap_props(
        config.cluster_name,
        network_plan(config),
        subnet_id=lambda _: "subnet",
        security_group_id=lambda _: "sg",
    )
    assert [i.source_dest_check for i in props.interfaces] == [False, value]


def test_a_network_name_of_40_characters_passes_with_an_interface_name() -> None:
    name = "signaling-" + "n" * 30
    config = parse_config(with_networks(one_network(name=name, interface_name="sig0")))
    assert config.multus.networks[0].name == name
    assert "multus.networks[0].name" in error_for(
        with_networks(one_network(name=name + "n", interface_name="sig0"))
    )


def test_a_network_name_doubles_as_interface_name_up_to_15_characters() -> None:
    fifteen = "userplane123456"
    config = parse_config(with_networks(one_network(name=fifteen)))
    assert config.multus.networks[0].device_name == fifteen
    message = error_for(with_networks(one_network(name=fifteen + "7")))
    assert "cannot double as a Linux interface name" in message
    assert "set interface_name" in message


def test_two_networks_may_not_share_an_interface_name() -> None:
    second = one_network(name="multus2", interface_name="multus1")
    second["subnets"] = [
        {"cidr": "10.0.6.0/24", "reservation": "10.0.6.32/27"},
        {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
    ]
    message = error_for(with_networks(one_network(), second))
    assert "multus.networks[1].interface_name: 'multus1' is also the interface name of " in message
    assert "networks[0] (multus1)" in message


def test_an_availability_zone_given_twice_is_refused() -> None:
    raw = changed("availability_zones", ["us-west-2a", "us-west-2a"])
    assert "availability_zones: each AZ may appear only once" in error_for(raw)


def test_three_zones_with_a_subnet_each_pass() -> None:
    assert len(parse_config(three_zones()).all_subnet_cidrs()) == 12


def three_zones() -> dict[str, Any]:
    raw = changed("availability_zones", ["us-west-2a", "us-west-2b", "us-west-2c"])
    raw["vpc"]["public_subnet_cidrs"].append("10.0.10.0/24")
    raw["vpc"]["node_subnet_cidrs"].append("10.0.11.0/24")
    for index, network in enumerate(raw["multus"]["networks"]):
        network["subnets"].append(
            {"cidr": f"10.0.{12 + index}.0/24", "reservation": f"10.0.{12 + index}.32/27"}
        )
    return raw


CONTROL_PLANE = "cluster.control_plane_availability_zones"


def test_the_control_plane_defaults_to_every_availability_zone() -> None:
    assert parse_config(three_zones()).control_plane_zones == [
        "us-west-2a",
        "us-west-2b",
        "us-west-2c",
    ]


def test_the_control_plane_may_stay_in_two_of_three_zones_but_not_in_one() -> None:
    """EKS user guide, "View Amazon EKS networking requirements for VPC and subnets": a cluster
    needs subnets in at least two AZs, and later subnets only in the AZs it was created with."""
    two = changed(CONTROL_PLANE, ["us-west-2b", "us-west-2a"], three_zones())
    # in availability_zones order, whatever order the list gives
    assert parse_config(two).control_plane_zones == ["us-west-2a", "us-west-2b"]
    message = error_for(changed(CONTROL_PLANE, ["us-west-2a"], three_zones()))
    assert f"{CONTROL_PLANE}: EKS needs control-plane subnets in at least two AZs" in message


def test_the_control_plane_zones_must_be_zones_of_the_config_and_distinct() -> None:
    outside = changed(CONTROL_PLANE, ["us-west-2a", "us-west-2d"], three_zones())
    assert f"{CONTROL_PLANE}: ['us-west-2d'] not in availability_zones" in error_for(outside)
    twice = changed(CONTROL_PLANE, ["us-west-2a", "us-west-2a"], three_zones())
    assert f"{CONTROL_PLANE}: each AZ may appear only once" in error_for(twice)


@pytest.mark.parametrize(
    ("path", "length"), [("multus.nad_namespace", 63), ("karpenter.namespace", 63)]
)
def test_namespaces_may_be_a_full_dns_label(path: str, length: int) -> None:
    name = "n" * length
    raw = changed(path, name)
    section, _, field = path.partition(".")
    assert getattr(getattr(parse_config(raw), section), field) == name
    assert path in error_for(changed(path, name + "n"))


@pytest.mark.parametrize(
    "path",
    [
        f"{SYSTEM}.instance_types",
        "node_pools.0.instance_categories",
        "node_pools.0.instance_cpus",
        "node_pools.0.instance_families",
        "node_pools.0.capacity_types",
    ],
)
def test_empty_lists_of_instance_choices_are_refused(path: str) -> None:
    message = error_for(changed(path, []))
    assert f"{path.replace('.0.', '[0].')}: " in message, message


def test_one_choice_of_each_instance_kind_passes() -> None:
    raw = changed("node_pools.0.instance_categories", ["c"])
    raw["node_pools"][0]["instance_families"] = ["c6i"]
    raw["node_pools"][0]["instance_cpus"] = [16]
    raw["node_pools"][0]["capacity_types"] = ["spot"]
    raw["cluster"]["system_node_group"]["instance_types"] = ["m5.large"]
    config = parse_config(raw)
    assert config.node_pools[0].allowed_sizes() == [("c6i", 16, 8)]  # c6i.4xlarge: 8 interfaces
    assert config.cluster.system_node_group.instance_types == ["m5.large"]


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.35", "1.36"])
def test_every_supported_kubernetes_version_passes(version: str) -> None:
    # EKS standard support at the time of writing; Karpenter 1.14.1 supports all four.
    raw = changed("cluster.kubernetes_version", version)
    assert parse_config(raw).cluster.kubernetes_version == version


@pytest.mark.parametrize(
    ("version", "accepted"), [("v1.23.0-eksbuild.1", True), ("v1.22.4-eksbuild.3", False)]
)
def test_a_vpc_cni_override_from_v1_23_0(version: str, accepted: bool) -> None:
    # v1.23.0 is the first that counts the Multus (no_manage) ENIs right (config/eks_addons.py);
    # the override replaces only vpc-cni's pinned version.
    raw = changed("cluster.addon_versions", {"vpc-cni": version})
    if not accepted:
        assert "cluster.addon_versions: vpc-cni v1.22.4-eksbuild.3 is older than" in error_for(raw)
        return
    pinned = parse_config(raw).cluster.pinned_addon_versions
    assert pinned.vpc_cni == version
    assert pinned.kube_proxy == parse_config({}).cluster.pinned_addon_versions.kube_proxy


@pytest.mark.parametrize("field", ["vpc.flow_log_retention", "cluster.control_plane_log_retention"])
@pytest.mark.parametrize("retention", get_args(LogRetention))
def test_every_log_retention_passes(field: str, retention: str) -> None:
    section, key = field.split(".")
    assert getattr(getattr(parse_config(changed(field, retention)), section), key) == retention


def test_audit_and_flow_logs_are_kept_a_year_by_default() -> None:
    """AWS Control Tower CT.CLOUDWATCH.PR.2 ("Require an Amazon CloudWatch log group to be
    retained for at least one year"; @cdklabs/cdk-validator-cfnguard 0.0.62,
    rules/control-tower/cfn-guard/cloudwatch/ct-cloudwatch-pr-2.guard: RetentionInDays >= 365)."""
    config = parse_config({})
    assert (config.vpc.flow_log_retention, config.cluster.control_plane_log_retention) == (
        "ONE_YEAR",
        "ONE_YEAR",
    )


def test_the_flow_log_retentions_are_one_week_to_two_years() -> None:
    # Names of CloudWatch Logs retention periods (aws_logs.RetentionDays) from a week to two years.
    assert get_args(LogRetention) == (
        "ONE_WEEK",
        "TWO_WEEKS",
        "ONE_MONTH",
        "THREE_MONTHS",
        "SIX_MONTHS",
        "ONE_YEAR",
        "TWO_YEARS",
    )


@pytest.mark.parametrize("mode", ["per_az", "single"])
def test_both_nat_gateway_layouts_pass(mode: str) -> None:
    assert parse_config(changed("vpc.nat_gateways", mode)).vpc.nat_gateways == mode


def test_admin_principal_arns_of_roles_and_users_pass() -> None:
    arns = [
        "arn:aws:iam::123456789012:role/Admin",
        "arn:aws-cn:iam::123456789012:user/ops",
    ]
    assert parse_config(
        changed("cluster.admin_principal_arns", arns)
    ).cluster.admin_principal_arns == (arns)
    assert "cluster.admin_principal_arns[0]" in error_for(
        changed("cluster.admin_principal_arns", ["arn:aws:iam::1234:role/Admin"])
    )


@pytest.mark.parametrize(("length", "accepted"), [(100, True), (101, False)])
def test_cluster_names_up_to_100_characters(length: int, accepted: bool) -> None:
    # EKS CreateCluster: 1-100 characters, starting with a letter.
    name = "e" + "k" * (length - 1)
    raw = changed("cluster.name", name)
    if accepted:
        assert parse_config(raw).cluster.name == name
    else:
        assert "cluster.name" in error_for(raw)


def test_a_single_ingress_source_passes() -> None:
    rule = {"protocol": "all", "cidr": "192.168.0.0/16"}
    raw = changed("multus.networks.0.security_group", {"ingress": [rule]})
    (parsed,) = parse_config(raw).multus.networks[0].security_group.ingress or []
    assert (parsed.ip_protocol, parsed.cidr) == ("-1", "192.168.0.0/16")


@pytest.mark.parametrize(
    ("cidr", "name"),
    [
        ("0.0.0.0/16", "'this network'"),
        ("127.0.0.0/16", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("224.0.0.0/16", "multicast"),
        ("240.0.0.0/16", "reserved"),
        ("255.255.0.0/16", "reserved"),
    ],
)
def test_special_purpose_ranges_are_refused_by_name(cidr: str, name: str) -> None:
    with pytest.raises(ValueError, match=f"overlaps .* \\({name}"):
        VpcConfig(cidr=cidr)


@pytest.mark.parametrize(
    "cidr", ["1.0.0.0/16", "126.255.0.0/16", "128.0.0.0/16", "169.253.0.0/16", "223.255.0.0/16"]
)
def test_ranges_next_to_the_special_purpose_ones_pass(cidr: str) -> None:
    # AWS accepts publicly routable ranges for a VPC; only the special-purpose blocks are out.
    assert VpcConfig(cidr=cidr).cidr == cidr


@pytest.mark.parametrize(
    ("cpus", "family"),
    # m/c/r sizes: 8xlarge (32), c5.9xlarge (36), 12xlarge (48), 16xlarge (64), c5.18xlarge (72),
    # 24xlarge (96); large to 4xlarge are the defaults.
    [(32, "m5"), (36, "c5"), (48, "m5"), (64, "m6i"), (72, "c5"), (96, "r6i")],
)
def test_every_listed_size_of_a_family_that_has_it_passes(cpus: int, family: str) -> None:
    raw = changed("node_pools.0.instance_cpus", [cpus])
    raw["node_pools"][0]["instance_families"] = [family]
    assert parse_config(raw).node_pools[0].allowed_sizes()[0][:2] == (family, cpus)


def test_a_private_subnet_missing_for_an_az_is_named() -> None:
    raw = changed("vpc.node_subnet_cidrs", ["10.0.2.0/24"])
    assert "vpc.node_subnet_cidrs: 1 subnet(s) for 2 availability zones" in error_for(raw)


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "default"])
def test_the_namespaces_kubernetes_has_may_hold_the_nads(namespace: str) -> None:
    config = parse_config(changed("multus.nad_namespace", namespace))
    assert (config.multus.nad_namespace, config.multus.creates_nad_namespace) == (namespace, False)


def test_a_validated_config_cannot_be_changed() -> None:
    config = parse_config({})
    with pytest.raises(ValueError, match="frozen"):
        config.vpc.cidr = "10.1.0.0/16"  # type: ignore[misc]


# CloudFormation waits at most 3600 s for a custom resource (template reference,
# AWS::CloudFormation::CustomResource, ServiceTimeout). Of that hour the teardown's Provider
# needs 8.5 minutes (config/custom_resource_timing.py: 60 s framework overhead, 300 s
# activation wait in aws-cdk-lib's outbound.ts, a 30 s poll interval and a 120 s isComplete
# run): 51 whole minutes are left, and a drain must end 10 minutes before that bound.
LONGEST_TEARDOWN = 51


@pytest.mark.parametrize(
    ("minutes", "grace"), [(10, "0s"), (LONGEST_TEARDOWN, "15m"), (LONGEST_TEARDOWN, "41m")]
)
def test_teardown_bounds_at_their_edges_pass(minutes: int, grace: str) -> None:
    # 10 minutes is the floor; the drain bound plus 10 minutes of shutdown may equal the
    # teardown bound.
    raw = changed("cluster.teardown_timeout_minutes", minutes)
    raw["node_pools"][0]["termination_grace_period"] = grace
    config = parse_config(raw)
    assert (
        config.cluster.teardown_timeout_minutes,
        config.node_pools[0].termination_grace_period,
    ) == (
        minutes,
        grace,
    )


def test_a_teardown_bound_past_cloudformations_hour_is_refused_naming_both_fields() -> None:
    raw = changed("cluster.teardown_timeout_minutes", LONGEST_TEARDOWN + 1)
    raw["node_pools"][0]["termination_grace_period"] = "0s"
    message = error_for(raw)
    assert f"cluster.teardown_timeout_minutes: {LONGEST_TEARDOWN + 1} minutes" in message
    assert f"use at most {LONGEST_TEARDOWN}" in message
    assert f"node_pools[].termination_grace_period at most {LONGEST_TEARDOWN - 10}m" in message


def test_a_teardown_bound_under_ten_minutes_is_refused() -> None:
    raw = changed("cluster.teardown_timeout_minutes", 9)
    raw["node_pools"][0]["termination_grace_period"] = "0s"
    assert "cluster.teardown_timeout_minutes: " in error_for(raw)


@pytest.mark.parametrize(("grace", "accepted"), [("41m", True), ("41m1s", False), ("42m", False)])
def test_teardown_leaves_ten_minutes_after_the_longest_drain(grace: str, accepted: bool) -> None:
    # docs/operations.md: instances are force-terminated once teardown_timeout_minutes - 10
    # minutes have passed, so the drain bound may take all but the last 10 of the longest bound.
    raw = changed("cluster.teardown_timeout_minutes", LONGEST_TEARDOWN)
    raw["node_pools"][0]["termination_grace_period"] = grace
    if accepted:
        assert parse_config(raw).node_pools[0].termination_grace_period == grace
    else:
        message = error_for(raw)
        assert (
            f"node_pools[0] (multus).termination_grace_period {grace} plus 10 minutes" in message
        ), message
        assert f"at most {LONGEST_TEARDOWN}, the longest CloudFormation waits for" in message


def test_a_karpenter_version_with_a_leading_v_gets_the_release_number_hint() -> None:
    # Karpenter's Helm chart versions have no leading v (1.14.1), its git tags do (v1.14.1):
    # the error says which one to write, not only that the release is unknown.
    message = error_for(changed("karpenter.version", "v1.14.1"))
    assert "karpenter.version: 'v1.14.1' is not a release number" in message, message
    assert "without a leading v" in message, message


def with_static_range(static_range: str, reservation: str = "10.0.4.32/27") -> dict[str, Any]:
    raw = changed("multus.networks.0.subnets.0.reservation", reservation)
    return changed("multus.networks.0.subnets.0.static_range", static_range, raw)


@pytest.mark.parametrize(
    ("static_range", "accepted"),
    [
        ("10.0.4.48/28", True),  # the upper half: the lower half stays dynamic
        ("10.0.4.32/28", True),  # the lower half
        ("10.0.4.63/32", True),  # one address, the last of the reservation
        ("10.0.4.32/32", True),  # one address, the first
        ("10.0.4.32/27", False),  # the whole reservation: nothing left for Whereabouts
        ("10.0.4.31/32", False),  # just below the reservation
        ("10.0.4.64/32", False),  # just above it
        ("10.0.4.0/26", False),  # the reservation and addresses around it
    ],
)
def test_a_static_range_lies_inside_its_reservation_and_leaves_dynamic_addresses(
    static_range: str, accepted: bool
) -> None:
    raw = with_static_range(static_range)
    if accepted:
        subnet = parse_config(raw).multus.networks[0].subnets[0]
        assert subnet.static_range == static_range
    else:
        assert "multus.networks[0].subnets[0].static_range" in error_for(raw)


def test_a_one_address_reservation_has_no_room_for_a_static_range() -> None:
    message = error_for(with_static_range("10.0.4.40/32", reservation="10.0.4.40/32"))

    assert "the whole reservation" in message
    assert "enlarge the reservation" in message


def test_a_static_range_is_optional_per_subnet_and_absent_by_default() -> None:
    seed = parse_config({})
    assert [s.static_range for n in seed.multus.networks for s in n.subnets] == [None] * 4
    assert all(row.static_nad_name is None for row in network_plan(seed))


def with_rules(**security_group: Any) -> dict[str, Any]:
    """The seed with the first Multus network's security_group set."""
    return changed("multus.networks.0.security_group", security_group)


@pytest.mark.parametrize(
    "rule",
    [
        # a network naming itself: its ENIs reach each other
        {"protocol": "udp", "ports": 2152, "network": "multus1"},
        {"protocol": "all", "network": "multus2"},
        {"protocol": "sctp", "cidr": "10.100.0.0/16"},
        {"protocol": 132, "cidr": "10.100.0.0/16", "description": "N2 (SCTP) from the RAN"},
        {"protocol": "tcp", "ports": 1, "cidr": "10.0.0.0/16"},
        {"protocol": "tcp", "ports": "1-65535", "cidr": "10.0.0.0/16"},
        {"protocol": 17, "ports": "65535", "cidr": "10.0.0.0/16"},
        {"protocol": "icmp", "cidr": "10.0.0.0/16"},
    ],
)
def test_rules_ec2_takes_pass_in_both_directions(rule: dict[str, Any]) -> None:
    for direction in ("ingress", "egress"):
        group = parse_config(with_rules(**{direction: [rule]})).multus.networks[0].security_group
        assert [r.model_dump(exclude_none=True) for r in getattr(group, direction)] == [rule]


def test_empty_rule_lists_pass_groups_are_stateful() -> None:
    # Replies to what an ENI sent (or was sent) pass whatever the rules: an empty list is a
    # network that only answers, or only sends (EC2 user guide, security group connection
    # tracking).
    group = parse_config(with_rules(ingress=[], egress=[])).multus.networks[0].security_group
    assert (group.ingress, group.egress) == ([], [])


def test_unset_ingress_is_all_traffic_from_the_vpc_cidr() -> None:
    config = parse_config(changed("vpc.cidr", "10.0.0.0/16"))
    (rule,) = config.multus_ingress_rules(config.multus.networks[1])
    assert (rule.ip_protocol, rule.port_range, rule.cidr) == ("-1", None, "10.0.0.0/16")


@pytest.mark.parametrize(
    ("ports", "accepted"), [(65535, True), (65536, False), (1, True), (0, False)]
)
def test_rule_ports_are_16_bit_and_not_0(ports: int, accepted: bool) -> None:
    raw = with_rules(ingress=[{"protocol": "udp", "ports": ports, "cidr": "10.0.0.0/16"}])
    if accepted:
        parse_config(raw)
    else:
        assert "multus.networks[0].security_group.ingress[0].ports" in error_for(raw)


@pytest.mark.parametrize(
    ("rule", "everything"),
    [
        ({"protocol": "all", "cidr": "0.0.0.0/0"}, True),
        ({"protocol": -1, "cidr": "0.0.0.0/0"}, True),
        ({"protocol": "tcp", "cidr": "0.0.0.0/0"}, False),
        ({"protocol": "all", "cidr": "10.0.0.0/8"}, False),
        ({"protocol": "all", "network": "multus1"}, False),
    ],
)
def test_only_all_traffic_to_anywhere_allows_everything(
    rule: dict[str, Any], everything: bool
) -> None:
    # aws-cdk renders that one rule as allowAllOutbound (docs/network.md, Security groups).
    group = parse_config(with_rules(egress=[rule])).multus.networks[0].security_group
    assert group.egress[0].allows_everything_anywhere is everything


@pytest.mark.parametrize(
    ("rule", "direction", "description"),
    [
        ({"protocol": "all", "cidr": "10.0.0.0/16"}, "from", "from 10.0.0.0/16"),
        ({"protocol": "udp", "network": "multus2"}, "to", "to multus2 ENIs"),
        ({"protocol": "sctp", "cidr": "10.100.0.0/16", "description": "N2"}, "from", "N2"),
    ],
)
def test_a_rules_description_names_its_peer_unless_given(
    rule: dict[str, Any], direction: Literal["from", "to"], description: str
) -> None:
    group = parse_config(with_rules(ingress=[rule])).multus.networks[0].security_group
    assert (group.ingress or [])[0].rule_description(direction) == description


def test_an_unknown_network_as_destination_names_the_egress_rule() -> None:
    message = error_for(with_rules(egress=[{"protocol": "all", "network": "n6"}]))
    assert "multus.networks[0] (multus1).security_group.egress[0].network" in message
    assert "'n6' is not a Multus network" in message


# --- an existing VPC (vpc.existing) --------------------------------------------------------------


def in_existing_vpc(networks: list[dict[str, Any]] | None = None, **changes: Any) -> dict[str, Any]:
    """The seed's networks (or `networks`) in an existing VPC 10.0.0.0/16 with the seed's node
    subnets and a NAT gateway per AZ; `changes` replace keys of vpc.existing."""
    existing = {
        "vpc_id": "vpc-0123456789abcdef0",
        "cidrs": ["10.0.0.0/16"],
        "node_subnets": [
            {"id": "subnet-0123456789abcdef1", "cidr": "10.0.2.0/24"},
            {"id": "subnet-0123456789abcdef2", "cidr": "10.0.3.0/24"},
        ],
        "nat_gateway_ids": ["nat-0123456789abcdef1", "nat-0123456789abcdef2"],
        **changes,
    }
    raw: dict[str, Any] = {"vpc": {"existing": existing}}
    if networks is not None:
        raw["multus"] = {"networks": networks}
    return raw


@pytest.mark.parametrize(
    ("vpc_id", "valid"),
    [
        ("vpc-01234567", True),  # 8: the short IDs of resources from before 2016-2018
        ("vpc-0123456", False),
        ("vpc-0123456789abcdef0", True),  # 17: today's IDs
        ("vpc-0123456789abcdef01", False),
        ("vpc-0123456789abcdefg", False),
    ],
)
def test_existing_vpc_ids_have_8_or_17_hex_digits(vpc_id: str, valid: bool) -> None:
    """EC2 user guide, "Resource IDs": the type's prefix and 8 or 17 hexadecimal characters."""
    raw = in_existing_vpc(vpc_id=vpc_id)
    if valid:
        assert parse_config(raw).vpc.existing is not None
    else:
        assert "vpc.existing.vpc_id" in error_for(raw)


def test_an_existing_vpc_needs_neither_public_subnets_nor_nat_gateways() -> None:
    isolated = [one_network(nat_egress=False)]
    config = parse_config(in_existing_vpc(isolated, nat_gateway_ids=[], public_subnets=[]))
    assert config.has_nat_gateway is False
    assert "nat_egress false" in error_for(in_existing_vpc(nat_gateway_ids=[]))


def test_a_nat_gateway_id_may_serve_every_zone() -> None:
    shared = ["nat-0123456789abcdef1", "nat-0123456789abcdef1"]
    assert parse_config(in_existing_vpc(nat_gateway_ids=shared)).has_nat_gateway is True


def test_the_vpc_cidrs_are_the_existing_blocks_or_the_one_created() -> None:
    assert parse_config({}).vpc_cidrs == ["10.0.0.0/16"]
    blocks = ["10.0.0.0/16", "100.64.0.0/16"]
    assert parse_config(in_existing_vpc(cidrs=blocks)).vpc_cidrs == blocks


def test_a_multus_subnet_may_lie_in_a_secondary_block_and_defaults_admit_every_block() -> None:
    secondary = one_network(
        subnets=[
            {"cidr": "100.64.0.0/24", "reservation": "100.64.0.32/27"},
            {"cidr": "100.64.1.0/24", "reservation": "100.64.1.32/27"},
        ]
    )
    blocks = ["10.0.0.0/16", "100.64.0.0/16"]
    config = parse_config(in_existing_vpc([secondary], cidrs=blocks))
    rules = config.multus_ingress_rules(config.multus.networks[0])
    assert [rule.cidr for rule in rules] == blocks
    # Just outside the secondary block.
    outside = one_network(
        subnets=[
            {"cidr": "100.64.0.0/24", "reservation": "100.64.0.32/27"},
            {"cidr": "100.65.0.0/24", "reservation": "100.65.0.32/27"},
        ]
    )
    assert "outside the VPC CIDR" in error_for(in_existing_vpc([outside], cidrs=blocks))


def test_a_node_subnet_may_touch_a_multus_subnet_but_not_overlap_it() -> None:
    first = {"id": "subnet-0123456789abcdef1", "cidr": "10.0.2.0/24"}
    # 10.0.3.0/24 ends where multus1's 10.0.4.0/24 begins; 10.0.4.0/28 is its first block.
    touching = [first, {"id": "subnet-0123456789abcdef2", "cidr": "10.0.3.0/24"}]
    assert parse_config(in_existing_vpc(node_subnets=touching)).vpc.existing is not None
    overlapping = [first, {"id": "subnet-0123456789abcdef2", "cidr": "10.0.4.0/28"}]
    message = error_for(in_existing_vpc(node_subnets=overlapping))
    assert (
        "multus.networks[0].subnets[0].cidr: 10.0.4.0/24 overlaps vpc.existing.node_subnets[1]"
        in message
    )


@pytest.mark.parametrize("field", VpcConfig.NEW_VPC_FIELDS)
def test_each_new_vpc_field_is_refused_next_to_an_existing_vpc_only_when_set(field: str) -> None:
    seed = seed_raw()["vpc"][field]
    assert parse_config(in_existing_vpc()).vpc.existing is not None  # unset: fine
    raw = in_existing_vpc()
    raw["vpc"][field] = seed  # set, even to its default
    assert f"vpc.{field}: describes a VPC the app creates" in error_for(raw)


def with_route(**route: Any) -> dict[str, Any]:
    """The seed with the first Multus network routing `route`."""
    return changed("multus.networks.0.routes", [route])


@pytest.mark.parametrize("key", ["transit_gateway_id", "vpn_gateway_id", "network_interface_id"])
@pytest.mark.parametrize(
    ("digits", "accepted"),
    [(7, False), (8, True), (9, False), (16, False), (17, True), (18, False)],
)
def test_route_target_ids_have_8_or_17_hex_digits(key: str, digits: int, accepted: bool) -> None:
    """EC2 user guide, "Resource IDs": a resource type's prefix and 8 (older resources) or 17
    hexadecimal characters."""
    prefix = {"transit_gateway_id": "tgw", "vpn_gateway_id": "vgw", "network_interface_id": "eni"}
    target_id = f"{prefix[key]}-{'0123456789abcdef0f'[:digits]}"
    raw = with_route(destination="10.200.0.0/16", **{key: target_id})
    if accepted:
        (route,) = parse_config(raw).multus.networks[0].routes
        assert route.target_id == target_id
    else:
        assert f"multus.networks[0].routes[0].{key}: " in error_for(raw)


@pytest.mark.parametrize(
    ("destination", "accepted"),
    [
        ("9.255.255.255/32", True),  # the last address before the VPC's 10.0.0.0/16
        ("10.0.0.0/32", False),
        ("10.0.255.255/32", False),
        ("10.1.0.0/32", True),  # the first after it
        ("10.0.0.0/16", False),  # the VPC's own block: its local route's
        ("10.0.0.0/15", True),  # around it: a summary route, the local route wins inside
        ("0.0.0.0/1", True),  # half the address space around the VPC, without IMDS
        ("128.0.0.0/1", False),  # the other half holds 169.254.169.254 (issue #49)
        ("169.254.169.253/32", True),  # the address before IMDS
        ("169.254.169.254/32", False),
        ("169.254.169.255/32", True),
        ("169.254.168.0/24", True),
        ("169.254.169.0/24", False),
        ("0.0.0.0/0", False),
    ],
)
def test_a_route_leads_beyond_the_vpc_and_is_not_the_default_route(
    destination: str, accepted: bool
) -> None:
    raw = with_route(destination=destination, nat_gateway=True)
    if accepted:
        assert parse_config(raw).multus.networks[0].routes[0].destination == destination
    else:
        assert ".routes[0].destination: " in error_for(raw)


@pytest.mark.parametrize(
    ("destination", "accepted"),
    [
        ("fd00:ec2::/32", False),  # the IPv6 IMDS address fd00:ec2::254 is inside
        ("fd00:ec2::254/128", False),
        ("fd00:ec2::255/128", True),
        ("fd00:ec3::/32", True),
        ("fc00::/8", True),  # the other half of the unique-local fc00::/7
        ("8000::/1", False),
        ("::/1", True),
    ],
)
def test_an_ipv6_route_leaves_the_instance_metadata_service_out(
    destination: str, accepted: bool
) -> None:
    raw = with_route(destination=destination, transit_gateway_id="tgw-0123456789abcdef0")
    raw["vpc"]["ipv6"] = True
    raw["multus"]["networks"][0]["ipv6"] = {}
    if accepted:
        assert parse_config(raw).multus.networks[0].routes[0].destination == destination
    else:
        assert f".routes[0].destination: {destination} covers fd00:ec2::254" in error_for(raw)


@pytest.mark.parametrize(
    ("pod_routed_range", "accepted"),
    [
        ("169.254.168.0/24", True),
        ("169.254.169.0/24", False),
        ("169.254.169.254/32", False),
        ("169.254.169.255/32", True),
        ("128.0.0.0/2", False),
        ("192.0.0.0/2", True),
    ],
)
def test_a_pod_routed_range_leaves_the_instance_metadata_service_out(
    pod_routed_range: str, accepted: bool
) -> None:
    raw = changed("multus.networks.0.pod_routed_ranges", [pod_routed_range])
    if accepted:
        assert parse_config(raw).multus.networks[0].pod_routed_ranges == [pod_routed_range]
    else:
        assert (
            f"multus.networks[0].pod_routed_ranges[0]: {pod_routed_range} covers 169.254.169.254"
            in error_for(raw)
        )


def test_overlapping_but_distinct_destinations_pass_the_longest_prefix_wins() -> None:
    raw = changed(
        "multus.networks.0.routes",
        [
            {"destination": "10.200.0.0/16", "transit_gateway_id": "tgw-0123456789abcdef0"},
            {"destination": "10.200.7.0/24", "network_interface_id": "eni-0123456789abcdef0"},
        ],
    )
    assert [r.target for r in parse_config(raw).multus.networks[0].routes] == [
        "transit_gateway",
        "network_interface",
    ]


@pytest.mark.parametrize("nat_gateway_ids", [["nat-0123456789abcdef1"] * 2, []])
def test_a_route_to_the_nat_gateway_needs_one(nat_gateway_ids: list[str]) -> None:
    # Every VPC the app creates has one (vpc.nat_gateways per_az or single); an existing VPC
    # may have none.
    networks = [{**network, "nat_egress": False} for network in seed_raw()["multus"]["networks"]]
    networks[0]["routes"] = [{"destination": "198.51.100.0/24", "nat_gateway": True}]
    raw = in_existing_vpc(networks, nat_gateway_ids=nat_gateway_ids)
    if nat_gateway_ids:
        assert parse_config(raw).multus.networks[0].routes[0].target == "nat_gateway"
    else:
        message = error_for(raw)
        assert "multus.networks[0] (multus1).routes[0].nat_gateway: " in message
        assert "no NAT gateway" in message


@pytest.mark.parametrize(
    ("target", "warned"),
    [
        ({"transit_gateway_id": "tgw-0123456789abcdef0"}, "VPC attachment of the transit gateway"),
        ({"vpn_gateway_id": "vgw-0123456789abcdef0"}, "virtual private gateway attached to it"),
        ({"network_interface_id": "eni-0123456789abcdef0"}, None),
        ({"nat_gateway": True}, None),
    ],
)
def test_routes_to_gateways_of_other_owners_warn_that_they_must_be_attached_first(
    target: dict[str, Any], warned: str | None
) -> None:
    """AWS::EC2::Route (CloudFormation template reference): "The route table cannot use the
    transit gateway until it has successfully attached to the VPC"; GatewayId is "an internet
    gateway or virtual private gateway attached to your VPC". The app creates neither the
    gateway nor its attachment, so no DependsOn can order them: the operator must."""
    config = parse_config(with_route(destination="10.200.0.0/16", **target))
    if warned is None:
        assert config.route_preconditions == []
    else:
        (warning,) = config.route_preconditions
        assert warning.startswith("multus.networks[0] (multus1).routes[0]: ")
        assert warned in warning and "deploy without the route" in warning


def test_an_ipv6_route_to_a_virtual_private_gateway_warns_that_only_direct_connect_carries_it() -> (
    None
):
    """EC2 takes the route (CreateRoute's GatewayId is any gateway attached to the VPC), but a
    virtual private gateway carries no IPv6 over a Site-to-Site VPN connection (Site-to-Site VPN
    User Guide, "How AWS Site-to-Site VPN works"), only from a Direct Connect private virtual
    interface: accepted, with a warning beside the attachment's."""
    raw = parse_config({}).model_dump(mode="json", exclude_none=True)
    raw["vpc"]["ipv6"] = True
    raw["multus"]["networks"][0]["ipv6"] = {}
    raw["multus"]["networks"][0]["routes"] = [
        {"destination": "2001:db8::/32", "vpn_gateway_id": "vgw-0123456789abcdef0"}
    ]
    attached, ipv6_over_vpn = parse_config(raw).route_preconditions
    assert "virtual private gateway attached to it" in attached
    assert ipv6_over_vpn.startswith("multus.networks[0] (multus1).routes[0]: 2001:db8::/32 is IPv6")
    assert "Direct Connect" in ipv6_over_vpn and "transit_gateway_id" in ipv6_over_vpn


def test_one_range_may_be_routed_by_networks_no_pool_attaches_together() -> None:
    """The RAN reached over N2 by the control pool and over N3 by the UPF pool: no pod is on
    both networks, so each pod has one route to the range."""
    raw = parse_config({}).model_dump(mode="json", exclude_none=True)
    for network in raw["multus"]["networks"]:
        network["routes"] = [{"destination": "10.200.0.0/16", "nat_gateway": True}]
    raw["node_pools"] = [
        {"name": "control", "networks": ["multus1"]},
        {"name": "upf", "networks": ["multus2"]},
    ]
    config = parse_config(raw)
    assert [len(network.routes) for network in config.multus.networks] == [1, 1]


def test_the_seed_routes_nothing_beyond_its_default_routes() -> None:
    seed = parse_config({})
    assert [n.routes for n in seed.multus.networks] == [[], []]
    assert all(row.routes == () for row in network_plan(seed))
    assert seed.route_preconditions == []


def dual_stack_network(name: str, octets: tuple[int, int], **ipv6: int) -> dict[str, Any]:
    return {
        "name": name,
        "ipv6": ipv6,
        "subnets": [
            {"cidr": f"10.0.{octet}.0/24", "reservation": f"10.0.{octet}.32/27"} for octet in octets
        ],
    }


def dual_stack_raw(*networks: dict[str, Any]) -> dict[str, Any]:
    return changed("vpc.ipv6", True, with_networks(*networks))


def test_ipv6_true_is_dual_stack_with_the_default_settings_and_false_is_ipv4_only() -> None:
    shorthand = dual_stack_network("multus1", (4, 5))
    shorthand["ipv6"] = True
    spelled_out = dual_stack_network("multus1", (4, 5))
    ipv4_only = {**dual_stack_network("multus2", (6, 7)), "ipv6": False}
    by_shorthand = parse_config(dual_stack_raw(shorthand, ipv4_only)).multus.networks
    assert by_shorthand[0].ipv6 == parse_config(dual_stack_raw(spelled_out)).multus.networks[0].ipv6
    assert by_shorthand[0].ipv6 is not None
    assert by_shorthand[1].ipv6 is None


@pytest.mark.parametrize(
    ("prefix_length", "offset", "accepted"),
    [
        # A /64 holds 2**48 blocks of /112; the last holds AWS's last address.
        (112, 2**48 - 2, True),
        (112, 2**48 - 1, False),
        # A /66 has four blocks: the first holds AWS's first four addresses, the last its last.
        (66, 1, True),
        (66, 2, True),
        (66, 3, False),
        (66, 0, False),
        # The /64 holds the range beside AWS's addresses from a /66 to a single address.
        (65, 1, False),
        (128, 1, True),
        (129, 1, False),
    ],
)
def test_ipv6_pod_range_inside_the_64_clear_of_aws_addresses(
    prefix_length: int, offset: int, accepted: bool
) -> None:
    raw = dual_stack_raw(
        dual_stack_network(
            "multus1", (4, 5), pod_range_prefix_length=prefix_length, pod_range_offset=offset
        )
    )
    if accepted:
        (row, _) = network_plan(parse_config(raw))
        assert row.ipv6 is not None
        assert (row.ipv6.pod_range_prefix_length, row.ipv6.pod_range_offset) == (
            prefix_length,
            offset,
        )
    else:
        assert "multus.networks[0].ipv6" in error_for(raw)


def test_ipv6_subnet_index_is_unique_only_among_dual_stack_subnets() -> None:
    """Two subnets of one /24 share a /64 number: refused only when both are dual-stack."""
    ipv4_only = one_network(
        subnets=[
            {"cidr": "10.0.4.128/25", "reservation": "10.0.4.160/27"},
            {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
        ],
        name="multus2",
    )
    halves = dual_stack_network("multus1", (4, 5))
    halves["subnets"][0] = {"cidr": "10.0.4.0/25", "reservation": "10.0.4.32/27"}
    indexes = [
        row.ipv6 and row.ipv6.subnet_index
        for row in network_plan(parse_config(dual_stack_raw(halves, ipv4_only)))
    ]
    assert indexes == [4, 5, None, None]
    both = {**ipv4_only, "ipv6": {}}
    assert "/64 number 4" in error_for(dual_stack_raw(halves, both))


def test_vpc_ipv6_without_dual_stack_networks_passes() -> None:
    assert parse_config(changed("vpc.ipv6", True)).vpc.ipv6


def test_ipv6_rules_on_a_dual_stack_network_and_its_default_egress() -> None:
    """The seed's egress (all to 0.0.0.0/0 and ::/0, vpc-infra-mng.yaml) when egress is unset;
    a given egress list is kept as it is."""
    default = dual_stack_network("multus1", (4, 5))
    (network,) = parse_config(dual_stack_raw(default)).multus.networks
    assert [(rule.protocol, rule.cidr) for rule in network.egress_rules] == [
        ("all", "0.0.0.0/0"),
        ("all", "::/0"),
    ]
    given = {
        **default,
        "security_group": {
            "ingress": [{"protocol": "udp", "ports": 2152, "cidr": "2001:db8:100::/48"}],
            "egress": [{"protocol": "udp", "ports": 2152, "cidr": "2001:db8:100::/48"}],
        },
    }
    (network,) = parse_config(dual_stack_raw(given)).multus.networks
    assert [rule.cidr for rule in network.egress_rules] == ["2001:db8:100::/48"]


def test_an_ipv6_route_and_rule_take_one_spelling_per_block() -> None:
    """RFC 5952 (lowercase, zeros compressed), as EC2 shows a block: so duplicates and the
    default route are recognised whatever the spelling, and templates carry what EC2 keeps."""
    network = one_network(
        ipv6=True,
        routes=[
            {"destination": "2001:DB8:45:0::/48", "transit_gateway_id": "tgw-0123456789abcdef0"}
        ],
        security_group={
            "ingress": [{"protocol": "udp", "ports": 2152, "cidr": "2001:DB8:0:0::/32"}]
        },
    )
    raw = with_networks(network)
    raw["vpc"] = {**raw.get("vpc", {}), "ipv6": True}

    parsed = parse_config(raw)

    (route,) = parsed.multus.networks[0].routes
    assert route.destination == "2001:db8:45::/48"
    ingress = parsed.multus.networks[0].security_group.ingress
    assert ingress is not None and [rule.cidr for rule in ingress] == ["2001:db8::/32"]


def with_budget(schedule: str, duration: str) -> dict[str, Any]:
    """The seed with one budget on its pool: no disruption from each hit for `duration`."""
    budget = {"nodes": "0", "schedule": schedule, "duration": duration}
    return changed("node_pools.0.disruption.budgets", [budget])


@pytest.mark.parametrize(
    ("schedule", "shorter", "longest"),
    [
        ("0 4 * * 0", "167h59m", "168h"),  # Sundays at 04:00 UTC: cron's Sunday is 0
        ("@daily", "23h59m", "24h"),
        ("0 4 * * SUN", "166h", "168h"),  # names, any case; a 2h window a week
        ("*/15 2-4 * * 1-5", "69h14m", "69h15m"),  # steps, ranges; Friday 04:45 to Monday 02:00
    ],
)
def test_schedules_karpenter_reads_pass_with_a_duration_under_their_longest_gap(
    schedule: str, shorter: str, longest: str
) -> None:
    """Budget.IsActive (Karpenter v1.14.1): active while a hit lies within duration before now;
    a duration under the longest gap between hits leaves a window, the gap itself none."""
    (budget,) = parse_config(with_budget(schedule, shorter)).node_pools[0].disruption.budgets
    assert (budget.schedule, budget.duration) == (schedule, shorter)
    message = error_for(with_budget(schedule, longest))
    assert f"node_pools[0].disruption.budgets[0].duration: {longest} is not shorter than " in (
        message
    )


def test_a_pool_whose_smallest_size_keeps_one_interface_after_reserved_enis_passes() -> None:
    """aws/karpenter-provider-aws v1.14.1 ENILimitedPods: the default card's interfaces minus
    settings.reservedENIs (the most Multus ENIs of any pool: upf's 3) are the pod ENIs; an
    xlarge's 4 leave 1 (16 pods on an m5.xlarge), a large's 3 none (refused: test_bad_input)."""
    raw = with_networks(
        one_network(),
        one_network(name="multus2", subnets=subnets(6)),
        one_network(name="multus3", subnets=subnets(8)),
    )
    raw["node_pools"] = [
        {"name": "upf", "instance_cpus": [4, 8]},
        {"name": "control", "networks": ["multus1"], "instance_cpus": [4]},
        {"name": "plain", "networks": [], "instance_cpus": [4, 16]},
    ]
    config = parse_config(raw)
    assert config.reserved_enis == 3
    assert [pool.max_enis_of_smallest_size for pool in config.node_pools] == [4, 4, 4]


@pytest.mark.parametrize(
    ("document", "operator", "cpus"),
    [
        # YAML 1.1 (PyYAML's SafeLoader) reads an unquoted yes as the boolean true.
        (
            b"monitoring:\n  prometheus_operator: yes\nnode_pools:\n- name: multus\n"
            b"  instance_cpus: [16, 32]\n",
            True,
            [16, 32],
        ),
        (
            b'{"monitoring": {"prometheus_operator": false}, '
            b'"node_pools": [{"name": "multus", "instance_cpus": [2]}]}',
            False,
            [2],
        ),
    ],
)
def test_booleans_and_numbers_written_as_such_pass(
    document: bytes, operator: bool, cpus: list[int], tmp_path: Path
) -> None:
    # The refusal of "yes" and "32" (test_bad_input.py, COERCIONS) keeps the typed values.
    path = tmp_path / ("config.yaml" if document.startswith(b"m") else "config.json")
    path.write_bytes(document)
    config = load_config({"config_file": str(path)}, tmp_path).base
    assert config.monitoring.prometheus_operator is operator
    assert config.node_pools[0].instance_cpus == cpus


SUMMARY_BEYOND_THE_VPC = [
    "10.1.0.0/16",
    "10.2.0.0/15",
    "10.4.0.0/14",
    "10.8.0.0/13",
    "10.16.0.0/12",
    "10.32.0.0/11",
    "10.64.0.0/10",
    "10.128.0.0/9",
]


def test_a_summary_route_around_the_vpc_passes_and_pods_route_only_its_parts_beyond() -> None:
    # EC2 takes 10.0.0.0/8 in a table whose local route is 10.0.0.0/16: the longest prefix wins
    # for the VPC's addresses (VPC User Guide, route tables, "Route priority"). In a pod's main
    # table nothing more specific keeps the VPC on eth0, so the pod gets the parts beyond it.
    from charts.nad_cni_configs import cni_configs
    from stacks.cluster_props import network_attachment

    tgw = "tgw-0123456789abcdef0"
    raw = with_networks(
        one_network(routes=[{"destination": "10.0.0.0/8", "transit_gateway_id": tgw}]),
        {**one_network(name="multus2", subnets=subnets(6)), "pod_routed_ranges": ["172.16.0.0/16"]},
    )
    config = parse_config(raw)
    row = network_plan(config)[0]
    assert row.routes[0].destination == "10.0.0.0/8"  # the route table's route, whole
    assert list(row.routes[0].pod_destinations) == SUMMARY_BEYOND_THE_VPC
    ipvlan, _, pod_ip = cni_configs(network_attachment(row))[0]["plugins"]
    assert ipvlan["ipam"]["routes"] == [{"dst": "10.0.0.0/8", "gw": "10.0.4.1"}]
    assert pod_ip["mainTableRoutes"] == [
        {"dst": cidr, "gw": "10.0.4.1"} for cidr in SUMMARY_BEYOND_THE_VPC
    ]


def test_a_route_beside_the_vpc_keeps_its_whole_destination_in_the_pods() -> None:
    raw = with_networks(one_network(routes=[{"destination": "10.200.0.0/16", "nat_gateway": True}]))
    route = network_plan(parse_config(raw))[0].routes[0]
    assert route.pod_destinations == ("10.200.0.0/16",)


def test_a_ue_pool_may_equal_a_range_routed_by_a_network_of_another_pool() -> None:
    # As two routes may (the RAN over N2 from the control pool, over N3 from the UPF's): the
    # pool rule only refuses a pod on both networks.
    raw = with_networks(
        one_network(routes=[{"destination": "10.200.0.0/16", "nat_gateway": True}]),
        {**one_network(name="multus2", subnets=subnets(6)), "pod_routed_ranges": ["10.200.0.0/16"]},
    )
    raw["node_pools"] = [
        {**raw["node_pools"][0], "name": "control", "networks": ["multus1"]},
        {**raw["node_pools"][0], "name": "upf", "networks": ["multus2"]},
    ]
    config = parse_config(raw)
    assert [pool.networks for pool in config.node_pools] == [["multus1"], ["multus2"]]
