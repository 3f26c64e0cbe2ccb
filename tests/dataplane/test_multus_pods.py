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

from tests.dataplane.fixtures import DataPlane, flush_neighbours
from testing_support.kernel_pods import with_static_ipam

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
    assert "10.0.4.41/24" in b.route_get("10.0.4.41") or b.net1_address == "10.0.4.41"
    flush_neighbours(a.name)
    assert not a.ping("10.0.4.41")
