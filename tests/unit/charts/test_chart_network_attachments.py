from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cdk8s
import pytest

from charts.nad_cni_configs import (
    WHEREABOUTS_KUBECONFIG,
    NetworkAttachment,
    whereabouts_range_and_gateway,
)
from charts.network_attachments import NetworkAttachmentsChart, NetworkAttachmentsProps
from config.network_plan import network_attachment_name
from multus_pod_ips import CNI_PLUGIN_TYPE

DNS_1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)

# (subnet, reservation) of the seed's Multus subnets -> the seed NADs' (range, gateway).
SEED_RANGES = {
    ("10.0.4.0/24", "10.0.4.32/27"): ("10.0.4.32-10.0.4.63/24", "10.0.4.1"),
    ("10.0.5.0/24", "10.0.5.32/27"): ("10.0.5.32-10.0.5.63/24", "10.0.5.1"),
    ("10.0.6.0/24", "10.0.6.32/27"): ("10.0.6.32-10.0.6.63/24", "10.0.6.1"),
    ("10.0.7.0/24", "10.0.7.32/27"): ("10.0.7.32-10.0.7.63/24", "10.0.7.1"),
}


def synth(attachments: list[NetworkAttachment], namespace: str = "default") -> list[dict[str, Any]]:
    props = NetworkAttachmentsProps(namespace=namespace, attachments=attachments)
    return cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))


def attachments_for(networks: list[str], zones: list[str]) -> list[NetworkAttachment]:
    attachments = []
    for n, network in enumerate(networks):
        for z, zone in enumerate(zones):
            subnet = f"10.{n}.{z}.0/24"
            whereabouts_range, gateway = whereabouts_range_and_gateway(subnet, f"10.{n}.{z}.64/26")
            attachments.append(
                NetworkAttachment(
                    name=network_attachment_name(network, zone),
                    master_interface=network,
                    ipvlan_mode="l3",
                    whereabouts_range=whereabouts_range,
                    gateway=gateway,
                )
            )
    return attachments


@pytest.mark.parametrize(("subnet_and_reservation", "expected"), SEED_RANGES.items())
def test_range_is_the_reservation_and_gateway_the_vpc_router(
    subnet_and_reservation: tuple[str, str], expected: tuple[str, str]
) -> None:
    assert whereabouts_range_and_gateway(*subnet_and_reservation) == expected


def test_helper_reproduces_every_seed_nad(helpers: SimpleNamespace, reference_dir: Path) -> None:
    seed_nads = [
        nad
        for path in sorted(
            (reference_dir / "seed-karpenter-with-multus-on-eks" / "sample-application").glob(
                "multus-nad-az*.yaml"
            )
        )
        for nad in helpers.load_yaml_documents(path)
    ]
    seed_ipam = {
        (ipam["range"], ipam["gateway"])
        for ipam in (json.loads(nad["spec"]["config"])["plugins"][0]["ipam"] for nad in seed_nads)
    }
    assert len(seed_nads) == 4
    assert seed_ipam == set(SEED_RANGES.values())


def test_reservation_outside_the_subnet_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"10\.0\.5\.32/27 is not inside subnet 10\.0\.4\.0/24"):
        whereabouts_range_and_gateway("10.0.4.0/24", "10.0.5.32/27")


def test_one_nad_per_network_and_zone(helpers: SimpleNamespace) -> None:
    networks, zones = ["multus1", "multus2", "multus3"], ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
    nads = helpers.find_all(
        synth(attachments_for(networks, zones), "telco"), "NetworkAttachmentDefinition"
    )
    names = {nad["metadata"]["name"] for nad in nads}
    assert len(nads) == 9
    assert names == {network_attachment_name(n, z) for n in networks for z in zones}
    assert all(DNS_1123_SUBDOMAIN.match(name) for name in names)
    assert {nad["metadata"]["namespace"] for nad in nads} == {"telco"}
    assert {nad["apiVersion"] for nad in nads} == {"k8s.cni.cncf.io/v1"}


def test_nad_names_are_predictable_from_network_and_zone() -> None:
    assert network_attachment_name("multus1", "us-west-2a") == "multus1-us-west-2a"
    assert network_attachment_name("multus1", "us-west-2b") != network_attachment_name(
        "multus2", "us-west-2a"
    )


def test_cni_config_is_ipvlan_with_whereabouts_then_sbr_then_pod_ip_assignment(
    seed_manifests: dict[str, list[dict[str, Any]]], helpers: SimpleNamespace
) -> None:
    nad = helpers.find(
        seed_manifests["network-attachments"], "NetworkAttachmentDefinition", "multus2-us-west-2b"
    )
    config = json.loads(nad["spec"]["config"])
    ipvlan, sbr, pod_ip = config["plugins"]
    assert config["name"] == "multus2-us-west-2b"
    assert (ipvlan["type"], ipvlan["master"], ipvlan["mode"]) == ("ipvlan", "multus2", "l2")
    assert ipvlan["ipam"] == {
        "type": "whereabouts",
        "datastore": "kubernetes",
        "kubernetes": {"kubeconfig": WHEREABOUTS_KUBECONFIG},
        "range": "10.0.7.32-10.0.7.63/24",
        "gateway": "10.0.7.1",
    }
    assert sbr == {"type": "sbr"}
    # Last, so it sees the address in prevResult and runs first on DEL (reverse order),
    # before Whereabouts frees the address for another pod; and after sbr, which empties the
    # pod's main table of net1's routes, so it can put multus2's subnet in us-west-2b back.
    assert pod_ip == {
        "type": CNI_PLUGIN_TYPE,
        "master": ipvlan["master"],
        "mainTableSubnet": "10.0.7.0/24",
    }


def test_duplicate_attachment_names_are_rejected() -> None:
    (attachment,) = attachments_for(["multus1"], ["us-west-2a"])
    with pytest.raises(ValueError, match="multus1-us-west-2a"):
        synth([attachment, attachment])


def test_a_namespace_of_its_own_is_created_before_the_nads() -> None:
    props = NetworkAttachmentsProps(
        namespace="telco-nads",
        attachments=attachments_for(["multus1"], ["us-west-2a"]),
        create_namespace=True,
    )
    manifest = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))
    assert [(o["kind"], o["metadata"].get("namespace")) for o in manifest] == [
        ("Namespace", None),
        ("NetworkAttachmentDefinition", "telco-nads"),
    ]
    assert manifest[0]["metadata"]["name"] == "telco-nads"


def test_an_existing_namespace_is_not_created() -> None:
    kinds = {o["kind"] for o in synth(attachments_for(["multus1"], ["us-west-2a"]), "default")}
    assert kinds == {"NetworkAttachmentDefinition"}


def test_node_local_attachments_carry_no_config_and_share_the_name_space() -> None:
    props = NetworkAttachmentsProps(
        namespace="telco",
        attachments=attachments_for(["signaling"], ["us-west-2a"]),
        node_local_names=["userplane-us-west-2a"],
    )
    objects = cdk8s.Testing.synth(NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", props))
    by_name = {o["metadata"]["name"]: o for o in objects}
    # Multus reads the node's CNI config named like the NAD only when the spec is empty.
    assert by_name["userplane-us-west-2a"]["spec"] == {}
    assert by_name["userplane-us-west-2a"]["metadata"]["namespace"] == "telco"
    assert "config" in by_name["signaling-us-west-2a"]["spec"]

    clash = NetworkAttachmentsProps(
        namespace="telco",
        attachments=attachments_for(["userplane"], ["us-west-2a"]),
        node_local_names=["userplane-us-west-2a"],
    )
    with pytest.raises(ValueError, match="userplane-us-west-2a"):
        NetworkAttachmentsChart(cdk8s.Testing.app(), "nads", clash)
