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

from testing_support.kernel_pods import ping_from
from testing_support.kernel_vpc import in_netns
from tests.dataplane.fixtures import SUBNET_CIDR
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
