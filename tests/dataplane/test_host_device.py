"""Whole-ENI networks (multus.networks[].mode host-device, issue #38) in a real kernel: a node
bootstrapped with two ENIs of a host-device network, Multus taking each NAD's config from the
node (a NAD without spec.config: the file in the node's /etc/cni/net.d whose "name" is the
NAD's, as node_bootstrap/host_device.sh writes it), and the real host-device plugin
(containernetworking/plugins v1.9.1, plugins/main/host-device: moves the named link into the
pod's namespace as CNI_IFNAME, static IPAM gives it the ENI's primary address; DEL moves it
back under its own name) handing each pod a whole ENI, through which it reaches pods of other
nodes across the VPC.

The network's ENIs go into multus1's subnet in the tier's AZ (the kernel VPC's fabric knows
only the session's subnets); the rest is as a host-device network's node has it: no pod IP
agent, no Whereabouts, the ENI's own address. The node's bootstrap props are written here as
config/node_bootstrap_plan.node_bootstrap_props makes them from a plan (the integration test
tests/integration/node_bootstrap/test_host_device_bootstrap.py checks that path from
examples/host-device.json).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.node_bootstrap_plan import (
    AzPlacement,
    HostDeviceEni,
    MultusInterface,
    NodeBootstrapProps,
)
from node_bootstrap import render_user_data
from testing_support.kernel_pods import ping_from
from testing_support.kernel_vpc import EniHotplug, in_netns
from testing_support.multus_node import MultusNode
from tests.dataplane.fixtures import AZ, CLUSTER, NETWORK, SUBNET_CIDR
from tests.dataplane.real_multus import Cluster, MultusPod

NODE = "node-hd"
HOST_DEVICE_NETWORK = "hd"
SLOTS = (0, 1)
STAGED = "var/lib/multus-eni/cni"


def interface_name(slot: int) -> str:
    return f"{HOST_DEVICE_NETWORK}{slot}"


def nad_name(slot: int) -> str:
    return f"{HOST_DEVICE_NETWORK}-{AZ}-{slot}"


@dataclass
class HostDeviceNode:
    """The node: its Multus, each slot's ENI (EC2's view) and its primary ENI (the pods' eth0
    addresses, the VPC CNI's part)."""

    multus: MultusNode
    enis: dict[int, dict[str, Any]]  # slot -> DescribeNetworkInterfaces entry
    primary_eni_id: str


def host_device_props(subnet_id: str, security_group: str) -> NodeBootstrapProps:
    """Two ENIs of the host-device network at device indexes 1 and 2, each with its NAD."""
    return NodeBootstrapProps(
        cluster_name=CLUSTER,
        interfaces=[
            MultusInterface(
                network=HOST_DEVICE_NETWORK,
                interface_name=interface_name(slot),
                device_index=slot + 1,
                security_group_ids=[security_group],
            )
            for slot in SLOTS
        ],
        placements={AZ: AzPlacement(subnet_ids=[subnet_id for _ in SLOTS])},
        host_device=[
            HostDeviceEni(AZ, interface_name(slot), slot + 1, nad_name(slot), SUBNET_CIDR)
            for slot in SLOTS
        ],
    )


@pytest.fixture(scope="module")
def host_device_node(cluster: Cluster) -> Iterator[HostDeviceNode]:
    plane = cluster.plane
    emulator, vpc = plane.vpc.emulator, plane.emulated_vpc
    ec2 = emulator.ec2
    props = host_device_props(vpc.multus_subnets[NETWORK, AZ], vpc.security_group_ids[NETWORK])
    instance = emulator.launch_instance(vpc, AZ, CLUSTER)
    root = Path(tempfile.mkdtemp(prefix=f"{NODE}-", dir=emulator.work_dir))
    kernel_node = plane.vpc.add_node(NODE, instance, root)
    with EniHotplug(plane.vpc):
        run = emulator.run_bootstrap(render_user_data(props), instance, root=root, netns=NODE)
    assert run.returncode == 0, run.output
    attached = ec2.describe_network_interfaces(
        Filters=[{"Name": "attachment.instance-id", "Values": [instance]}]
    )["NetworkInterfaces"]
    enis = {eni["Attachment"]["DeviceIndex"] - 1: eni for eni in attached}
    enis.pop(-1)  # the primary ENI
    multus = cluster.start_node(
        NODE,
        netns=NODE,
        pod_ips_dir=Path(tempfile.mkdtemp(prefix="no-agent-")),  # no pod IP agent here
        node_cni_configs=tuple(sorted((root / STAGED).glob("*.conf"))),
    )
    try:
        multus.wait_ready()
        for slot in SLOTS:
            cluster.node_local_attachment(nad_name(slot))
        yield HostDeviceNode(multus, enis, kernel_node.primary_eni_id)
    finally:
        multus.stop()
        del cluster.nodes[NODE]


def host_device_pod(cluster: Cluster, node: HostDeviceNode, name: str, slot: int) -> MultusPod:
    """A pod on the node asking for the slot's NAD, added through Multus (eth0, then net1)."""
    eth0 = cluster.next_eth0_address()
    cluster.plane.vpc.emulator.ec2.assign_private_ip_addresses(
        NetworkInterfaceId=node.primary_eni_id, PrivateIpAddresses=[eth0]
    )
    pod = cluster.pod_on(node.multus, name, eth0, nad_name(slot))
    pod.add()
    return pod


def link(namespace: str, name: str) -> dict[str, Any] | None:
    shown = in_netns(namespace, "ip", "-j", "address", "show", "dev", name, check=False)
    found = json.loads(shown.stdout) if shown.returncode == 0 else []
    return found[0] if found else None


def release(cluster: Cluster, pod: MultusPod) -> None:
    """DEL through Multus (host-device gives the ENI back), then the sandbox goes."""
    pod.delete()
    pod.remove()
    cluster.pods.remove(pod)


def test_each_pod_gets_a_whole_eni_and_reaches_a_pod_of_another_node_through_it(
    cluster: Cluster, host_device_node: HostDeviceNode
) -> None:
    node = host_device_node
    peer = cluster.pod("hd-peer", "node-a")
    peer.add()
    pods = [host_device_pod(cluster, node, f"hd-pod-{slot}", slot) for slot in SLOTS]
    try:
        cluster.plane.sync()
        for slot, pod in zip(SLOTS, pods, strict=True):
            eni = node.enis[slot]
            net1 = link(pod.name, "net1")
            assert net1 is not None, f"{pod.name} has no net1"
            # the ENI itself: its MAC, its primary address at the subnet's length, up
            assert net1["address"] == eni["MacAddress"].lower()
            addresses = [(a["local"], a["prefixlen"]) for a in net1["addr_info"]
                         if a["family"] == "inet"]  # fmt: skip
            assert addresses == [(eni["PrivateIpAddress"], 24)]
            assert "UP" in net1["flags"]
            # gone from the node, as a whole
            assert link(NODE, interface_name(slot)) is None
            # its packets leave through the ENI: the pod of node-a (ipvlan on multus1) and
            # the other host-device pod answer it
            assert ping_from(pod.name, peer.net1_address()), pod.name
            other = pods[1 - slot]
            assert ping_from(pod.name, node.enis[1 - slot]["PrivateIpAddress"]), other.name
        # and each answers at its own address, from across the VPC
        for slot, pod in zip(SLOTS, pods, strict=True):
            pod.serve_identity()
            answer = peer.ask(node.enis[slot]["PrivateIpAddress"])
            assert answer is not None and answer[0] == pod.name, answer
    finally:
        for pod in pods:
            release(cluster, pod)
        release(cluster, peer)
    # DEL gave each ENI back to the node under its own name, with its MAC
    for slot in SLOTS:
        back = link(NODE, interface_name(slot))
        assert back is not None, f"{interface_name(slot)} did not come back to the node"
        assert back["address"] == node.enis[slot]["MacAddress"].lower()
