"""A pod's address moving to another node, with the NAD's chain run by the tier itself
(testing_support/cni_chain.py, static IPAM at the same address on both nodes: Whereabouts would
lease the new pod another address; the real Multus chain's exchanges are in
test_real_multus.py): ipvlan, sbr, multus-pod-ip and its agent against the emulated EC2, nodes
set up by the real bootstrap, the fabric's rules from the emulator's ENIs.

Sources of the rules the fabric enforces: testing_support/vpc_fabric.py (EC2 User Guide,
"Multiple IP addresses"; VPC User Guide, "NAT instances" on the source/destination check, and
"Route tables" on the router). Of the chain: containernetworking/plugins plugins/meta/sbr
(doRoutes) and multus_pod_ips/cni_plugin.py (the subnet route it puts back). Each test also
shows the exchange failing when the piece it proves is missing.
"""

from __future__ import annotations

from testing_support.kernel_pods import with_static_ipam
from tests.dataplane.fixtures import DataPlane, flush_neighbours


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
