"""The tier's fixtures inside the kernel VM: one emulated VPC as a kernel network, three nodes
bootstrapped by the real user-data script in their namespaces, each with its pod IP agent."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from charts.nad_cni_configs import NetworkAttachment, cni_config, whereabouts_range_and_gateway
from config.network_plan import network_attachment_name
from config.node_bootstrap_plan import NodePrefixNetwork
from node_bootstrap import render_user_data
from testing_support.kernel_vpc import (
    SERVICES_HOST,
    EniHotplug,
    KernelNode,
    KernelVpc,
    in_netns,
    services_link,
)
from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    Ec2Emulator,
    EmulatedVpc,
    running_emulator,
)
from testing_support.pod_ip_node import EMULATOR_RANGES, PodIpNode, pod_ip_vpc

CLUSTER = "dataplane"
AZ = AVAILABILITY_ZONES[0]
NODES = ("node-a", "node-b", "node-c")
NETWORK = "multus1"
PREFIX_NETWORK = "multus2"
SUBNET_CIDR = "10.0.4.0/24"  # multus1 in the first AZ (Ec2Emulator.create_multus_vpc)
#: The host, as the VM's host link shows it (testing_support/kernel_vm/README.md).
HOST = "203.0.113.2"
#: The port of the moto_server the host runs for the tier (tests/dataplane/conftest.py).
MOTO_PORT_VARIABLE = "MULTUS_DATAPLANE_MOTO_PORT"


@dataclass
class DataPlane:
    """The VPC in the kernel and its nodes (namespace + agent); the pods are the real Multus
    chain's (tests/dataplane/real_multus.py)."""

    vpc: KernelVpc
    nodes: dict[str, tuple[KernelNode, PodIpNode]]
    network: dict[str, Any]  # the rendered NAD config of multus1 in the AZ
    emulated_vpc: EmulatedVpc  # EC2's side: subnets and security groups by network

    def sync(self) -> None:
        self.vpc.sync()

    def host(self, node: str) -> KernelNode:
        return self.nodes[node][0]

    def agent(self, node: str) -> PodIpNode:
        return self.nodes[node][1]


def node_prefix_network(emulator: Ec2Emulator, vpc: EmulatedVpc, az: str) -> NodePrefixNetwork:
    """multus2 in node_prefix mode: a prefix reservation beside the agent's explicit one, one
    /28 per node (docs/node-prefix-mode.md)."""
    third_octet = 6 + AVAILABILITY_ZONES.index(az)  # Ec2Emulator.create_multus_vpc's layout
    reservation = f"10.0.{third_octet}.64/26"
    emulator.ec2.create_subnet_cidr_reservation(
        SubnetId=vpc.multus_subnets[PREFIX_NETWORK, az], Cidr=reservation, ReservationType="prefix"
    )
    return NodePrefixNetwork(
        availability_zone=az,
        interface_name=PREFIX_NETWORK,
        device_index=vpc.networks.index(PREFIX_NETWORK) + 1,
        prefix_count=1,
        cni_network_name=network_attachment_name(PREFIX_NETWORK, az),
        subnet_cidr=f"10.0.{third_octet}.0/24",
        reservation_cidr=reservation,
        ipvlan_mode="l2",
    )


def rendered_network() -> dict[str, Any]:
    """multus1's NAD config in the AZ as the chart renders it, over the emulator's subnet and
    the reservation the pod IP agent's ranges start with."""
    whereabouts_range, gateway = whereabouts_range_and_gateway(
        SUBNET_CIDR, EMULATOR_RANGES[NETWORK][0]
    )
    name = network_attachment_name(NETWORK, AZ)
    return cni_config(NetworkAttachment(name, NETWORK, "l2", whereabouts_range, gateway))


@pytest.fixture(scope="session")
def data_plane() -> Iterator[DataPlane]:
    # The VM's /dev is a bare devtmpfs; bash's process substitution (the bootstrap's log tee)
    # needs /dev/fd, which a host's udev or systemd links.
    if not Path("/dev/fd").exists():
        Path("/dev/fd").symlink_to("/proc/self/fd")
    services_link()
    moto_port = os.environ.get(MOTO_PORT_VARIABLE)
    moto_at = (HOST, int(moto_port)) if moto_port else None
    with running_emulator(host=SERVICES_HOST, moto_at=moto_at) as emulator:
        vpc = pod_ip_vpc(emulator)
        subnets = [vpc.private_subnets[AZ], *(vpc.multus_subnets[n, AZ] for n in vpc.networks)]
        kernel_vpc = KernelVpc(emulator, subnets)
        props = vpc.bootstrap_props(CLUSTER)
        node_prefix = [node_prefix_network(emulator, vpc, az) for az in AVAILABILITY_ZONES]
        user_data = render_user_data(replace(props, node_prefix=node_prefix))
        instances = {name: emulator.launch_instance(vpc, AZ, CLUSTER) for name in NODES}

        def bootstrap(name: str) -> tuple[KernelNode, PodIpNode]:
            root = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=emulator.work_dir))
            kernel_node = kernel_vpc.add_node(name, instances[name], root)
            run = emulator.run_bootstrap(user_data, instances[name], root=root, netns=name)
            agent = PodIpNode.bootstrapped(emulator, instances[name], run, netns_root="")
            agent.start_agent(wait_ready=False)
            return kernel_node, agent

        # One after the other: the VM has one vCPU, and under TCG parallel boots only make
        # each slower (past the script's curl timeouts).
        with EniHotplug(kernel_vpc):
            nodes = {name: bootstrap(name) for name in NODES}
        for _, agent in nodes.values():
            agent.wait_ready(timeout=120)
        try:
            yield DataPlane(kernel_vpc, nodes, rendered_network(), vpc)
        finally:
            for _, agent in nodes.values():  # all at once; stop_agent waits for each
                if agent.agent is not None:
                    agent.agent.terminate()
            for _, agent in nodes.values():
                agent.stop_agent()


def flush_neighbours(namespace: str) -> None:
    in_netns(namespace, "ip", "neigh", "flush", "all")
