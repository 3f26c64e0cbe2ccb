"""Multus pods on different nodes exchanging packets over ipvlan l2 exactly when the VPC would
deliver them: the NAD's real chain (ipvlan, sbr, multus-pod-ip and its agent against the
emulated EC2), nodes set up by the real bootstrap, the fabric's rules from the emulator's ENIs.

Sources of the rules the fabric enforces: testing_support/vpc_fabric.py (EC2 User Guide,
"Multiple IP addresses"; VPC User Guide, "NAT instances" on the source/destination check, and
"Route tables" on the router). Of the chain: containernetworking/plugins plugins/meta/sbr
(doRoutes) and multus_pod_ips/cni_plugin.py (the subnet route it puts back). Each test also
shows the exchange failing when the piece it proves is missing.
"""

from __future__ import annotations

import ipaddress

from testing_support.kernel_pods import ping_from, with_static_ipam
from testing_support.kernel_vpc import in_netns
from tests.dataplane.fixtures import DataPlane, flush_neighbours

IPVLAN, SBR, POD_IP = 0, 1, 2  # positions in the NAD's chain


def test_pods_reach_each_other_only_while_both_addresses_are_assigned(plane: DataPlane) -> None:
    """The chain without multus-pod-ip leaves the address unassigned: no delivery. With it,
    the agent assigns the address to the node's ENI and the ping crosses; once the plugin's
    DEL releases it, the VPC stops delivering although the pod still has the address."""
    a = plane.pod("pod-a", "node-a", with_static_ipam(plane.network, "10.0.4.40"))
    b = plane.pod("pod-b", "node-b", with_static_ipam(plane.network, "10.0.4.41"))
    for pod in (a, b):
        pod.add(pod.plugins[:POD_IP])
    plane.sync()
    assert not a.ping("10.0.4.41")
    assert "10.0.4.41" not in plane.agent("node-b").addresses()

    for pod in (a, b):
        pod.add(pod.plugins[POD_IP:])
    plane.sync()
    assert "10.0.4.41" in plane.agent("node-b").addresses()
    assert a.ping("10.0.4.41")
    assert b.ping("10.0.4.40")

    b.delete(b.plugins[POD_IP:])
    plane.sync()
    assert "10.0.4.41" not in plane.agent("node-b").addresses()
    assert "10.0.4.41/24" in in_netns(b.name, "ip", "-br", "address", "show", "net1").stdout
    flush_neighbours(a.name)
    assert not a.ping("10.0.4.41")


def test_a_pod_that_moved_answers_on_its_new_node_and_not_the_old(plane: DataPlane) -> None:
    """The agent on the new node takes the address over (AllowReassignment): the VPC then
    delivers it there, even while a leftover of the pod on the old node still holds it, and
    that leftover's DEL does not take it back."""
    peer = plane.pod("peer", "node-b", with_static_ipam(plane.network, "10.0.4.45"))
    old = plane.pod("moving-old", "node-a", with_static_ipam(plane.network, "10.0.4.46"))
    for pod in (peer, old):
        pod.add()
    old.serve_identity()
    plane.sync()
    assert peer.ask("10.0.4.46") == ("moving-old", "10.0.4.45")

    new = plane.pod("moving-new", "node-c", with_static_ipam(plane.network, "10.0.4.46"))
    new.add()
    new.serve_identity()
    plane.sync()
    flush_neighbours(peer.name)
    assert peer.ask("10.0.4.46") == ("moving-new", "10.0.4.45")

    old.delete()
    plane.sync()
    assert "10.0.4.46" in plane.agent("node-c").addresses()
    flush_neighbours(peer.name)
    assert peer.ask("10.0.4.46") == ("moving-new", "10.0.4.45")


def test_an_unbound_connection_to_the_subnet_leaves_over_net1(plane: DataPlane) -> None:
    """The sbr question: sbr moves net1's routes out of the main table; multus-pod-ip puts the
    subnet back (mainTableSubnet), so a socket that does not bind reaches another Multus
    address over net1, from its net1 address. Without that route it would leave over eth0,
    from the pod's VPC CNI address."""
    client = plane.pod("client", "node-a", with_static_ipam(plane.network, "10.0.4.50"))
    server = plane.pod("server", "node-b", with_static_ipam(plane.network, "10.0.4.51"))
    for pod in (client, server):
        pod.add()
    server.serve_identity()
    plane.sync()
    assert "dev net1 src 10.0.4.50" in client.route_get("10.0.4.51")
    assert client.ask("10.0.4.51") == ("server", "10.0.4.50")

    ip_route = ("route", "del", "10.0.4.0/24", "dev", "net1", "table", "main")
    in_netns(client.name, "ip", *ip_route)
    assert "dev eth0" in client.route_get("10.0.4.51")
    assert client.ask("10.0.4.51") != ("server", "10.0.4.50")


def test_replies_to_a_node_vpc_cni_address_leave_over_net1(plane: DataPlane) -> None:
    """Node B's host (its VPC CNI / primary address, on the node subnet) reaches a pod's net1
    address through the VPC router; the reply follows sbr's table back over net1. A pod whose
    chain lacks sbr answers over eth0 instead, from an address the node's primary ENI does not
    hold: its source check drops the reply."""
    pod = plane.pod("answering", "node-a", with_static_ipam(plane.network, "10.0.4.55"))
    pod.add()
    without_sbr = plane.pod("no-sbr", "node-a", with_static_ipam(plane.network, "10.0.4.56"))
    without_sbr.add([without_sbr.plugins[IPVLAN], without_sbr.plugins[POD_IP]])
    plane.sync()
    node_b = plane.host("node-b")
    assert "dev net1" in pod.route_get(node_b.primary_address, "from", "10.0.4.55")
    assert ping_from(node_b.name, "10.0.4.55")

    assert "dev eth0" in without_sbr.route_get(node_b.primary_address, "from", "10.0.4.56")
    assert not ping_from(node_b.name, "10.0.4.56")


def test_node_prefix_addresses_are_reachable_with_no_ec2_call(plane: DataPlane) -> None:
    """node_prefix mode (docs/node-prefix-mode.md): the bootstrap asked EC2 for a /28 on the
    ENI and staged a node-local config whose host-local IPAM hands out the prefix's addresses.
    The VPC delivers every address of a delegated prefix (EC2 User Guide, "Prefix delegation
    for Amazon EC2 network interfaces"), so pods on two nodes reach each other with no EC2
    call per pod; an address of the reservation outside both nodes' prefixes is not."""
    a = plane.pod("prefix-a", "node-a", plane.node_prefix_config("node-a"))
    b = plane.pod("prefix-b", "node-b", plane.node_prefix_config("node-b"))
    proxy = plane.vpc.emulator.proxy
    proxy.reset()
    for pod in (a, b):
        pod.add()
    # Only the whereabouts network's agents call EC2 meanwhile (their periodic reads).
    assert {call.action for call in proxy.calls} <= {"DescribeNetworkInterfaces"}
    for pod, node in ((a, "node-a"), (b, "node-b")):
        (prefix,) = proxy.prefixes.of(plane.agent(node).enis["multus2"])
        assert ipaddress.ip_address(pod.net1_address) in ipaddress.ip_network(prefix)
    plane.sync()
    assert a.ping(b.net1_address, source=a.net1_address)
