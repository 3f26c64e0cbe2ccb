"""A pod's address moving to another node, on the real Multus chain (tests/dataplane/
real_multus.py): Multus thick runs the tier's NAD, Whereabouts leases from its IPPool and its
control loop frees the lease of a Pod deleted without a CNI DEL, multus-pod-ip's agent assigns
the address on the new node's ENI in the emulated EC2, nodes set up by the real bootstrap, the
fabric's rules from the emulator's ENIs.

Sources of the rules the fabric enforces: testing_support/vpc_fabric.py (EC2 User Guide,
"Multiple IP addresses"; VPC User Guide, "NAT instances" on the source/destination check, and
"Route tables" on the router). Of the chain: Whereabouts pkg/allocate/allocate.go
(IterateForAssignment leases the lowest free address of the range; DeallocateIP releases only
the lease of the DEL's container ID) and pkg/controlloop/pod.go (a deleted Pod's lease is
garbage-collected by the control loop of its node); Multus pkg/multus/multus.go (CmdDel runs
the delegates it cached at ADD when the Pod is gone from the API); docs/multus-pod-ips.md,
"Moving pods" (ADD assigns with AllowReassignment; a stale node never takes an address back).
"""

from __future__ import annotations

from tests.dataplane.fixtures import flush_neighbours
from tests.dataplane.real_multus import NAMESPACE, Cluster, wait_for


def test_a_pod_that_moved_answers_on_its_new_node_and_not_the_old(cluster: Cluster) -> None:
    """The old node never tore the pod's sandbox down (its kubelet gone for a while): the Pod
    was deleted from the API, Whereabouts' control loop freed its address and leased it to
    the replacement on another node. The agent there takes the address over
    (AllowReassignment): the VPC then delivers it to the new node, even while the leftover on
    the old node still holds it, and the leftover's DEL, once it comes, takes back neither the
    ENI's address nor the lease."""
    peer = cluster.pod("peer", "node-b")
    old = cluster.pod("moving-old", "node-a")
    for pod in (peer, old):
        pod.add()
    address, peer_address = old.net1_address(), peer.net1_address()
    old.serve_identity()
    cluster.plane.sync()
    assert peer.ask(address) == ("moving-old", peer_address)

    cluster.kubectl("delete", "pod", "-n", NAMESPACE, old.name, "--grace-period=0", "--force")
    assert wait_for(lambda: f"{NAMESPACE}/moving-old" not in cluster.allocations(), timeout=120)
    new = cluster.pod("moving-new", "node-c")
    new.add()
    # The lowest free address of the range: no other lease ended since the old pod's ADD.
    assert new.net1_address() == address
    new.serve_identity()
    cluster.plane.sync()
    flush_neighbours(peer.name)
    assert peer.ask(address) == ("moving-new", peer_address)

    old.delete()
    cluster.plane.sync()
    assert address in cluster.plane.agent("node-c").addresses()
    assert f"{NAMESPACE}/moving-new" in cluster.allocations()
    flush_neighbours(peer.name)
    assert peer.ask(address) == ("moving-new", peer_address)
