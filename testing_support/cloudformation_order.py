"""The order in which CloudFormation creates, updates and deletes a stack's resources, derived
from the synthesized template alone, for every resource type alike.

CloudFormation's rule (CloudFormation user guide, "DependsOn attribute" and "Update behaviors
of stack resources"): a resource that names another (Ref, Fn::GetAtt, a ${} of Fn::Sub, or
DependsOn) is created after it and deleted before it; resources with no such path between them
are created, updated and deleted at once, in any order. An update walks the template in the
same order as a create; a replacement creates the new resource in that walk and deletes the old
one in the cleanup phase after every update, in reverse order. So whether B exists while A is
created, updated or deleted is one question: does A depend on B, directly or through others?

What it does not model: the stack order of cross-stack references (Fn::GetStackOutput and
Fn::ImportValue name another stack, which CDK deploys first and destroys last), Conditions (a
resource whose condition is false is still in the graph), and eventual consistency after a
resource reports complete (IAM's propagation delay is the handler's to absorb).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from testing_support.cloudformation_changes import sub_names

Template = Mapping[str, Any]


def named_resources(value: Any) -> Iterator[str]:
    """Logical IDs (or parameter names, or pseudo parameters) that a template fragment names
    through Ref, Fn::GetAtt or Fn::Sub; a name defined in Fn::Sub's own variable map is not a
    reference, ${!Literal} neither."""
    if isinstance(value, list):
        for item in value:
            yield from named_resources(item)
        return
    if not isinstance(value, dict):
        return
    if len(value) == 1:
        ((key, argument),) = value.items()
        if key == "Ref" and isinstance(argument, str):
            yield argument
            return
        if key == "Fn::GetAtt":
            target = argument.split(".", 1) if isinstance(argument, str) else argument
            yield str(target[0])
            return
        if key == "Fn::Sub":
            text, variables = (argument, {}) if isinstance(argument, str) else argument
            for name in sub_names(text):
                if name.split(".", 1)[0] not in variables:
                    yield name.split(".", 1)[0]
            yield from named_resources(variables)
            return
    for item in value.values():
        yield from named_resources(item)


@dataclass(frozen=True)
class StackOrder:
    """The dependency graph of one template and the order CloudFormation walks it in."""

    template: Template

    @property
    def resources(self) -> Mapping[str, Any]:
        return self.template.get("Resources", {})  # type: ignore[no-any-return]

    @cached_property
    def direct(self) -> dict[str, frozenset[str]]:
        """Each resource's direct dependencies: the resources it names or DependsOn names."""
        graph = {}
        for logical_id, resource in self.resources.items():
            depends_on = resource.get("DependsOn", [])
            named = set([depends_on] if isinstance(depends_on, str) else depends_on)
            named |= set(named_resources(resource.get("Properties", {})))
            graph[logical_id] = frozenset(named & set(self.resources) - {logical_id})
        return graph

    @cached_property
    def closure(self) -> dict[str, frozenset[str]]:
        """Each resource's dependencies, direct or through others."""
        found: dict[str, frozenset[str]] = {}
        for logical_id in self.creation_order:
            found[logical_id] = frozenset(
                self.direct[logical_id].union(*(found[d] for d in self.direct[logical_id]))
            )
        return found

    def depends_on(self, dependent: str, dependency: str) -> bool:
        """Whether CloudFormation creates and updates `dependency` before `dependent`, and
        deletes it after."""
        return dependency in self.closure[dependent]

    @cached_property
    def creation_waves(self) -> list[frozenset[str]]:
        """The resources CloudFormation may create at once, wave by wave: each wave's
        resources depend only on earlier waves. Fails on a circle, as CloudFormation does."""
        waves: list[frozenset[str]] = []
        done: set[str] = set()
        while len(done) < len(self.direct):
            wave = frozenset(r for r, deps in self.direct.items() if r not in done and deps <= done)
            if not wave:
                circle = sorted(set(self.direct) - done)
                raise ValueError(f"circular dependency between resources: {circle}")
            waves.append(wave)
            done |= wave
        return waves

    @cached_property
    def creation_order(self) -> list[str]:
        return [r for wave in self.creation_waves for r in sorted(wave)]

    @cached_property
    def deletion_waves(self) -> list[frozenset[str]]:
        """Deletion is the reverse walk: a resource goes once nothing that names it is left."""
        dependents: dict[str, set[str]] = {r: set() for r in self.direct}
        for logical_id, deps in self.direct.items():
            for dependency in deps:
                dependents[dependency].add(logical_id)
        waves: list[frozenset[str]] = []
        gone: set[str] = set()
        while len(gone) < len(self.direct):
            wave = frozenset(r for r in self.direct if r not in gone and dependents[r] <= gone)
            waves.append(wave)
            gone |= wave
        return waves
