"""Network attachments: the exact CNI configuration against the seed's NADs and the CNI spec,
and the plugin/file lists that cleartaints waits for."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.nad_cni_configs import (
    CNI_VERSION,
    NetworkAttachment,
    cni_binaries,
    cni_config,
    cni_configs,
    cni_host_files,
    static_cni_config,
    whereabouts_range_and_gateway,
)
from charts.network_attachments import NetworkAttachmentsChart, NetworkAttachmentsProps
from multus_pod_ips import CNI_PLUGIN_TYPE

# CNI spec versions that know plugin lists ("plugins", from 0.3.0 on) and that the reference
# plugins (ipvlan, sbr) and Whereabouts accept.
CONFLIST_CNI_VERSIONS = {"0.3.0", "0.3.1", "0.4.0", "1.0.0"}


def attachment(name: str = "multus1-us-west-2a", mode: Any = "l2") -> NetworkAttachment:
    whereabouts_range, gateway = whereabouts_range_and_gateway("10.0.4.0/24", "10.0.4.32/27")
    return NetworkAttachment(
        name=name,
        master_interface="multus1",
        ipvlan_mode=mode,
        whereabouts_range=whereabouts_range,
        gateway=gateway,
    )


def seed_nad_configs(reference_dir: Path, helpers: SimpleNamespace) -> list[dict[str, Any]]:
    paths = sorted(
        (reference_dir / "seed-karpenter-with-multus-on-eks" / "sample-application").glob(
            "multus-nad-az*.yaml"
        )
    )
    return [
        json.loads(nad["spec"]["config"])
        for path in paths
        for nad in helpers.load_yaml_documents(path)
    ]


def test_the_whereabouts_settings_are_the_seeds(
    reference_dir: Path, helpers: SimpleNamespace
) -> None:
    seed_ipam = [
        config["plugins"][0]["ipam"] for config in seed_nad_configs(reference_dir, helpers)
    ]
    ipam = cni_config(attachment())["plugins"][0]["ipam"]
    for seed in seed_ipam:
        assert (ipam["type"], ipam["datastore"], ipam["kubernetes"]) == (
            seed["type"],
            seed["datastore"],
            seed["kubernetes"],
        )


def test_the_plugin_chain_starts_with_the_seeds_ipvlan_then_sbr(
    reference_dir: Path, helpers: SimpleNamespace
) -> None:
    seed_types = {
        tuple(plugin["type"] for plugin in config["plugins"])
        for config in seed_nad_configs(reference_dir, helpers)
    }
    chain = tuple(plugin["type"] for plugin in cni_config(attachment())["plugins"])
    assert seed_types == {chain[:2]}
    assert chain[2:] == (CNI_PLUGIN_TYPE,)  # then the pod IP assignment, last


def test_the_cni_version_is_one_with_plugin_lists() -> None:
    assert cni_config(attachment())["cniVersion"] in CONFLIST_CNI_VERSIONS


def test_the_plugins_to_wait_for_are_the_chains_and_its_ipam() -> None:
    assert cni_binaries([attachment()]) == sorted(["ipvlan", "sbr", "whereabouts", CNI_PLUGIN_TYPE])
    assert cni_binaries([]) == []


def test_the_host_file_to_wait_for_is_whereabouts_kubeconfig() -> None:
    two = [attachment("multus1-us-west-2a"), attachment("multus1-us-west-2b")]
    assert cni_host_files(two) == ["/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"]
    assert cni_host_files([]) == []


def test_the_nad_carries_the_cni_config_as_json() -> None:
    props = NetworkAttachmentsProps(namespace="default", attachments=[attachment(mode="l3")])
    (nad,) = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))
    assert (nad["kind"], nad["metadata"]["name"]) == (
        "NetworkAttachmentDefinition",
        "multus1-us-west-2a",
    )
    assert json.loads(nad["spec"]["config"]) == cni_config(attachment(mode="l3"))
    assert json.loads(nad["spec"]["config"])["plugins"][0]["mode"] == "l3"


def test_a_range_for_a_reservation_that_fills_its_subnet() -> None:
    # The edge of the subnet_of rule: the whole subnet is inside itself.
    assert whereabouts_range_and_gateway("10.0.4.0/28", "10.0.4.0/28") == (
        "10.0.4.0-10.0.4.15/28",
        "10.0.4.1",
    )


def test_attachments_and_props_are_immutable() -> None:
    props = NetworkAttachmentsProps(namespace="default", attachments=[attachment()])
    with pytest.raises(FrozenInstanceError):
        props.attachments[0].gateway = "10.0.4.2"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        props.namespace = "other"  # type: ignore[misc]


def test_the_pod_ip_plugin_is_told_the_networks_eni_and_subnet() -> None:
    # multus_pod_ips/cni_plugin.py reads "master" (the ENI's interface name, as ipvlan does)
    # and "mainTableSubnet" (the route it puts back into the pod's main table after sbr).
    assert cni_config(attachment())["plugins"][-1] == {
        "type": CNI_PLUGIN_TYPE,
        "master": "multus1",
        "mainTableSubnet": "10.0.4.0/24",
    }


@pytest.mark.parametrize(
    ("subnet", "reservation"),
    [
        ("10.0.4.0/28", "10.0.4.0/28"),
        ("10.1.0.0/16", "10.1.200.0/24"),
        ("10.0.4.0/24", "10.0.4.255/32"),
    ],
    ids=["reservation-fills-the-subnet", "reservation-far-from-the-subnet-start", "last-address"],
)
def test_the_main_table_subnet_is_the_attachments_subnet(subnet: str, reservation: str) -> None:
    whereabouts_range, gateway = whereabouts_range_and_gateway(subnet, reservation)
    wide = NetworkAttachment("n", "multus1", "l2", whereabouts_range, gateway)
    assert wide.subnet_cidr == subnet


def test_node_local_nads_come_after_a_namespace_the_chart_creates() -> None:
    props = NetworkAttachmentsProps(
        namespace="telco", attachments=[], create_namespace=True, node_local_names=["up-a"]
    )
    objects = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Namespace", "telco"),
        ("NetworkAttachmentDefinition", "up-a"),
    ]


def test_every_nad_is_the_kind_and_version_the_multus_crd_serves(
    upstream_crds: dict[str, dict[str, Any]], helpers: SimpleNamespace
) -> None:
    # Multus looks NADs up through its CRD; an object of another group/version is not one,
    # whether it carries a config or (node_prefix) an empty spec.
    crd = upstream_crds["k8s.cni.cncf.io/NetworkAttachmentDefinition"]
    served = [v["name"] for v in crd["spec"]["versions"] if v["served"]]
    props = NetworkAttachmentsProps(
        namespace="telco", attachments=[attachment()], node_local_names=["userplane-us-west-2a"]
    )
    objects = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))
    assert len(objects) == 2
    for nad in objects:
        group, _, version = nad["apiVersion"].partition("/")
        assert (group, nad["kind"]) == (crd["spec"]["group"], crd["spec"]["names"]["kind"]), nad
        assert version in served, nad
        helpers.validate_custom_object(nad, helpers.crd_schema(crd, version))


# Fixed addresses ------------------------------------------------------------------------------

STATIC_RANGE = "10.0.4.48/28"


def with_static_range(static_range: str = STATIC_RANGE) -> NetworkAttachment:
    return replace(attachment(), static_range=static_range, static_name="multus1-us-west-2a-static")


def whereabouts_dynamic_addresses(ipam: dict[str, Any]) -> set[str]:
    """The addresses Whereabouts may lease for this IPAM config: whereabouts pkg/config/config.go
    (LoadIPAMConfig) turns "range" "<first>-<last>/<prefix>" into range_start/range_end and
    keeps the top-level "exclude" with that range; pkg/allocate/allocate.go
    (IterateForAssignment) walks range_start..range_end and skips every address of an excluded
    block, its network and broadcast addresses included."""
    first, rest = ipam["range"].split("-", 1)
    last = rest.split("/", 1)[0]
    excluded = [ipaddress.ip_network(block) for block in ipam.get("exclude", [])]
    start, end = int(ipaddress.ip_address(first)), int(ipaddress.ip_address(last))
    return {
        str(address)
        for address in map(ipaddress.IPv4Address, range(start, end + 1))
        if not any(address in block for block in excluded)
    }


def test_whereabouts_leases_the_reservation_minus_the_static_range() -> None:
    reservation = {str(a) for a in ipaddress.ip_network("10.0.4.32/27")}
    static = {str(a) for a in ipaddress.ip_network(STATIC_RANGE)}

    leased = whereabouts_dynamic_addresses(cni_config(with_static_range())["plugins"][0]["ipam"])

    assert leased == reservation - static
    assert not leased & static  # no dynamic pod ever takes a fixed address
    # Without a static range, the whole reservation and no exclude key (the seed's NADs).
    assert "exclude" not in cni_config(attachment())["plugins"][0]["ipam"]
    assert whereabouts_dynamic_addresses(cni_config(attachment())["plugins"][0]["ipam"]) == (
        reservation
    )


def test_the_static_nad_is_the_whereabouts_chain_with_static_ipam_taking_the_pods_ips() -> None:
    """multus-cni pkg/types/conf.go: the `ips` of a network selection element become the
    delegate's runtimeConfig ips (CreateCNIRuntimeConf, capabilityArgs["ips"]), which libcni
    hands only to a plugin that declares the "ips" capability. containernetworking/plugins
    plugins/ipam/static (LoadIPAMConfig): runtimeConfig.ips replace the configured addresses,
    each in CIDR notation and without a gateway, so the VPC router comes as a route."""
    dynamic = cni_config(with_static_range())
    static = static_cni_config(with_static_range())
    ipvlan, sbr, pod_ip = static["plugins"]

    assert (static["cniVersion"], static["name"]) == (CNI_VERSION, "multus1-us-west-2a-static")
    assert [p["type"] for p in static["plugins"]] == [p["type"] for p in dynamic["plugins"]]
    assert {k: ipvlan[k] for k in ("master", "mode")} == {"master": "multus1", "mode": "l2"}
    assert ipvlan["capabilities"] == {"ips": True}
    assert "capabilities" not in dynamic["plugins"][0]  # Whereabouts picks its own address
    assert ipvlan["ipam"] == {
        "type": "static",
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.4.1"}],
    }
    assert sbr == {"type": "sbr"}
    assert pod_ip == {**dynamic["plugins"][-1], "fixedAddresses": True}


def test_an_attachment_without_a_static_range_has_no_static_config() -> None:
    assert cni_configs(attachment()) == [cni_config(attachment())]
    with pytest.raises(ValueError, match="no static_range"):
        static_cni_config(attachment())


def test_cleartaints_waits_for_static_only_where_a_static_nad_needs_it() -> None:
    """AL2023 EKS AMIs install no CNI plugin (awslabs/amazon-eks-ami
    templates/al2023/provisioners/install-worker.sh only creates /opt/cni/bin); the VPC CNI
    add-on's init image copies every upstream plugin there, static included
    (aws/amazon-vpc-cni-k8s Makefile, target `plugins`: containernetworking/plugins v1.9.1
    build_linux.sh, which builds plugins/ipam/*)."""
    assert "static" in cni_binaries([attachment(), with_static_range()])
    assert "static" not in cni_binaries([attachment()])


def test_the_chart_adds_a_static_nad_valid_against_the_multus_crd(
    upstream_crds: dict[str, dict[str, Any]], helpers: SimpleNamespace
) -> None:
    crd = upstream_crds["k8s.cni.cncf.io/NetworkAttachmentDefinition"]
    props = NetworkAttachmentsProps(namespace="telco", attachments=[with_static_range()])

    objects = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))

    assert [o["metadata"]["name"] for o in objects] == [
        "multus1-us-west-2a",
        "multus1-us-west-2a-static",
    ]
    assert [json.loads(o["spec"]["config"]) for o in objects] == cni_configs(with_static_range())
    for nad in objects:
        helpers.validate_custom_object(nad, helpers.crd_schema(crd, "v1"))


def test_a_static_nad_name_may_not_repeat_another_nad() -> None:
    clash = replace(with_static_range(), static_name="multus1-us-west-2a")
    props = NetworkAttachmentsProps(namespace="default", attachments=[clash])
    with pytest.raises(ValueError, match="must be unique"):
        NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props)


def test_only_a_network_with_pod_routed_ranges_offers_them_to_its_pods_in_both_nads() -> None:
    """The pod's cni-args podRoutedRanges are checked against the plugin entry's (both NADs of
    a subnet with a static range: a UPF may hold a fixed N6 address)."""
    routed = replace(
        attachment(),
        static_range="10.0.4.48/28",
        static_name="multus1-us-west-2a-static",
        pod_routed_ranges=("10.45.0.0/16",),
    )
    for config in cni_configs(routed):
        assert config["plugins"][-1]["type"] == CNI_PLUGIN_TYPE
        assert config["plugins"][-1]["podRoutedRanges"] == ["10.45.0.0/16"]
        # the node routes the ranges via the pod network's interface (ipvlan delivers only
        # held addresses), which containerd names eth0 (internal/cri/server/helpers.go)
        assert config["plugins"][-1]["podNetworkInterface"] == "eth0"
    plain = cni_config(attachment())["plugins"][-1]
    assert "podRoutedRanges" not in plain and "podNetworkInterface" not in plain
