"""The ordering model on small templates: which expressions make a dependency (CloudFormation
user guide, "DependsOn attribute": Ref, Fn::GetAtt and Fn::Sub imply one), creation waves,
deletion as the reverse walk, and a circle refused."""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.cloudformation_order import StackOrder, named_resources


def template(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": {name: {"Type": "AWS::X::Y", **body} for name, body in resources.items()}}


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ({"Ref": "A"}, {"A"}),
        ({"Fn::GetAtt": ["A", "Arn"]}, {"A"}),
        ({"Fn::GetAtt": "A.Arn"}, {"A"}),
        ({"Fn::Sub": "arn:${A}:${B.Arn}:${!Literal}:${AWS::Region}"}, {"A", "B", "AWS::Region"}),
        # a name of Fn::Sub's own variable map is no reference; the map's values may be
        ({"Fn::Sub": ["${A}-${B}", {"A": {"Ref": "C"}}]}, {"B", "C"}),
        (
            {"Fn::Join": ["", [{"Ref": "A"}, {"Fn::Select": [0, {"Fn::GetAtt": ["B", "X"]}]}]]},
            {"A", "B"},
        ),
        ({"Fn::GetStackOutput": {"StackName": "s", "OutputName": "o"}}, set()),
    ],
)
def test_what_names_a_resource(expression: Any, named: set[str]) -> None:
    assert set(named_resources({"Key": expression})) == named


def test_dependencies_are_transitive_and_only_on_resources() -> None:
    order = StackOrder(
        template(
            A={},
            B={"Properties": {"X": {"Ref": "A"}, "Y": {"Ref": "AWS::Region"}}},
            C={"DependsOn": "B"},
            D={"DependsOn": ["A"]},
        )
    )
    assert order.direct["B"] == {"A"}
    assert order.depends_on("C", "A") and order.depends_on("C", "B")
    assert not order.depends_on("A", "C") and not order.depends_on("D", "B")


def test_independent_resources_are_created_at_once_and_deleted_in_reverse() -> None:
    order = StackOrder(
        template(
            Role={},
            Policy={"Properties": {"Roles": [{"Ref": "Role"}]}},
            Function={"Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}},
            Resource={"Properties": {"ServiceToken": {"Fn::GetAtt": ["Function", "Arn"]}}},
        )
    )
    assert order.creation_waves == [{"Role"}, {"Policy", "Function"}, {"Resource"}]
    # The policy goes in the first wave of the delete, beside the resource: nothing holds it.
    assert order.deletion_waves == [{"Resource", "Policy"}, {"Function"}, {"Role"}]


def test_a_circle_is_refused() -> None:
    order = StackOrder(template(A={"DependsOn": "B"}, B={"Properties": {"X": {"Ref": "A"}}}))
    with pytest.raises(ValueError, match="circular"):
        _ = order.creation_waves
