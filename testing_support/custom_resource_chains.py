"""Which resources a custom resource's provider runs on, and whether CloudFormation keeps them
while it creates, updates and deletes the custom resource.

CloudFormation sends a custom resource's requests to its ServiceToken (CloudFormation user
guide, "Custom resources"); behind it a Lambda function may invoke others and start a state
machine (custom_resources.Provider: framework-onEvent invokes the user's onEvent handler and
starts the waiter state machine, which invokes framework-isComplete and framework-onTimeout,
and framework-isComplete the user's isComplete handler). Each of them acts with its execution
role, and that role's rights come from the role itself and from every AWS::IAM::Policy,
AWS::IAM::RolePolicy and AWS::IAM::ManagedPolicy that attaches to it. A policy the custom
resource does not depend on may be created after it is invoked and deleted while its delete is
still running (cloudformation_order: no path, no order).

The chain is read from the template: the ServiceToken's function, every function or state
machine that a chain member's properties or its role's policies name (environment variables,
state machine definitions, lambda:InvokeFunction and states:StartExecution resources), and the
roles and policies of each, and the EKS access entries that give a role its Kubernetes
rights. What it does not model: a provider reached through an SNS topic or
another stack's export (none of ours), and rights granted by resource policies (a function's
own Lambda permission is not a right its caller needs from IAM).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from testing_support.cloudformation_order import StackOrder, Template, named_resources

INVOKABLE = frozenset({"AWS::Lambda::Function", "AWS::StepFunctions::StateMachine"})
ATTACHED_POLICIES = frozenset(
    {"AWS::IAM::Policy", "AWS::IAM::RolePolicy", "AWS::IAM::ManagedPolicy"}
)
# What gives a role rights inside a cluster: an access entry naming it (EKS user guide, "Grant
# IAM users access to Kubernetes with EKS access entries").
ACCESS_ENTRY = "AWS::EKS::AccessEntry"
ROLE = "AWS::IAM::Role"


def is_custom_resource(resource_type: str) -> bool:
    return resource_type.startswith("Custom::") or resource_type == (
        "AWS::CloudFormation::CustomResource"
    )


@dataclass(frozen=True)
class ProviderChain:
    """A custom resource and what its provider runs on, by logical ID."""

    custom_resource: str
    invoked: frozenset[str]  # functions and state machines
    roles: frozenset[str]
    grants: frozenset[str]  # policies attached to the roles, access entries naming them

    @property
    def members(self) -> frozenset[str]:
        return self.invoked | self.roles | self.grants


def provider_chains(template: Template) -> list[ProviderChain]:
    resources = template.get("Resources", {})
    return [
        provider_chain(template, logical_id)
        for logical_id, resource in sorted(resources.items())
        if is_custom_resource(resource["Type"])
    ]


def provider_chain(template: Template, custom_resource: str) -> ProviderChain:
    resources = template["Resources"]
    token = resources[custom_resource]["Properties"]["ServiceToken"]
    pending = [r for r in named_resources(token) if _type(resources, r) in INVOKABLE]
    invoked: set[str] = set()
    roles: set[str] = set()
    grants: set[str] = set()
    while pending:
        member = pending.pop()
        if member in invoked:
            continue
        invoked.add(member)
        properties = resources[member].get("Properties", {})
        named = set(named_resources(properties))
        for role in [r for r in named if _type(resources, r) == ROLE]:
            roles.add(role)
            attached = set(_grants_of(resources, role))
            grants |= attached
            for policy in attached:
                named |= set(named_resources(resources[policy].get("Properties", {})))
        pending += [r for r in named if _type(resources, r) in INVOKABLE and r not in invoked]
    return ProviderChain(custom_resource, frozenset(invoked), frozenset(roles), frozenset(grants))


def _type(resources: Template, logical_id: str) -> str | None:
    resource = resources.get(logical_id)
    return resource["Type"] if resource else None


def _grants_of(resources: Template, role: str) -> Iterator[str]:
    """Policies that attach to the role (listed in their Roles, or naming it in RoleName) and
    access entries for it (naming it in PrincipalArn)."""
    for logical_id, resource in resources.items():
        if resource["Type"] not in ATTACHED_POLICIES | {ACCESS_ENTRY}:
            continue
        properties = resource.get("Properties", {})
        targets = [*properties.get("Roles", []), properties.get("RoleName")]
        targets.append(properties.get("PrincipalArn"))
        if role in set(named_resources(targets)):
            yield logical_id
    managed = resources[role].get("Properties", {}).get("ManagedPolicyArns", [])
    yield from (r for r in named_resources(managed) if _type(resources, r) in ATTACHED_POLICIES)


def unheld_chain_members(template: Template) -> dict[str, list[str]]:
    """Per custom resource, the members of its provider chain it does not depend on: those
    CloudFormation may create after invoking it, or delete while its delete runs."""
    order = StackOrder(template)
    found = {}
    for chain in provider_chains(template):
        missing = sorted(m for m in chain.members if not order.depends_on(chain.custom_resource, m))
        if missing:
            found[chain.custom_resource] = missing
    return found
