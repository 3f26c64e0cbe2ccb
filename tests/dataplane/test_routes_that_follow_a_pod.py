"""Routes that follow a pod (issue #37), in a real kernel: a host in a data network beyond the
VPC reaches a UE address through the UPF pod, before and after the pod moves to another node.

The UPF pod asks for the UE pool in its network annotation's cni-args; Multus merges them into
the NAD's plugins as args.cni (multus-cni pkg/types/conf.go, LoadDelegateNetConf ->
addCNIArgsInConfList), and the pod IP agent of the node where the pod gets its address points
the pool's route in the network's route tables at its own ENI (multus_pod_ips/agent/
pod_routes.py; EC2 API reference, CreateRoute / ReplaceRoute, `NetworkInterfaceId`). The VPC
then delivers the pool to that ENI (its source/dest check is off: the bootstrap's default) and
the kernel VPC's router forwards there what arrives from the data network
(testing_support/vpc_fabric.py and kernel_vpc.py: routes whose target is an ENI). On the node,
ipvlan hands a packet to the slave that holds its destination address, else to the host (Linux
drivers/net/ipvlan/ipvlan_core.c, ipvlan_handle_mode_l2 -> ipvlan_addr_lookup); the UPF holds
its UE addresses on a tun device, as real UPFs do, never on net1, so the UE pool reaches the
node's namespace, where the plugin routed it via the pod's eth0 (multus_pod_ips/cni_plugin.py,
"podNetworkInterface"; the VPC CNI's stand-in gives eth0 and its /32 host route). Its answers
leave over net1 from the UE address via the VPC router, the NAD's route to the data network
(mainTableRoutes); its ARP requests for the router name net1's own address (arp_announce 2,
set by the plugin), since ipvlan hands an ARP reply only to the slave holding its target.
The old node's DEL leaves the VPC's route (the agent never deletes one): until the new node's
ADD replaces it, the pool goes to the old node, where nothing routes it any more (its node
route went with the pod).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from charts.nad_cni_configs import NetworkAttachment, cni_config, whereabouts_range_and_gateway
from testing_support.kernel_pods import PodNamespace, ping_from
from testing_support.kernel_vpc import VPC_NAMESPACE, in_netns, ip
from testing_support.pod_ip_node import EMULATOR_RANGES
from tests.dataplane.fixtures import NETWORK, SUBNET_CIDR
from tests.dataplane.real_multus import NAMESPACE, Cluster, MultusPod

UE_POOL, UE = "10.45.0.0/16", "10.45.0.7"
#: The data network beyond the VPC (198.18.0.0/15, RFC 2544: neither the VPC's nor another
#: link's of the tier), its host, and the VPC router's side of the link to it.
DATA_NETWORK, DATA_NETWORK_ROUTER, DATA_NETWORK_HOST = "198.18.0.0/24", "198.18.0.1", "198.18.0.10"
DN_HOST, DN_LINK = "dn-host", "dn0"
UPF_NAD = "upf-n6"
UPF_TUN = "upf-tun"
MOVING_NODES = ("node-a", "node-b")
#: multus1's subnets in both AZs (Ec2Emulator.create_multus_vpc's layout): a table each.
NETWORK_SUBNETS = (SUBNET_CIDR, "10.0.5.0/24")


def upf_attachment() -> dict[str, object]:
    """The chart's NAD of a network with pod_routed_ranges and a route to the data network."""
    whereabouts_range, gateway = whereabouts_range_and_gateway(
        SUBNET_CIDR, EMULATOR_RANGES[NETWORK][0]
    )
    return cni_config(
        NetworkAttachment(
            UPF_NAD, NETWORK, "l2", whereabouts_range, gateway,
            routes=(DATA_NETWORK,), pod_routed_ranges=(UE_POOL,),
        )
    )  # fmt: skip


def asking_for_the_pool() -> str:
    """The pod's network annotation, asking for the UE pool in cni-args."""
    selection = {
        "name": UPF_NAD,
        "namespace": NAMESPACE,
        "cni-args": {"podRoutedRanges": [UE_POOL]},
    }
    return json.dumps([selection])


@pytest.fixture(scope="module")
def route_tables(cluster: Cluster) -> Iterator[list[str]]:
    """multus1's route tables (one per subnet, as the network stack makes them), the UE pool
    in the agents' configuration of the nodes the UPF moves between, the NAD, and the data
    network: a host namespace linked to the VPC router (as a gateway attachment would be)."""
    plane = cluster.plane
    ec2 = plane.vpc.emulator.ec2
    (vpc_id,) = {
        s["VpcId"] for s in ec2.describe_subnets(SubnetIds=list(plane.vpc.subnet_ids))["Subnets"]
    }
    subnets = ec2.describe_subnets(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "cidr-block", "Values": list(NETWORK_SUBNETS)},
        ]
    )["Subnets"]
    tables = []
    for subnet in sorted(subnets, key=lambda s: s["CidrBlock"]):
        table = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=table, SubnetId=subnet["SubnetId"])
        tables.append(table)
    restart_agents(cluster, {NETWORK: [UE_POOL]}, {NETWORK: tables})
    cluster.attachment(UPF_NAD, upf_attachment())
    # The UPF's tun device: the VM's bare devtmpfs gets /dev/net/tun when the module registers.
    subprocess.run(["modprobe", "tun"], check=True, timeout=60)
    ip("netns", "add", DN_HOST)
    try:
        ip("link", "add", DN_LINK, "netns", VPC_NAMESPACE, "type", "veth", "peer", "name",
           "eth0", "netns", DN_HOST)  # fmt: skip
        ip("-n", VPC_NAMESPACE, "address", "add", f"{DATA_NETWORK_ROUTER}/24", "dev", DN_LINK)
        ip("-n", VPC_NAMESPACE, "link", "set", DN_LINK, "up")
        ip("-n", DN_HOST, "address", "add", f"{DATA_NETWORK_HOST}/24", "dev", "eth0")
        ip("-n", DN_HOST, "link", "set", "eth0", "up")
        ip("-n", DN_HOST, "link", "set", "lo", "up")
        ip("-n", DN_HOST, "route", "add", "default", "via", DATA_NETWORK_ROUTER)
        yield tables
    finally:
        ip("netns", "del", DN_HOST, check=False)  # dn0 goes with its peer
        for table in tables:
            if routes_of(cluster, table):
                ec2.delete_route(RouteTableId=table, DestinationCidrBlock=UE_POOL)
        restart_agents(cluster, {}, {})
        plane.sync()


def restart_agents(
    cluster: Cluster, ranges: dict[str, list[str]], tables: dict[str, list[str]]
) -> None:
    """The agents of MOVING_NODES with these pod-routed ranges and route tables (the agent's
    configuration file, which a new ConfigMap rolls out)."""
    for name in MOVING_NODES:
        agent = cluster.plane.agent(name)
        agent.stop_agent()
        agent.routed_ranges, agent.route_tables = ranges, tables
        agent.start_agent(wait_ready=False)
        agent.wait_ready(timeout=120)


def routes_of(cluster: Cluster, table: str) -> list[str]:
    """The ENI each route of the UE pool in `table` targets (EC2's DescribeRouteTables)."""
    ec2 = cluster.plane.vpc.emulator.ec2
    (described,) = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"]
    return [
        str(route.get("NetworkInterfaceId"))
        for route in described["Routes"]
        if route.get("DestinationCidrBlock") == UE_POOL
    ]


def start_upf(cluster: Cluster, name: str, node: str) -> MultusPod:
    """The UPF pod on `node`, asking for the pool, holding the UE address on its tun device
    (no process behind it: the kernel answers for a local address all the same) and serving
    its identity."""
    pod = cluster.pod(name, node, nad=asking_for_the_pool())
    pod.add()
    in_netns(pod.name, "ip", "tuntap", "add", UPF_TUN, "mode", "tun")
    in_netns(pod.name, "ip", "address", "add", f"{UE}/32", "dev", UPF_TUN)
    in_netns(pod.name, "ip", "link", "set", UPF_TUN, "up")
    pod.serve_identity()
    return pod


def eth0_address(pod: MultusPod) -> str:
    """The pod's eth0 address (the VPC CNI stand-in's)."""
    shown = in_netns(pod.name, "ip", "-4", "-o", "address", "show", "dev", "eth0").stdout.split()
    return shown[shown.index("inet") + 1].split("/")[0]


def node_route(cluster: Cluster, node: str) -> str:
    """The node's route of the UE pool (`ip route show`), empty without one."""
    return in_netns(cluster.nodes[node].netns, "ip", "route", "show", UE_POOL).stdout.strip()


def reaches_the_ue(expected_pod: str) -> bool:
    """Whether the data network host gets echo replies from the UE address, and the pod
    answering UDP there is `expected_pod`."""
    if not ping_from(DN_HOST, UE, count=3):
        return False
    answer = PodNamespace(DN_HOST).ask(UE)
    return answer is not None and answer[0] == expected_pod


def path_to_the_ue(cluster: Cluster, pod: MultusPod) -> str:
    """What a failed reach shows: the router's route and neighbours, the fabric's ENI routes,
    the pod's addresses and routes, the UDP answer."""
    fabric = cluster.plane.vpc.fabric()
    shown = [
        f"fabric routes: {[s.delivered_routes for s in fabric.subnets]}",
        f"table routes: {[(s.subnet_id, s.routes) for s in fabric.subnets]}",
        f"checks: {[(e.eni_id, e.source_dest_check) for s in fabric.subnets for e in s.enis]}",
        f"ask: {PodNamespace(DN_HOST).ask(UE)}",
    ]
    for namespace, command in (
        (VPC_NAMESPACE, "ip route get " + UE),
        (VPC_NAMESPACE, "ip neigh"),
        (VPC_NAMESPACE, "ip route"),
        (pod.name, "ip address"),
        (pod.name, "ip route"),
        (pod.name, "ip rule"),
        (pod.node.netns, "ip route"),
        (DN_HOST, f"ping -c 2 -W 2 {UE}"),
    ):
        done = in_netns(namespace, *command.split(), check=False)
        shown.append(f"{namespace}: {command}:\n{done.stdout}{done.stderr}")
    return "\n".join(shown)


def test_a_data_network_host_reaches_the_ue_address_through_the_upf_pod_as_it_moves(
    cluster: Cluster, route_tables: list[str]
) -> None:
    plane = cluster.plane
    eni = {name: plane.agent(name).enis[NETWORK] for name in MOVING_NODES}
    plane.sync()
    # Before any UPF: no route for the pool, so the VPC router has nowhere to send it.
    assert [routes_of(cluster, table) for table in route_tables] == [[], []]
    assert not ping_from(DN_HOST, UE)

    upf_a = start_upf(cluster, "upf-a", "node-a")
    assert [routes_of(cluster, table) for table in route_tables] == [[eni["node-a"]]] * 2
    # net1 holds only the pod's own address; the node routes the pool into the pod over eth0
    assert UE not in in_netns(upf_a.name, "ip", "-4", "address", "show", "dev", "net1").stdout
    assert f"via {eth0_address(upf_a)} dev " in node_route(cluster, "node-a")
    # its ARP requests on net1 name net1's address, whose replies ipvlan hands to the pod
    # (answers leave from the UE address, which no slave holds)
    arp_announce = in_netns(upf_a.name, "sysctl", "-n", "net.ipv4.conf.net1.arp_announce")
    assert arp_announce.stdout.strip() == "2"
    plane.sync()
    assert reaches_the_ue("upf-a"), path_to_the_ue(cluster, upf_a)

    # The pod moves: its sandbox on node-a goes (DEL through Multus: the route stays), ...
    upf_a.delete()
    upf_a.remove()
    cluster.pods.remove(upf_a)
    plane.sync()
    assert [routes_of(cluster, table) for table in route_tables] == [[eni["node-a"]]] * 2
    # ... so the pool still goes to node-a, which no longer routes it (the pod's veth went).
    assert node_route(cluster, "node-a") == ""
    assert not ping_from(DN_HOST, UE)

    upf_b = start_upf(cluster, "upf-b", "node-b")
    try:
        assert [routes_of(cluster, table) for table in route_tables] == [[eni["node-b"]]] * 2
        plane.sync()
        assert reaches_the_ue("upf-b"), path_to_the_ue(cluster, upf_b)
    finally:
        upf_b.delete()
        upf_b.remove()
        cluster.pods.remove(upf_b)
