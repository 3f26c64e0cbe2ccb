"""A node of its own for the dual-stack and routed NADs (test_dual_stack_and_routed_chains.py),
on the real chain like the data plane's nodes: Multus thick and Whereabouts' control loop
(testing_support/multus_node.py) against the cluster box, the NADs the chart renders applied to
the API, Whereabouts leasing from IPPools, and the pod IP agent assigning the leased addresses
to the node's ENIs in the emulated EC2. Only the network around the node is the tier's own:
each ENI's stand-in (a veth named as the bootstrap names the interface: ipvlan's master) is
cabled straight to one namespace playing the VPC router of both subnets, with hosts beyond it
on its loopback (the RAN's gNB, an address of another /64 of the VPC).

Why not a data-plane node: the VPC fabric (testing_support/vpc_fabric.py) models IPv4 only and
drops every IPv6 frame, its router knows no destination beyond the VPC, and the data plane's
multus2 is in node_prefix mode. Why a second emulated VPC: its multus2 is dual-stack, so the
node's ENI of that network lies in a subnet with a /64 (the NADs' IPv6 range is that /64's pod
range) and the agent assigns IPv6 addresses to it. The node's bootstrap runs in dry-host mode:
it makes and attaches the ENIs in EC2 and writes the node's records of them, which the agent
reads; the stand-ins take the interfaces' place.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from charts.nad_cni_configs import (
    Ipv6Range,
    NetworkAttachment,
    cni_config,
    whereabouts_range_and_gateway,
)
from config.path_mtu import VPC_MTU
from testing_support.kernel_vpc import SERVICES_HOST, ip
from testing_support.multus_emulator import AVAILABILITY_ZONES
from testing_support.multus_node import MultusNode
from testing_support.pod_ip_node import (
    EMULATOR_RANGES,
    PodIpNode,
    dual_stack_ranges,
    ipv6_pod_range,
    reserved_multus_vpc,
)
from tests.dataplane.fixtures import AZ, CLUSTER
from tests.dataplane.real_multus import Cluster, MultusPod

NODE, ROUTER = "segment-node", "segment-router"
#: The link that carries the node's API traffic (Multus, Whereabouts) to the root namespace,
#: where the API server's forwarder listens: TEST-NET-1, neither the VPC's nor the host link's.
API_LINK, API_LINK_ROOT, API_LINK_NODE = "api-segment", "192.0.2.1", "192.0.2.2"

ROUTED_NETWORK, DUAL_STACK_NETWORK = "multus1", "multus2"
# The subnets of the two networks in the first AZ (Ec2Emulator.create_multus_vpc's layout) and
# the reservations the agent's ranges start with (pod_ip_node.EMULATOR_RANGES).
ROUTED_SUBNET, ROUTED_RESERVATION = "10.0.4.0/24", EMULATOR_RANGES[ROUTED_NETWORK][0]
DUAL_STACK_SUBNET, DUAL_STACK_RESERVATION = "10.0.6.0/24", EMULATOR_RANGES[DUAL_STACK_NETWORK][0]
ROUTED_ROUTER, DUAL_STACK_ROUTER = "10.0.4.1", "10.0.6.1"
# A route to the RAN (multus.networks[].routes) and its gNB's stand-in on the router's loopback.
RAN_RANGE, GNB = "10.200.0.0/16", "10.200.0.10"

# The NADs of the segment's pods: the chart's configs for a dual-stack network, for one with
# routes and for one with both. Named apart from the data plane's (multus1-us-west-2a is the
# tier's NAD and multus2-us-west-2a its node_prefix one), as a second NAD of a network would be.
DUAL_STACK, DUAL_STACK_ROUTED, ROUTED = "dual-stack", "dual-stack-routed", "routed"


@dataclass
class Segment:
    """The node (its Multus and agent) and the IPv6 side of its dual-stack network; `pod`
    starts a pod on it, and `clear` tears down the ones started since the last clear."""

    cluster: Cluster
    node: MultusNode
    agent: PodIpNode
    ipv6: Ipv6Range  # multus2's /64, its pod range and its VPC router
    outside_the_64: str  # an address of another subnet's /64: beyond the VPC router
    started: list[MultusPod] = field(default_factory=list)

    def pod(self, name: str, nad: str) -> MultusPod:
        """A pod on the node asking for `nad`, added through Multus (eth0, then net1)."""
        pod = self.cluster.pod_on(self.node, name, self.cluster.next_eth0_address(), nad)
        self.started.append(pod)
        pod.add()
        return pod

    def clear(self) -> None:
        """What the kubelet does when the pods go: CNI DEL through Multus (Whereabouts releases
        the leases and the agent the addresses, so the next test's pods start from the same
        IPPools), then the sandbox and the Pod."""
        try:
            for pod in self.started:
                try:
                    pod.delete()
                finally:
                    pod.remove()
                    self.cluster.pods.remove(pod)
        finally:
            self.started.clear()


def attachments(ipv6: Ipv6Range) -> dict[str, dict[str, Any]]:
    """The chart's NAD configs (charts/nad_cni_configs.py, cni_config) by NAD name."""
    dual_stack_range, dual_stack_gateway = whereabouts_range_and_gateway(
        DUAL_STACK_SUBNET, DUAL_STACK_RESERVATION
    )
    routed_range, routed_gateway = whereabouts_range_and_gateway(ROUTED_SUBNET, ROUTED_RESERVATION)
    rendered = [
        NetworkAttachment(
            DUAL_STACK, DUAL_STACK_NETWORK, "l2", dual_stack_range, dual_stack_gateway, ipv6=ipv6
        ),
        NetworkAttachment(
            DUAL_STACK_ROUTED, DUAL_STACK_NETWORK, "l2", dual_stack_range, dual_stack_gateway,
            routes=(RAN_RANGE,), ipv6=ipv6,
        ),
        NetworkAttachment(
            ROUTED, ROUTED_NETWORK, "l2", routed_range, routed_gateway, routes=(RAN_RANGE,)
        ),
    ]  # fmt: skip
    return {attachment.name: cni_config(attachment) for attachment in rendered}


def cable(ipv6: Ipv6Range, outside_the_64: str) -> None:
    """The node's and the router's namespaces, the API link, each ENI's stand-in and what the
    router holds: each subnet's router address, and the hosts beyond it on its loopback."""
    for namespace in (NODE, ROUTER):
        ip("netns", "add", namespace)
        ip("-n", namespace, "link", "set", "lo", "up")
    ip("link", "add", API_LINK, "type", "veth", "peer", "name", "api0", "netns", NODE)
    ip("address", "add", f"{API_LINK_ROOT}/30", "dev", API_LINK)
    ip("link", "set", API_LINK, "up")
    ip("-n", NODE, "address", "add", f"{API_LINK_NODE}/30", "dev", "api0")
    ip("-n", NODE, "link", "set", "api0", "up")
    ip("-n", NODE, "route", "add", SERVICES_HOST, "via", API_LINK_ROOT)
    router_addresses = {
        ROUTED_NETWORK: [f"{ROUTED_ROUTER}/24"],
        DUAL_STACK_NETWORK: [f"{DUAL_STACK_ROUTER}/24", f"{ipv6.gateway}/64"],
    }
    for index, (interface, addresses) in enumerate(router_addresses.items(), start=1):
        lan = f"lan{index}"
        # The ENI has its network's MTU, as the node's .link gives it; ipvlan takes the NAD's,
        # which the kernel refuses above its master's.
        ip("-n", NODE, "link", "add", interface, "mtu", str(VPC_MTU), "type", "veth", "peer",
           "name", lan, "mtu", str(VPC_MTU), "netns", ROUTER)  # fmt: skip
        ip("-n", NODE, "link", "set", interface, "up")
        ip("-n", ROUTER, "link", "set", lan, "up")
        for address in addresses:
            # nodad: the router's address is usable at once (nothing else claims it here).
            ip("-n", ROUTER, "address", "add", address, "dev", lan, "nodad")
    for host in (f"{GNB}/32", f"{outside_the_64}/128"):
        ip("-n", ROUTER, "address", "add", host, "dev", "lo")


@pytest.fixture(scope="module")
def segment_node(cluster: Cluster) -> Iterator[Segment]:
    emulator = cluster.plane.vpc.emulator
    vpc = reserved_multus_vpc(emulator, dual_stack=(DUAL_STACK_NETWORK,))
    subnet_ipv6 = vpc.ipv6_subnet_cidrs[DUAL_STACK_NETWORK, AZ]
    pod_range = ipaddress.ip_network(ipv6_pod_range(subnet_ipv6))
    ipv6 = Ipv6Range(
        subnet_ipv6,
        str(pod_range.network_address),
        str(pod_range.broadcast_address),
        str(ipaddress.ip_network(subnet_ipv6).network_address + 1),  # the subnet's VPC router
    )
    other_64 = vpc.ipv6_subnet_cidrs[DUAL_STACK_NETWORK, AVAILABILITY_ZONES[1]]
    outside_the_64 = str(ipaddress.ip_network(other_64).network_address + 0x10)
    agent = PodIpNode.bootstrap(
        emulator,
        vpc,
        AZ,
        CLUSTER,
        netns_root="",  # the pods' namespaces are the real /run/netns ones
        interfaces={
            ROUTED_NETWORK: EMULATOR_RANGES[ROUTED_NETWORK],
            DUAL_STACK_NETWORK: dual_stack_ranges(vpc, DUAL_STACK_NETWORK),
        },
    )
    segment: Segment | None = None
    try:
        cable(ipv6, outside_the_64)
        # The node's /run/multus-pod-ips, bound into Multus' mount namespace as it starts: the
        # agent serves its socket there once it runs.
        agent.socket_path.parent.mkdir(parents=True, exist_ok=True)
        node = cluster.start_node(NODE, netns=NODE, pod_ips_dir=agent.socket_path.parent)
        for name, config in attachments(ipv6).items():
            cluster.attachment(name, config)
        node.wait_ready()
        # Only now: the agent exits when its first IMDS read takes over 5 s, as it did while
        # the daemons started (under TCG; this process forwards their API traffic and serves
        # the fake IMDS).
        agent.start_agent(wait_ready=False)
        agent.wait_ready(timeout=120)
        segment = Segment(cluster, node, agent, ipv6, outside_the_64)
        yield segment
    finally:
        if segment is not None:
            segment.clear()
        agent.stop_agent()
        if NODE in cluster.nodes:
            cluster.nodes.pop(NODE).stop()
        for namespace in (NODE, ROUTER):  # the veths go with them
            ip("netns", "del", namespace, check=False)


@pytest.fixture
def segment(segment_node: Segment) -> Iterator[Segment]:
    """The module's segment; the pods a test started are torn down after it."""
    yield segment_node
    segment_node.clear()
