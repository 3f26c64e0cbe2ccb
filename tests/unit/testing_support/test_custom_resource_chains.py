"""The provider chain read from a template: from the ServiceToken through environment
variables, policies and state machine definitions to every function, role, policy and access
entry; what the custom resource does not depend on is reported."""

from __future__ import annotations

from typing import Any

from testing_support.custom_resource_chains import provider_chain, unheld_chain_members


def arn(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def function(role: str, **environment: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {"Role": arn(role), "Environment": {"Variables": environment}},
    }


def policy(role: str, *resources: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::IAM::Policy",
        "Properties": {
            "Roles": [{"Ref": role}],
            "PolicyDocument": {"Statement": [{"Action": "x:Y", "Resource": list(resources)}]},
        },
    }


ROLE = {"Type": "AWS::IAM::Role", "Properties": {}}


def provider_template(resource_depends_on: list[str]) -> dict[str, Any]:
    """A Provider with a waiter: framework onEvent -> user handler and state machine ->
    framework isComplete -> user isComplete; the isComplete role has an access entry."""
    return {
        "Resources": {
            "FrameworkRole": ROLE,
            "FrameworkPolicy": policy("FrameworkRole", arn("Handler"), {"Ref": "Waiter"}),
            "Framework": function("FrameworkRole", USER=arn("Handler"), WAITER={"Ref": "Waiter"}),
            "HandlerRole": ROLE,
            "Handler": function("HandlerRole"),
            "WaiterRole": ROLE,
            "WaiterPolicy": policy("WaiterRole", arn("FrameworkIsComplete")),
            "Waiter": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "RoleArn": arn("WaiterRole"),
                    "DefinitionString": {"Fn::Sub": "${FrameworkIsComplete.Arn}"},
                },
            },
            "FrameworkIsCompleteRole": ROLE,
            "FrameworkIsComplete": function("FrameworkIsCompleteRole", USER=arn("IsComplete")),
            "IsCompleteRole": ROLE,
            "IsCompletePolicy": policy("IsCompleteRole", "*"),
            "IsCompleteAccess": {
                "Type": "AWS::EKS::AccessEntry",
                "Properties": {"PrincipalArn": arn("IsCompleteRole")},
            },
            "IsComplete": function("IsCompleteRole"),
            "Unrelated": policy("HandlerRoleOfSomethingElse"),
            "Resource": {
                "Type": "Custom::Thing",
                "DependsOn": resource_depends_on,
                "Properties": {"ServiceToken": arn("Framework")},
            },
        }
    }


GRANTS = {"FrameworkPolicy", "WaiterPolicy", "IsCompletePolicy", "IsCompleteAccess"}


def test_the_chain_reaches_every_function_role_and_grant() -> None:
    chain = provider_chain(provider_template([]), "Resource")
    assert chain.invoked == {"Framework", "Handler", "Waiter", "FrameworkIsComplete", "IsComplete"}
    assert chain.roles == {
        "FrameworkRole",
        "HandlerRole",
        "WaiterRole",
        "FrameworkIsCompleteRole",
        "IsCompleteRole",
    }
    assert chain.grants == GRANTS


def test_grants_the_resource_does_not_depend_on_are_reported() -> None:
    # the ServiceToken alone holds the framework, its role, and through its environment the
    # functions and the state machine; no policy or access entry is named by anything
    assert unheld_chain_members(provider_template([])) == {"Resource": sorted(GRANTS)}
    assert unheld_chain_members(provider_template(sorted(GRANTS))) == {}
