"""Each documented day-2 change (docs/operations.md): two synths compared the way
CloudFormation would apply them. Replacements follow the resource schemas' createOnly
properties; the EKS cluster is never replaced; no cross-stack reference blocks the update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testing_support.cloudformation_changes import AppChanges, compare, reference_problems
from tests.unit.lifecycle.changes import DAY2_CHANGES, DEFAULTS
from tests.unit.lifecycle.synths import Templates, synth_templates

NETWORK, CLUSTER = "karpenterwithmultus-network", "karpenterwithmultus-cluster"
HASH_LENGTH = 8  # CDK appends an 8-character hash of the construct path to logical IDs

# change -> (stack, resource type, logical ID without its hash) of every replaced resource
EXPECTED_REPLACEMENTS: dict[str, set[tuple[str, str, str]]] = {
    # kubectl must match the API server: the layer of the new version replaces the old one.
    "bump-kubernetes": {(CLUSTER, "AWS::Lambda::LayerVersion", "EksKubectlLayer")},
    "bump-karpenter": set(),
    "add-network": set(),
    # the reservation is a custom resource: CloudFormation updates it, its handler re-reserves
    "change-reservation": set(),
    # a managed node group's subnets are createOnly: a new system node group, then the old goes
    "add-az": {(CLUSTER, "AWS::EKS::Nodegroup", "SystemNodesNodegroup")},
    # a subnet's CIDR is createOnly, and so is its route table association's subnet
    "move-multus-subnet": {
        (NETWORK, "AWS::EC2::Subnet", "NetworkVpcmultus1Subnet2Subnet"),
        (
            NETWORK,
            "AWS::EC2::SubnetRouteTableAssociation",
            "NetworkVpcmultus1Subnet2RouteTableAssociation",
        ),
    },
}

# change -> resources that must be updated in place (what carries the change to the cluster)
EXPECTED_UPDATES: dict[str, set[tuple[str, str]]] = {
    # the control plane, then the system node group (its Version follows the cluster's)
    "bump-kubernetes": {(CLUSTER, "EksCluster"), (CLUSTER, "SystemNodesNodegroup")},
    "bump-karpenter": {(CLUSTER, "KarpenterCrds"), (CLUSTER, "KarpenterController")},
    "add-network": {(CLUSTER, "EksClusterkarpenternodepool"), (CLUSTER, "MultusEniPolicy")},
    "change-reservation": {
        (NETWORK, "CidrReservationsmultus1uswest2a"),
        (CLUSTER, "EksClusternetworkattachments"),
    },
    "add-az": {(CLUSTER, "EksCluster"), (CLUSTER, "EksClusterkarpenternodepool")},
    "move-multus-subnet": {
        (NETWORK, "CidrReservationsmultus1uswest2b"),
        (CLUSTER, "EksClusterkarpenternodepool"),
        (CLUSTER, "EksClusternetworkattachments"),
    },
}


@pytest.fixture(scope="module")
def defaults(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return synth_templates(tmp_path_factory.mktemp("defaults"), DEFAULTS)


@pytest.fixture(scope="module", params=sorted(DAY2_CHANGES))
def change(
    request: pytest.FixtureRequest, defaults: Templates, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Templates, Templates, AppChanges]:
    name = str(request.param)

    def synth(config: dict[str, Any], label: str) -> Templates:
        if config is DEFAULTS:
            return defaults
        return synth_templates(Path(tmp_path_factory.mktemp(f"{name}-{label}")), config)

    before_config, after_config = DAY2_CHANGES[name]
    before, after = synth(before_config, "before"), synth(after_config, "after")
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


def test_nothing_is_removed_by_an_additive_change(
    change: tuple[str, Templates, Templates, AppChanges],
) -> None:
    _, _, _, changes = change
    assert all(not stack_changes.removed for stack_changes in changes.stacks.values())
