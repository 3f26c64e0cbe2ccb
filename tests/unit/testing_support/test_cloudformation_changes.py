"""The change analysis on hand-made templates: replacement rules and cross-stack references."""

from __future__ import annotations

import copy
from typing import Any

from testing_support.cloudformation_changes import compare, reference_problems


def network(cidr: str, *, strong: bool) -> dict[str, Any]:
    output: dict[str, Any] = {"Value": {"Ref": "Subnet"}}
    if strong:
        output["Export"] = {"Name": "network:SubnetId"}
    return {
        "Resources": {
            "Subnet": {
                "Type": "AWS::EC2::Subnet",
                "Properties": {"VpcId": "vpc-1", "CidrBlock": cidr},
            },
            "Association": {
                "Type": "AWS::EC2::SubnetRouteTableAssociation",
                "Properties": {"SubnetId": {"Ref": "Subnet"}, "RouteTableId": "rtb-1"},
            },
            "Reservation": {
                "Type": "Custom::SubnetCidrReservation",
                "Properties": {"SubnetId": {"Ref": "Subnet"}, "Cidr": cidr},
            },
        },
        "Outputs": {"SubnetId": output},
    }


def consumer(strong: bool) -> dict[str, Any]:
    subnet = (
        {"Fn::ImportValue": "network:SubnetId"}
        if strong
        else {"Fn::GetStackOutput": {"StackName": "network", "OutputName": "SubnetId"}}
    )
    return {
        "Resources": {
            "Nodes": {
                "Type": "AWS::EKS::Nodegroup",
                "Properties": {"ClusterName": "c", "NodeRole": "r", "Subnets": [subnet]},
            },
            "Policy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {"PolicyName": "p", "PolicyDocument": {"Resource": subnet}},
            },
        }
    }


def app(cidr: str, *, strong: bool) -> dict[str, dict[str, Any]]:
    return {"network": network(cidr, strong=strong), "cluster": consumer(strong)}


def test_create_only_change_replaces_and_cascades_through_references() -> None:
    changes = compare(app("10.0.4.0/24", strong=False), app("10.0.12.0/24", strong=False))
    assert changes.stacks["network"].replaced == {
        "Subnet": ["CidrBlock"],
        "Association": ["SubnetId"],
    }
    assert changes.stacks["network"].updated == {"Reservation"}  # custom: the handler decides
    assert changes.changed_outputs["network"] == {"SubnetId"}
    # across stacks: Subnets is createOnly for a node group; a policy document is not
    assert changes.stacks["cluster"].replaced == {"Nodes": ["Subnets"]}
    assert changes.stacks["cluster"].updated == {"Policy"}


def test_an_unchanged_app_has_no_changes() -> None:
    changes = compare(app("10.0.4.0/24", strong=True), app("10.0.4.0/24", strong=True))
    assert all(
        not (c.added or c.removed or c.replaced or c.updated) for c in changes.stacks.values()
    )


def test_strong_reference_to_a_replaced_resource_blocks_the_update() -> None:
    problems = reference_problems(app("10.0.4.0/24", strong=True), app("10.0.12.0/24", strong=True))
    assert problems == [
        "cluster imports network:SubnetId, whose value would change (it names a replaced or "
        "changed resource): CloudFormation refuses to update an export in use"
    ]


def test_strong_reference_whose_export_disappears_blocks_the_update() -> None:
    after = app("10.0.4.0/24", strong=True)
    del after["network"]["Outputs"]["SubnetId"]["Export"]
    problems = reference_problems(app("10.0.4.0/24", strong=True), after)
    assert problems == [
        "cluster imports network:SubnetId, which the new templates no longer export"
    ]


def test_weak_reference_follows_the_replacement() -> None:
    assert (
        reference_problems(app("10.0.4.0/24", strong=False), app("10.0.12.0/24", strong=False))
        == []
    )


def test_weak_reference_to_a_missing_output_is_reported() -> None:
    after = copy.deepcopy(app("10.0.4.0/24", strong=False))
    del after["network"]["Outputs"]["SubnetId"]
    assert reference_problems(app("10.0.4.0/24", strong=False), after) == [
        "cluster reads output SubnetId of network: not there"
    ]
