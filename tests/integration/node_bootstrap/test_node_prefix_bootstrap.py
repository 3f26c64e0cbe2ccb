"""node_prefix mode of the bootstrap on the emulator: prefixes in the create call, checked
against the reservation, and the node-local CNI config (docs/node-prefix-mode.md)."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from config.node_bootstrap_plan import READY_MARKER_PATH, NodePrefixNetwork
from node_bootstrap import render_user_data
from node_bootstrap.node_prefix import IPAM_DATA_DIR, cni_config_file_name
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, EmulatedVpc
from testing_support.node_prefix_pods import HOST_LOCAL, run_host_local
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import unmanaged_network_file

pytestmark = pytest.mark.integration

CLUSTER = "prefix-cluster"
AZ = "us-west-2a"
PREFIXES_PER_NODE = 2
# multus2's subnets are 10.0.6.0/24 (us-west-2a) and 10.0.7.0/24; a /26 holds four /28s, so
# two nodes per AZ fit.
RESERVATIONS = {"us-west-2a": "10.0.6.64/26", "us-west-2b": "10.0.7.64/26"}
CONFIG_FILE = cni_config_file_name(2)
STAGED = "var/lib/multus-eni/cni"
LIVE = "etc/cni/net.d"


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    vpc = emulator.create_multus_vpc(network_count=2)
    for az, cidr in RESERVATIONS.items():
        emulator.ec2.create_subnet_cidr_reservation(
            SubnetId=vpc.multus_subnets["multus2", az], Cidr=cidr, ReservationType="prefix"
        )
    return vpc


@pytest.fixture(scope="module")
def user_data(vpc: EmulatedVpc) -> str:
    """multus1 stays in whereabouts mode; multus2 is a node_prefix network."""
    return render_user_data(
        replace(
            vpc.bootstrap_props(CLUSTER),
            node_prefix=[
                NodePrefixNetwork(
                    availability_zone=az,
                    interface_name="multus2",
                    device_index=2,
                    prefix_count=PREFIXES_PER_NODE,
                    cni_network_name=f"multus2-{az}",
                    subnet_cidr=f"10.0.{6 + index}.0/24",
                    reservation_cidr=reservation,
                    ipvlan_mode="l2",
                )
                for index, (az, reservation) in enumerate(RESERVATIONS.items())
            ],
        )
    )


@pytest.fixture(scope="module")
def two_nodes(
    emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str
) -> list[tuple[str, BootstrapRun]]:
    nodes = []
    for _ in range(2):
        instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)
        nodes.append((instance_id, emulator.run_bootstrap(user_data, instance_id)))
    return nodes


def cni_config(run: BootstrapRun) -> dict[str, Any]:
    """The config as the bootstrap staged it (installed later, see test_config_is_installed_*)."""
    return dict(json.loads((run.root / STAGED / CONFIG_FILE).read_text()))


def config_prefixes(config: dict[str, Any]) -> list[ipaddress.IPv4Network]:
    """The /28s the config's ranges cover (rangeStart..rangeEnd of each)."""
    ranges = config["plugins"][0]["ipam"]["ranges"]
    assert len(ranges) == 1, "one range set: one address per pod"
    blocks = []
    for entry in ranges[0]:
        first, last = (ipaddress.IPv4Address(entry[k]) for k in ("rangeStart", "rangeEnd"))
        (block,) = ipaddress.summarize_address_range(first, last)
        blocks.append(block)
    return blocks


def prefix_eni(emulator: Ec2Emulator, instance_id: str) -> dict[str, Any]:
    (eni,) = [
        e
        for e in emulator.instance_enis(instance_id)
        if e.get("Attachment", {}).get("DeviceIndex") == 2
    ]
    return eni


def marker(run: BootstrapRun) -> Path:
    return run.root / READY_MARKER_PATH.lstrip("/")


def test_each_node_gets_distinct_prefixes_inside_the_reservation(
    emulator: Ec2Emulator, two_nodes: list[tuple[str, BootstrapRun]]
) -> None:
    reservation = ipaddress.IPv4Network(RESERVATIONS[AZ])
    seen: list[ipaddress.IPv4Network] = []
    for instance_id, run in two_nodes:
        assert run.returncode == 0, run.output
        eni = prefix_eni(emulator, instance_id)
        assigned = [
            ipaddress.IPv4Network(p) for p in emulator.proxy.prefixes.of(eni["NetworkInterfaceId"])
        ]
        assert len(assigned) == PREFIXES_PER_NODE
        assert all(p.prefixlen == 28 and p.subnet_of(reservation) for p in assigned)
        assert sorted(config_prefixes(cni_config(run))) == sorted(assigned)
        assert not any(p.overlaps(other) for p in assigned for other in seen)
        seen += assigned
        primary = ipaddress.IPv4Address(eni["PrivateIpAddress"])
        assert primary not in reservation


def test_the_prefix_network_is_left_alone_by_networkd_like_any_multus_interface(
    emulator: Ec2Emulator, two_nodes: list[tuple[str, BootstrapRun]]
) -> None:
    """node_prefix ENIs appear during user-data as well, so nodeadm's udev broker hands them to
    networkd too (awslabs/amazon-eks-ami nodeadm/cmd/nodeadm-internal/udev/broker.go); DHCP
    would then put the ENI's primary address and subnet routes on the host."""
    instance_id, run = two_nodes[0]
    eni = prefix_eni(emulator, instance_id)
    ifname = f"multus{eni['Attachment']['DeviceIndex']}"
    network_file = run.root / f"etc/systemd/network/10-multus-{ifname}.network"
    assert network_file.read_text() == unmanaged_network_file(eni["MacAddress"])


def test_prefixes_are_requested_in_the_create_call_and_cost_no_extra_call(
    two_nodes: list[tuple[str, BootstrapRun]],
) -> None:
    _, run = two_nodes[0]
    creates = {c.params["SubnetId"]: c.params for c in run.actions("CreateNetworkInterface")}
    counts = sorted(params.get("Ipv4PrefixCount", "-") for params in creates.values())
    assert counts == ["-", str(PREFIXES_PER_NODE)]  # multus1 (whereabouts) asks for none
    assert len(run.ec2_calls) == 8  # as in whereabouts mode: 4 per network


def test_cni_config_is_ipvlan_host_local_over_the_prefixes_then_sbr(
    two_nodes: list[tuple[str, BootstrapRun]],
) -> None:
    _, run = two_nodes[0]
    config = cni_config(run)
    ipvlan, sbr = config["plugins"]
    assert config["name"] == f"multus2-{AZ}"
    assert (ipvlan["type"], ipvlan["master"], ipvlan["mode"]) == ("ipvlan", "multus2", "l2")
    assert ipvlan["ipam"]["type"] == "host-local"
    assert ipvlan["ipam"]["dataDir"] == IPAM_DATA_DIR
    assert IPAM_DATA_DIR.startswith("/run/")  # tmpfs: leases do not outlive a reboot
    for entry in ipvlan["ipam"]["ranges"][0]:
        assert (entry["subnet"], entry["gateway"]) == ("10.0.6.0/24", "10.0.6.1")
    assert sbr == {"type": "sbr"}
    # multus1 (whereabouts) gets no node-local file; the marker lists both interfaces.
    assert sorted(p.name for p in (run.root / STAGED).iterdir()) == [CONFIG_FILE]
    assert marker(run).read_text().splitlines() == ["multus1", "multus2"]


def test_config_is_installed_only_once_the_vpc_cnis_config_exists(
    emulator: Ec2Emulator, user_data: str, two_nodes: list[tuple[str, BootstrapRun]]
) -> None:
    # In user-data kubelet has not started, so the VPC CNI has not written its config: the
    # runtime would take ours, alone in the directory, as the pod network.
    instance_id, first = two_nodes[0]
    assert list((first.root / LIVE).iterdir()) == []
    units = first.root / "etc/systemd/system"
    assert (units / "cni-90-node-prefix-eni2.path").read_text() == (
        "[Path]\nPathExists=/etc/cni/net.d/10-aws.conflist\n\n[Install]\n"
        "WantedBy=multi-user.target\n"
    )
    staged, live = f"/{STAGED}/{CONFIG_FILE}", f"/{LIVE}/{CONFIG_FILE}"
    assert (units / "cni-90-node-prefix-eni2.service").read_text() == (
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        f'ExecStart=/bin/sh -c "cp -f {staged} {live}.tmp && mv -f {live}.tmp {live}"\n'
    )
    host_commands = (first.root / "var/lib/multus-eni/host-commands").read_text().splitlines()
    assert "systemctl enable --now --no-block cni-90-node-prefix-eni2.path" in host_commands

    # Once it exists (a later run), the config goes straight into the directory.
    (first.root / LIVE / "10-aws.conflist").write_text("{}")
    rerun = emulator.run_bootstrap(user_data, instance_id, root=first.root)
    assert rerun.returncode == 0, rerun.output
    assert (first.root / LIVE / CONFIG_FILE).read_text() == (
        first.root / STAGED / CONFIG_FILE
    ).read_text()
    assert sorted(p.name for p in (first.root / LIVE).iterdir()) == [
        "10-aws.conflist",
        CONFIG_FILE,
    ]


def test_rerun_converges_without_ec2_calls(
    emulator: Ec2Emulator, user_data: str, two_nodes: list[tuple[str, BootstrapRun]]
) -> None:
    instance_id, first = two_nodes[0]
    before = cni_config(first)

    rerun = emulator.run_bootstrap(user_data, instance_id, root=first.root)

    assert rerun.returncode == 0, rerun.output
    assert rerun.ec2_calls == []
    assert cni_config(rerun) == before
    assert marker(rerun).exists()


def test_prefix_outside_the_reservation_deletes_the_eni_and_fails(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    user_data: str,
    two_nodes: list[tuple[str, BootstrapRun]],
) -> None:
    # The two nodes hold the reservation's four prefixes; the emulator then takes the rest of
    # the subnet, which EC2 does not document either way.
    assert all(run.returncode == 0 for _, run in two_nodes)
    instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)

    run = emulator.run_bootstrap(user_data, instance_id)

    assert run.returncode != 0
    assert f"is not a /28 inside the reservation {RESERVATIONS[AZ]}" in run.output
    (create,) = [c for c in run.actions("CreateNetworkInterface") if "Ipv4PrefixCount" in c.params]
    deleted = [c.params["NetworkInterfaceId"] for c in run.actions("DeleteNetworkInterface")]
    assert len(deleted) == 1
    assert emulator.proxy.prefixes.of(deleted[0]) == ()
    assert not (run.root / STAGED / CONFIG_FILE).exists()
    assert not marker(run).exists()
    assert create.status == 200


def test_exhausted_reservation_without_fallback_fails_cleanly(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    user_data: str,
    two_nodes: list[tuple[str, BootstrapRun]],
) -> None:
    assert all(run.returncode == 0 for _, run in two_nodes)
    instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)
    emulator.proxy.prefixes.fallback_to_subnet = False
    try:
        run = emulator.run_bootstrap(user_data, instance_id)
    finally:
        emulator.proxy.prefixes.fallback_to_subnet = True

    assert run.returncode != 0
    assert "InsufficientCidrBlocks" in run.output
    assert not any(
        e.get("Attachment", {}).get("DeviceIndex") == 2 for e in emulator.instance_enis(instance_id)
    )
    assert not marker(run).exists()


def test_deleting_a_nodes_eni_releases_its_prefixes_for_the_next_node(
    emulator: Ec2Emulator,
    vpc: EmulatedVpc,
    user_data: str,
    two_nodes: list[tuple[str, BootstrapRun]],
) -> None:
    gone_id, gone_run = two_nodes[1]
    freed = sorted(config_prefixes(cni_config(gone_run)))
    eni = prefix_eni(emulator, gone_id)
    emulator.ec2.detach_network_interface(AttachmentId=eni["Attachment"]["AttachmentId"])
    emulator.ec2.delete_network_interface(NetworkInterfaceId=eni["NetworkInterfaceId"])
    instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)

    run = emulator.run_bootstrap(user_data, instance_id)

    assert run.returncode == 0, run.output
    assert sorted(config_prefixes(cni_config(run))) == freed


def test_real_host_local_hands_out_every_prefix_address_once_then_fails_cleanly(
    tmp_path: Path, two_nodes: list[tuple[str, BootstrapRun]]
) -> None:
    assert HOST_LOCAL.exists(), "host-local is missing: run `make cni-plugins` (make test does)"
    _, run = two_nodes[0]
    config_list = cni_config(run)
    ipvlan = config_list["plugins"][0]
    # What libcni hands the first plugin of a list, with the leases in a temporary directory.
    plugin_config = {
        "cniVersion": config_list["cniVersion"],
        "name": config_list["name"],
        **ipvlan,
        "ipam": {**ipvlan["ipam"], "dataDir": str(tmp_path / "leases")},
    }
    prefixes = config_prefixes(config_list)
    capacity = 16 * PREFIXES_PER_NODE

    addresses = []
    for pod in range(capacity):
        status, result = run_host_local("ADD", f"pod-{pod}", plugin_config)
        assert status == 0, result
        (ip,) = result["ips"]
        assert ip["gateway"] == "10.0.6.1"
        addresses.append(ipaddress.IPv4Interface(ip["address"]))

    assert len(set(addresses)) == capacity
    assert {a.network for a in addresses} == {ipaddress.IPv4Network("10.0.6.0/24")}
    assert {a.ip for a in addresses} == {ip for prefix in prefixes for ip in prefix}

    status, error = run_host_local("ADD", "pod-one-too-many", plugin_config)
    assert status != 0
    assert "no IP addresses available" in error["msg"]

    status, _ = run_host_local("DEL", "pod-3", plugin_config)
    assert status == 0
    status, result = run_host_local("ADD", "pod-after-del", plugin_config)
    assert status == 0, result
    assert ipaddress.IPv4Interface(result["ips"][0]["address"]) == addresses[3]
