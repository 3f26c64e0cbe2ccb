"""The real chain: Multus thick v4.1.4 reads the pod's NAD from the API server and runs its
delegates (the containernetworking plugins v1.9.1, Whereabouts v0.9.4 allocating from IPPool
objects, multus-pod-ip and its agent), all with the tokens of our service accounts, so our
RBAC is what they run with (tests/dataplane/real_multus.py plays kubelet and containerd).

Sources: Multus pkg/multus/multus.go (CmdAdd: the default network as eth0, then each network
of the pod's annotation as net1...; the network-status annotation written back to the Pod);
Whereabouts cmd/whereabouts.go (cmdAdd/cmdDel allocate and release in the IPPool) and
pkg/controlloop/pod.go (a deleted pod's allocation is garbage-collected)."""

from __future__ import annotations

import ipaddress

from config.network_plan import network_attachment_name
from multus_pod_ips import CNI_PLUGIN_TYPE
from testing_support.kernel_pods import ping_from
from testing_support.kernel_vpc import in_netns
from tests.dataplane.fixtures import AZ, PREFIX_NETWORK, SUBNET_CIDR
from tests.dataplane.real_multus import NAMESPACE, Cluster, wait_for


def test_multus_attaches_the_nad_and_whereabouts_leases_an_address_the_vpc_delivers(
    cluster: Cluster,
) -> None:
    a = cluster.pod("real-a", "node-a")
    b = cluster.pod("real-b", "node-b")
    for pod in (a, b):
        pod.add()
    address_a, address_b = a.net1_address(), b.net1_address()
    assert address_a != address_b
    assert all(
        ipaddress.ip_address(x) in ipaddress.ip_network(SUBNET_CIDR) for x in (address_a, address_b)
    )
    assert f"{NAMESPACE}/real-a" in cluster.allocations()
    assert address_a in in_netns(a.name, "ip", "-br", "address", "show", "net1").stdout
    cluster.plane.sync()
    assert address_b in cluster.plane.agent("node-b").addresses()
    assert ping_from(a.name, address_b)


def test_pods_reach_each_other_only_while_their_addresses_are_assigned(cluster: Cluster) -> None:
    """Pods of a NAD without multus-pod-ip have their net1 addresses, but nothing assigns them
    to the nodes' ENIs and the VPC delivers nothing. With it, the agent assigns each address
    and the ping crosses (the DEL side: the next test)."""
    chain = cluster.plane.network["plugins"]
    unassigned = cluster.attachment(
        "no-pod-ip",
        {**cluster.plane.network, "plugins": [p for p in chain if p["type"] != CNI_PLUGIN_TYPE]},
    )
    lone_a = cluster.pod("lone-a", "node-a", nad=unassigned)
    lone_b = cluster.pod("lone-b", "node-b", nad=unassigned)
    for pod in (lone_a, lone_b):
        pod.add()
    cluster.plane.sync()
    lone_address = lone_b.net1_address()
    assert lone_address in in_netns(lone_b.name, "ip", "-br", "address", "show", "net1").stdout
    assert lone_address not in cluster.plane.agent("node-b").addresses()
    assert not lone_a.ping(lone_address)

    a = cluster.pod("assigned-a", "node-a")
    b = cluster.pod("assigned-b", "node-b")
    for pod in (a, b):
        pod.add()
    cluster.plane.sync()
    assert b.net1_address() in cluster.plane.agent("node-b").addresses()
    assert a.ping(b.net1_address())
    assert b.ping(a.net1_address())


def test_del_releases_the_address_in_the_ip_pool(cluster: Cluster) -> None:
    pod = cluster.pod("real-del", "node-c")
    pod.add()
    address = pod.net1_address()
    assert f"{NAMESPACE}/real-del" in cluster.allocations()
    pod.delete()
    assert f"{NAMESPACE}/real-del" not in cluster.allocations()
    assert address not in cluster.plane.agent("node-c").addresses()


def test_the_control_loop_reclaims_the_address_of_a_pod_deleted_without_del(
    cluster: Cluster,
) -> None:
    pod = cluster.pod("real-gone", "node-a")
    pod.add()
    assert f"{NAMESPACE}/real-gone" in cluster.allocations()
    cluster.kubectl("delete", "pod", "-n", NAMESPACE, pod.name, "--grace-period=0", "--force")
    assert wait_for(lambda: f"{NAMESPACE}/real-gone" not in cluster.allocations(), timeout=120)
    # The runtime's sandbox clean-up: net1 and its address go with the namespace (the address
    # is free for Whereabouts to lease again, and ipvlan refuses one address twice on a master).
    pod.remove()


def test_an_unbound_connection_to_the_subnet_leaves_over_net1(cluster: Cluster) -> None:
    """The sbr question: sbr moves net1's routes out of the main table; multus-pod-ip puts the
    subnet back (mainTableSubnet), so a socket that does not bind reaches another Multus
    address over net1, from its net1 address. Without that route it would leave over eth0,
    from the pod's VPC CNI address."""
    client = cluster.pod("client", "node-a")
    server = cluster.pod("server", "node-b")
    for pod in (client, server):
        pod.add()
    client_address, server_address = client.net1_address(), server.net1_address()
    server.serve_identity()
    cluster.plane.sync()
    assert f"dev net1 src {client_address}" in client.route_get(server_address)
    assert client.ask(server_address) == ("server", client_address)

    ip_route = ("route", "del", SUBNET_CIDR, "dev", "net1", "table", "main")
    in_netns(client.name, "ip", *ip_route)
    assert "dev eth0" in client.route_get(server_address)
    assert client.ask(server_address) != ("server", client_address)


def test_replies_to_a_node_vpc_cni_address_leave_over_net1(cluster: Cluster) -> None:
    """Node B's host (its VPC CNI / primary address, on the node subnet) reaches a pod's net1
    address through the VPC router; the reply follows sbr's table back over net1. A pod whose
    NAD lacks sbr answers over eth0 instead, from an address the node's primary ENI does not
    hold: its source check drops the reply."""
    chain = cluster.plane.network["plugins"]
    without_sbr = cluster.attachment(
        "no-sbr", {**cluster.plane.network, "plugins": [p for p in chain if p["type"] != "sbr"]}
    )
    pod = cluster.pod("answering", "node-a")
    unrouted = cluster.pod("no-sbr", "node-a", nad=without_sbr)
    for each in (pod, unrouted):
        each.add()
    address, unrouted_address = pod.net1_address(), unrouted.net1_address()
    cluster.plane.sync()
    node_b = cluster.plane.host("node-b")
    assert "dev net1" in pod.route_get(node_b.primary_address, "from", address)
    assert ping_from(node_b.name, address)

    assert "dev eth0" in unrouted.route_get(node_b.primary_address, "from", unrouted_address)
    assert not ping_from(node_b.name, unrouted_address)


def test_node_prefix_addresses_are_reachable_with_no_ec2_call(cluster: Cluster) -> None:
    """node_prefix mode (docs/node-prefix-mode.md): the bootstrap asked EC2 for a /28 on the
    ENI and staged a node-local config whose host-local IPAM hands out the prefix's addresses;
    Multus takes it from the node for the NAD without a config. The VPC delivers every address
    of a delegated prefix (EC2 User Guide, "Prefix delegation for Amazon EC2 network
    interfaces"), so pods on two nodes reach each other with no EC2 call per pod."""
    nad = cluster.node_local_attachment(network_attachment_name(PREFIX_NETWORK, AZ))
    a = cluster.pod("prefix-a", "node-a", nad=nad)
    b = cluster.pod("prefix-b", "node-b", nad=nad)
    proxy = cluster.plane.vpc.emulator.proxy
    proxy.reset()
    for pod in (a, b):
        pod.add()
    # Only the whereabouts network's agents call EC2 meanwhile (their periodic reads).
    assert {call.action for call in proxy.calls} <= {"DescribeNetworkInterfaces"}
    for pod, node in ((a, "node-a"), (b, "node-b")):
        (prefix,) = proxy.prefixes.of(cluster.plane.agent(node).enis[PREFIX_NETWORK])
        assert ipaddress.ip_address(pod.net1_address()) in ipaddress.ip_network(prefix)
    cluster.plane.sync()
    assert a.ping(b.net1_address(), source=a.net1_address())
