"""Each documented day-2 change (docs/operations.md): two synths compared the way
CloudFormation would apply them. Replacements follow the resource schemas' createOnly
properties; the EKS cluster is never replaced; no cross-stack reference blocks the update."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stacks.network_digest import NETWORK_DIGEST_KEY, template_digest
from testing_support.cloudformation_changes import (
    AppChanges,
    compare,
    reference_problems,
    references,
)
from testing_support.cloudformation_order import StackOrder
from testing_support.custom_resource_chains import provider_chains
from tests.helpers import logical_id, only
from tests.unit.lifecycle.changes import (
    DAY2_CHANGES,
    DEFAULTS,
    NEW_NODE_SUBNET,
    ORIGINAL_AZS,
    THREE_AZS,
)
from tests.unit.lifecycle.synths import Templates, synth_templates
from tests.unit.stacks.test_cluster_workloads import by_kind

# Each day-2 change synthesizes its own before and after apps: out of make test-fast.
pytestmark = pytest.mark.examples

NETWORK, CLUSTER = "karpenterwithmultus-network", "karpenterwithmultus-cluster"
OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
# How each row of the Day-2 table in docs/operations.md begins -> the change synthesized here
DOCUMENTED_ROWS = {
    "bump `cluster.kubernetes_version`": "bump-kubernetes",
    "bump `karpenter.version`": "bump-karpenter",
    "add a network to `multus.networks`": "add-network",
    "change a `reservation`": "change-reservation",
    "add an AZ": "add-az",
    "remove the last AZ": "remove-az",
    "move a Multus subnet": "move-multus-subnet",
    "change a network's `security_group` rules": "change-security-group-rules",
    "add a route to a network's `routes`": "add-route",
    "make a network dual-stack": "make-network-dual-stack",
    "add a node pool to `node_pools`": "add-node-pool",
    "remove a node pool from `node_pools`": "remove-node-pool",
    "change a pool's instance sizes": "change-instance-sizes",
    "change a pool's `node_profile`": "change-node-profile",
    "turn `monitoring.prometheus_operator` on or off": "monitoring-on",
}
HASH_LENGTH = 8  # CDK appends an 8-character hash of the construct path to logical IDs

# change -> (stack, resource type, logical ID without its hash) of every replaced resource
EXPECTED_REPLACEMENTS: dict[str, set[tuple[str, str, str]]] = {
    # kubectl must match the API server: the layer of the new version replaces the old one.
    "bump-kubernetes": {(CLUSTER, "AWS::Lambda::LayerVersion", "EksKubectlLayer")},
    "bump-karpenter": set(),
    "add-network": set(),
    "change-instance-sizes": set(),
    "change-node-profile": set(),
    "monitoring-on": set(),
    # the reservation is a custom resource: CloudFormation updates it, its handler re-reserves
    "change-reservation": set(),
    # a managed node group's subnets are createOnly: a new system node group, then the old goes
    "add-az": {(CLUSTER, "AWS::EKS::Nodegroup", "SystemNodesNodegroup")},
    "remove-az": {(CLUSTER, "AWS::EKS::Nodegroup", "SystemNodesNodegroup")},
    # a subnet's CIDR is createOnly, and so is its route table association's subnet
    # rules are properties EC2 changes in place; the group and its ENIs stay
    "change-security-group-rules": set(),
    "add-route": set(),
    # the new pool's NodePool and EC2NodeClass are a new manifest, its DaemonSets join others
    "add-node-pool": set(),
    "remove-node-pool": set(),
    # a subnet's Ipv6CidrBlock is not createOnly (AWS::EC2::Subnet resource schema): EC2
    # associates the /64 with the subnet in place, so its ENIs and addresses stay
    "make-network-dual-stack": set(),
    "move-multus-subnet": {
        (NETWORK, "AWS::EC2::Subnet", "NetworkVpcmultus1Subnet2Subnet"),
        (
            NETWORK,
            "AWS::EC2::SubnetRouteTableAssociation",
            "NetworkVpcmultus1Subnet2RouteTableAssociation",
        ),
    },
}

# change -> resources that must be updated in place (what carries the change to the cluster).
# Each pool and each network has a manifest of its own (EksClusterkarpenternodepool<pool>,
# EksClusternetworkattachments<network>); the shared ones (EksClusterkarpenternodepool,
# EksClusternetworkattachments) are inventories that change when a pool's or network's objects
# are added, renamed or removed.
DEFAULT_POOL = (CLUSTER, "EksClusterkarpenternodepoolmultus")
NAD_INVENTORY = (CLUSTER, "EksClusternetworkattachments")
MULTUS1_NADS = (CLUSTER, "EksClusternetworkattachmentsmultus1")
MULTUS2_NADS = (CLUSTER, "EksClusternetworkattachmentsmultus2")
# what follows the AZ list: the NodePool's zones and user-data, the NADs (one more or one less
# per network, so the inventory too), the pod IP agent's ranges, the node ENI policy's subnets
# and the teardown Lambda's subnets
PER_AZ_UPDATES = {
    DEFAULT_POOL,
    NAD_INVENTORY,
    MULTUS1_NADS,
    MULTUS2_NADS,
    (CLUSTER, "EksClustermultuspodips"),
    (CLUSTER, "MultusEniPolicy"),
    (CLUSTER, "TeardownIsComplete"),
}
EXPECTED_UPDATES: dict[str, set[tuple[str, str]]] = {
    # the AMI check for the new version, the control plane, then the system node group (its
    # Version follows the cluster's), and kubectl with the new layer; kube-proxy and CoreDNS
    # move to the new minor's pinned builds (config/eks_addons.py: vpc-cni and the Pod
    # Identity agent are one build for every minor)
    "bump-kubernetes": {
        (CLUSTER, "AmiReleaseCheck"),
        (CLUSTER, "EksCluster"),
        (CLUSTER, "SystemNodesNodegroup"),
        (CLUSTER, "EksClusterKubectlProviderHandler"),
        (CLUSTER, "EksKubeProxy"),
        (CLUSTER, "EksCoreDns"),
    },
    "bump-karpenter": {(CLUSTER, "KarpenterCrds"), (CLUSTER, "KarpenterController")},
    # the new network's NADs are a manifest of their own (added), named in the inventory
    "add-network": {
        (CLUSTER, "KarpenterController"),  # reservedENIs
        DEFAULT_POOL,
        NAD_INVENTORY,
        (CLUSTER, "EksClustermultuspodips"),
        (CLUSTER, "MultusEniPolicy"),
    },
    "change-reservation": {
        (NETWORK, "CidrReservationsmultus1uswest2a"),
        MULTUS1_NADS,
        (CLUSTER, "EksClustermultuspodips"),
    },
    # the EKS cluster keeps its subnets (test below); the teardown's Lambda runs in every AZ
    # the new AZ's NADs are a manifest per network (added), so the networks' manifests stay
    "add-az": PER_AZ_UPDATES - {MULTUS1_NADS, MULTUS2_NADS},
    "remove-az": PER_AZ_UPDATES - {MULTUS1_NADS, MULTUS2_NADS},
    # the pool's requirements only
    "change-instance-sizes": {DEFAULT_POOL},
    # the pool's user-data (the profile's part); its NodeOverlay's manifest is removed
    "change-node-profile": {DEFAULT_POOL},
    # a manifest of its own is added; nothing else changes
    "monitoring-on": set(),
    "change-security-group-rules": {(NETWORK, "MultusSecurityGroup")},
    # the network's NADs (IPAM routes, mainTableRoutes and the transit gateway's MTU); the
    # routes themselves are new; the pools' user-data, whose ENI .link carries that MTU
    "add-route": {MULTUS1_NADS, DEFAULT_POOL},
    # the check reads the new pool's alias too; the pool's NodePool and EC2NodeClass are a
    # manifest of their own (added), named in the inventory; the cleartaints and pod IP agent
    # DaemonSets of its own join the existing manifests
    "add-node-pool": {
        (CLUSTER, "AmiReleaseCheck"),
        (CLUSTER, "EksClusterkarpenternodepool"),
        (CLUSTER, "EksClustercleartaints"),
        (CLUSTER, "EksClustermultuspodips"),
    },
    # the inventory no longer names the pool; its DaemonSets leave the manifests they are in
    "remove-node-pool": {
        (CLUSTER, "EksClusterkarpenternodepool"),
        (CLUSTER, "EksClustercleartaints"),
        (CLUSTER, "EksClustermultuspodips"),
    },
    # the network's subnets get their /64 and its group the IPv6 rules; the nodes' user-data
    # (an IPv6 address on the new ENIs), the NADs' and the agent's IPv6 ranges, and the node
    # ENI policy's IPv6 statement follow
    "make-network-dual-stack": {
        (NETWORK, "NetworkVpcmultus2Subnet1Subnet"),
        (NETWORK, "NetworkVpcmultus2Subnet2Subnet"),
        (NETWORK, "MultusSecurityGroupmultus2"),
        DEFAULT_POOL,
        MULTUS2_NADS,
        (CLUSTER, "EksClustermultuspodips"),
        (CLUSTER, "MultusEniPolicy"),
    },
    "move-multus-subnet": {
        (NETWORK, "CidrReservationsmultus1uswest2b"),
        DEFAULT_POOL,
        MULTUS1_NADS,
        (CLUSTER, "EksClustermultuspodips"),
        (CLUSTER, "MultusEniPolicy"),
    },
}
# change -> (stack, logical ID without its hash) of every added kubectl manifest
EXPECTED_ADDED_MANIFESTS: dict[str, set[tuple[str, str]]] = {
    "add-network": {(CLUSTER, "EksClusternetworkattachmentsmultus3")},
    "add-node-pool": {(CLUSTER, "EksClusterkarpenternodepoolcontrol")},
    # the third AZ's NADs, a manifest per network (charts/network_attachments.py)
    "add-az": {
        (CLUSTER, "EksClusternetworkattachmentsmultus1uswest2c"),
        (CLUSTER, "EksClusternetworkattachmentsmultus2uswest2c"),
    },
    "monitoring-on": {(CLUSTER, "EksClustermultuspodipsmonitoring")},
}


# change -> (stack, logical ID without its hash) of every removed resource
REMOVED_SUBNET_GROUPS = ("Public", "Nodes", "multus1", "multus2")
EXPECTED_REMOVALS: dict[str, set[tuple[str, str]]] = {
    # the pool's manifest: CloudFormation's Delete of it deletes its NodePool and EC2NodeClass
    "remove-node-pool": {(CLUSTER, "EksClusterkarpenternodepoolcontrol")},
    # the third AZ's subnets with their routes, its NAT gateway and its reservations
    "remove-az": {
        *(
            (NETWORK, f"NetworkVpc{group}Subnet3{part}")
            for group in REMOVED_SUBNET_GROUPS
            for part in ("Subnet", "RouteTable", "RouteTableAssociation", "DefaultRoute")
        ),
        (NETWORK, "NetworkVpcPublicSubnet3EIP"),
        (NETWORK, "NetworkVpcPublicSubnet3NATGateway"),
        (NETWORK, "CidrReservationsmultus1uswest2c"),
        (NETWORK, "CidrReservationsmultus2uswest2c"),
        # and its NADs' manifests: their Delete deletes them
        (CLUSTER, "EksClusternetworkattachmentsmultus1uswest2c"),
        (CLUSTER, "EksClusternetworkattachmentsmultus2uswest2c"),
    },
    "change-node-profile": {(CLUSTER, "EksClusterkarpenternodeoverlaymultus")},
}


Synth = Callable[[dict[str, Any]], Templates]


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Templates of a config, each config synthesized once per module."""
    synthesized: dict[str, Templates] = {}

    def templates(config: dict[str, Any]) -> Templates:
        key = json.dumps(config, sort_keys=True)
        if key not in synthesized:
            outdir = Path(tmp_path_factory.mktemp("synth"))
            synthesized[key] = synth_templates(outdir, config)
        return synthesized[key]

    return templates


@pytest.fixture(scope="module", params=sorted(DAY2_CHANGES))
def change(
    request: pytest.FixtureRequest, synth: Synth
) -> tuple[str, Templates, Templates, AppChanges]:
    name = str(request.param)
    before_config, after_config = DAY2_CHANGES[name]
    before, after = synth(before_config), synth(after_config)
    return name, before, after, compare(before, after)


def without_hash(logical_id: str) -> str:
    return logical_id[:-HASH_LENGTH]


def test_replaced_resources_are_exactly_the_expected_ones(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    name, before, _, changes = change
    replaced = {
        (stack, before[stack]["Resources"][logical_id]["Type"], without_hash(logical_id))
        for stack, stack_changes in changes.stacks.items()
        for logical_id in stack_changes.replaced
    }
    assert replaced == EXPECTED_REPLACEMENTS[name]


def test_the_change_reaches_the_cluster_through_updates(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    name, _, _, changes = change
    updated = {
        (stack, without_hash(logical_id))
        for stack, stack_changes in changes.stacks.items()
        for logical_id in stack_changes.updated
    }
    assert EXPECTED_UPDATES[name] <= updated


def test_added_manifests_are_exactly_the_expected_ones(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    """A new pool or network is a manifest of its own, so removing it later deletes it."""
    name, _, after, changes = change
    added = {
        (stack, without_hash(logical_id))
        for stack, stack_changes in changes.stacks.items()
        for logical_id in stack_changes.added
        if after[stack]["Resources"][logical_id]["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
    }
    assert added == EXPECTED_ADDED_MANIFESTS.get(name, set())


def test_the_eks_cluster_is_never_replaced_nor_removed(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    _, before, _, changes = change
    clusters = {
        logical_id
        for logical_id, resource in before[CLUSTER]["Resources"].items()
        if resource["Type"] == "AWS::EKS::Cluster"
    }
    assert len(clusters) == 1
    assert not clusters & (set(changes.stacks[CLUSTER].replaced) | changes.stacks[CLUSTER].removed)


def test_no_cross_stack_reference_blocks_the_update(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    _, before, after, _ = change
    assert reference_problems(before, after) == []


def test_removed_resources_are_exactly_the_expected_ones(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    """Only removing an AZ or a pool removes anything; every other change is additive."""
    name, _, _, changes = change
    removed = {
        (stack, without_hash(logical_id))
        for stack, stack_changes in changes.stacks.items()
        for logical_id in stack_changes.removed
    }
    assert removed == EXPECTED_REMOVALS.get(name, set())


def test_custom_resources_wait_for_what_the_change_does_to_their_provider(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    """CloudFormation updates in dependency order (cloudformation_order): each custom resource
    the change updates or adds depends on every member of its provider chain that the change
    adds, replaces or updates, so its request never runs on the old policy (the AMI check of a
    Kubernetes bump reads the new version's parameter only once its policy names it)."""
    _, _, after, changes = change
    for stack, template in after.items():
        stack_changes = changes.stacks[stack]
        changed = stack_changes.added | set(stack_changes.replaced) | stack_changes.updated
        order = StackOrder(template)
        for chain in provider_chains(template):
            if chain.custom_resource in changed:
                assert {
                    member
                    for member in chain.members & changed
                    if not order.depends_on(chain.custom_resource, member)
                } == set()


def test_a_bump_updates_the_ami_check_after_its_policy(synth: Synth) -> None:
    before, after = (synth(config) for config in DAY2_CHANGES["bump-kubernetes"])
    updated = compare(before, after).stacks[CLUSTER].updated
    check = logical_id(after[CLUSTER], "Custom::AmiReleaseCheck", "AmiReleaseCheck")
    policies = {lid for lid in updated if lid.startswith("AmiReleaseCheckHandlerinlinePolicy")}
    assert check in updated and len(policies) == 1
    assert all(StackOrder(after[CLUSTER]).depends_on(check, p) for p in policies)


def test_a_bump_moves_the_addons_after_the_control_plane_and_before_the_nodes(
    synth: Synth,
) -> None:
    """An add-on build of the new minor must not run against the old control plane; the
    system nodes roll onto the new kube-proxy, and CoreDNS follows them."""
    before, after = (synth(config) for config in DAY2_CHANGES["bump-kubernetes"])
    updated = compare(before, after).stacks[CLUSTER].updated
    order = StackOrder(after[CLUSTER])
    cluster = logical_id(after[CLUSTER], "AWS::EKS::Cluster", "EksCluster")
    nodes = logical_id(after[CLUSTER], "AWS::EKS::Nodegroup", "SystemNodes")
    kube_proxy = logical_id(after[CLUSTER], "AWS::EKS::Addon", "EksKubeProxy")
    core_dns = logical_id(after[CLUSTER], "AWS::EKS::Addon", "EksCoreDns")
    assert {kube_proxy, core_dns} <= set(updated)
    assert order.depends_on(kube_proxy, cluster) and order.depends_on(nodes, kube_proxy)
    assert order.depends_on(core_dns, nodes)


def test_a_new_node_pool_leaves_the_existing_pools_nodes_alone(synth: Synth) -> None:
    """Karpenter replaces a node when its NodePool's template or its EC2NodeClass drifts
    (Karpenter docs, Disruption, Drift): the existing pool's objects stay exactly as they were."""
    before, after = synth(DEFAULTS), synth(DAY2_CHANGES["add-node-pool"][1])
    for kind in ("NodePool", "EC2NodeClass"):
        old = {o["metadata"]["name"]: o for o in by_kind(before[CLUSTER], kind)}
        new = {o["metadata"]["name"]: o for o in by_kind(after[CLUSTER], kind)}
        assert set(new) == {"multus", "control"}
        assert new["multus"] == old["multus"]
    # and its manifest gets no request at all: CloudFormation leaves it as it is
    changes = compare(before, after).stacks[CLUSTER]
    pool_manifest = logical_id(
        after[CLUSTER], "Custom::AWSCDK-EKS-KubernetesResource", "EksClusterkarpenternodepoolmultus"
    )
    assert pool_manifest not in changes.updated | set(changes.replaced)


def cluster_subnets(templates: Templates) -> Any:
    return only(templates[CLUSTER], "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"][
        "SubnetIds"
    ]


def node_pool_zones(templates: Templates) -> list[str]:
    (pool,) = by_kind(templates[CLUSTER], "NodePool")
    return next(
        r["values"]
        for r in pool["spec"]["template"]["spec"]["requirements"]
        if r["key"] == "topology.kubernetes.io/zone"
    )


def test_an_added_az_reaches_the_nodes_but_not_the_control_plane(synth: Synth) -> None:
    """EKS user guide, "View Amazon EKS networking requirements for VPC and subnets": subnets
    added to a cluster must be in the AZs given when it was created (aws/containers-roadmap#2330,
    the request to lift that, is closed as a duplicate, not done), so an update that gives the
    AWS::EKS::Cluster a subnet in a new AZ fails at the EKS API. With
    control_plane_availability_zones left at the original AZs the cluster keeps exactly its
    subnets, while the NodePool, the system node group and the teardown's Lambda (which must
    reach nodes everywhere) get the new zone."""
    before, after = synth(DEFAULTS), synth(THREE_AZS)
    assert cluster_subnets(after) == cluster_subnets(before)
    changed = compare(before, after).stacks[CLUSTER]
    eks_cluster = logical_id(before[CLUSTER], "AWS::EKS::Cluster", "EksCluster")
    assert eks_cluster not in changed.updated | set(changed.replaced)
    assert len(cluster_subnets(before)) == len(ORIGINAL_AZS)
    assert node_pool_zones(before) == ORIGINAL_AZS
    assert node_pool_zones(after) == THREE_AZS["availability_zones"]
    node_group = only(after[CLUSTER], "AWS::EKS::Nodegroup")["Properties"]
    assert len(node_group["Subnets"]) == len(THREE_AZS["availability_zones"])
    teardown = after[CLUSTER]["Resources"][
        logical_id(after[CLUSTER], "AWS::Lambda::Function", "TeardownIsComplete")
    ]
    assert len(teardown["Properties"]["VpcConfig"]["SubnetIds"]) == 3


def test_removing_the_last_az_can_start_with_the_cluster_stack(synth: Synth) -> None:
    """The network stack deploys first and would delete the third AZ's subnets while the system
    node group, Karpenter's nodes and the teardown's Lambda ENIs are still in them (EC2 refuses
    to delete a subnet with network interfaces). docs/operations.md therefore deploys the
    cluster stack alone first: its new template may read only outputs the unchanged network
    stack already has, and afterwards nothing it uses is in the AZ that goes."""
    before, after = synth(THREE_AZS), synth(DEFAULTS)
    cluster_first = {NETWORK: before[NETWORK], CLUSTER: after[CLUSTER]}
    assert reference_problems(before, cluster_first) == []
    removed = compare(cluster_first, after).stacks[NETWORK].removed
    read = {
        reference[2]
        for reference in references(after[CLUSTER]["Resources"])
        if reference[0] == "output"
    }
    outputs = before[NETWORK]["Outputs"]
    assert not any(ref in removed for o in read for ref in _refs(outputs[o]["Value"]))
    assert node_pool_zones(after) == ORIGINAL_AZS


def _refs(value: Any) -> set[str]:
    return {reference[1] for reference in references(value) if reference[0] in ("ref", "getatt")}


def test_the_cluster_template_carries_the_digest_of_the_network_template(synth: Synth) -> None:
    templates = synth(DEFAULTS)
    digest = templates[CLUSTER]["Metadata"][NETWORK_DIGEST_KEY]
    assert digest == template_digest(templates[NETWORK])


def test_a_replaced_node_subnet_changes_the_cluster_template(synth: Synth) -> None:
    """CloudFormation template reference, Fn::GetStackOutput: a weak reference is resolved when
    the reading stack is created or updated, and the reader is not updated when the output
    changes. The CDK CLI skips a stack whose template, tags and parameters did not change
    (aws-cdk CLI 2.1148.1, deploy-stack canSkipDeploy: JSON.stringify of the synthesized
    template against the deployed one). A new node subnet CIDR replaces the subnet in the
    network stack while the cluster stack reads it only through Fn::GetStackOutput, whose text
    stays the same: only the network digest makes the cluster template differ, so `cdk deploy`
    does not skip it and CloudFormation resolves the new subnet ID."""
    before, after = synth(DEFAULTS), synth(NEW_NODE_SUBNET)
    replaced = compare(before, after).stacks[NETWORK].replaced
    assert any(without_hash(i) == "NetworkVpcNodesSubnet2Subnet" for i in replaced)
    assert json.dumps(before[CLUSTER]) != json.dumps(after[CLUSTER])

    def without_digest(template: dict[str, Any]) -> dict[str, Any]:
        metadata = {k: v for k, v in template["Metadata"].items() if k != NETWORK_DIGEST_KEY}
        return {**template, "Metadata": metadata}

    # the digest is what differs: the reads themselves look the same in both templates
    assert without_digest(before[CLUSTER]) == without_digest(after[CLUSTER])


def day2_table_rows() -> list[str]:
    """The first cell of every row of the Day-2 table in docs/operations.md."""
    section = OPERATIONS.read_text().split("## Day-2 changes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [row.split(" | ", 1)[0].removeprefix("| ") for row in rows[2:]]  # after the header


def test_every_row_of_the_day2_table_is_a_change_these_tests_synthesize() -> None:
    rows = day2_table_rows()
    named = [[c for p, c in DOCUMENTED_ROWS.items() if row.startswith(p)] for row in rows]
    assert all(len(changes) == 1 for changes in named), list(zip(rows, named, strict=True))
    assert sorted(c for (c,) in named) == sorted(DAY2_CHANGES)
