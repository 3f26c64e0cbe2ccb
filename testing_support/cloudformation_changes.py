"""What CloudFormation would do to an app's stacks when one synth follows another.

Replacement follows CloudFormation's rule: an update replaces a resource when a property its
type's schema lists as createOnly changes (schemas from cfn-lint, i.e. the CloudFormation
registry). A property "changes" when its template text differs or when it refers to a resource
that is itself replaced (the new one has a new ID), also across stacks through
Fn::GetStackOutput and Fn::ImportValue. Custom resources are updated, never replaced by
CloudFormation: their handlers decide (reported as updated).

Cross-stack references are checked the way CloudFormation enforces them: an export another
stack imports may not change or disappear, and a weak reference (Fn::GetStackOutput) must name
an output the producing stack still has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

Template = Mapping[str, Any]
# Attributes that change when their resource is merely updated (a new version is created).
VOLATILE_ATTRIBUTES = frozenset({"LatestVersionNumber", "DefaultVersionNumber", "Version"})


@cache
def create_only_paths(resource_type: str, region: str = "us-east-1") -> tuple[tuple[str, ...], ...]:
    """createOnlyProperties of a resource type as key paths below Properties."""
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    return tuple(
        tuple(path.removeprefix("/properties/").split("/"))
        for path in schema.get("createOnlyProperties", [])
    )


def is_custom(resource_type: str) -> bool:
    return resource_type.startswith("Custom::") or resource_type == (
        "AWS::CloudFormation::CustomResource"
    )


@dataclass
class StackChanges:
    """How a stack changes between two synths: resources added, removed, replaced, updated."""

    added: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    replaced: dict[str, list[str]] = field(default_factory=dict)  # id -> createOnly paths hit
    updated: set[str] = field(default_factory=set)


@dataclass
class AppChanges:
    """Per stack name; `changed_outputs` per stack: outputs whose value changes."""

    stacks: dict[str, StackChanges]
    changed_outputs: dict[str, set[str]]

    def replaced(self, stack: str) -> set[str]:
        return set(self.stacks[stack].replaced)


# A reference found in a template: ("ref", id), ("getatt", id, attribute),
# ("output", stack name, output id) or ("import", export name).
Reference = tuple[str, ...]


def references(value: Any) -> Iterator[Reference]:
    """Every reference in a template fragment."""
    if isinstance(value, list):
        for item in value:
            yield from references(item)
    elif isinstance(value, dict):
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref" and isinstance(argument, str):
                yield ("ref", argument)
                return
            if key == "Fn::GetAtt":
                target = argument.split(".", 1) if isinstance(argument, str) else argument
                yield ("getatt", str(target[0]), str(target[1]))
                return
            if key == "Fn::GetStackOutput":
                yield ("output", argument["StackName"], argument["OutputName"])
                return
            if key == "Fn::ImportValue" and isinstance(argument, str):
                yield ("import", argument)
                return
            if key == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                for name in sub_names(text):
                    yield ("getatt", *name.split(".", 1)) if "." in name else ("ref", name)
        for item in value.values():
            yield from references(item)


def _qualified(stack: str, reference: Reference) -> Reference:
    """Refs and GetAtts mean something only within their stack."""
    return (stack, *reference) if reference[0] in ("ref", "getatt") else reference


def sub_names(text: str) -> Iterator[str]:
    """The names in a Fn::Sub string's ${...} (not ${!Literal})."""
    start = text.find("${")
    while start != -1:
        end = text.find("}", start)
        name = text[start + 2 : end]
        if not name.startswith("!"):
            yield name
        start = text.find("${", end)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _is_intrinsic(value: Mapping[str, Any]) -> bool:
    return len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))


def _differing_paths(
    before: Any, after: Any, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    if isinstance(before, dict) and isinstance(after, dict) and not _is_intrinsic(before):
        for key in set(before) | set(after):
            yield from _differing_paths(before.get(key), after.get(key), (*path, key))
    elif _canonical(before) != _canonical(after):
        yield path


def _paths_referring_to(
    stack: str, properties: Any, changed: set[Reference], path: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    """Property paths whose value refers to something whose value changes."""
    if isinstance(properties, dict) and not _is_intrinsic(properties):
        for key, value in properties.items():
            yield from _paths_referring_to(stack, value, changed, (*path, key))
    elif any(_qualified(stack, ref) in changed for ref in references(properties)):
        yield path


def _overlaps(path: tuple[str, ...], create_only: tuple[str, ...]) -> bool:
    shorter = min(len(path), len(create_only))
    return path[:shorter] == create_only[:shorter]


def compare(before: Mapping[str, Template], after: Mapping[str, Template]) -> AppChanges:
    """Changes of every stack (templates keyed by stack name) from `before` to `after`."""
    stacks = {name: StackChanges() for name in after}
    changed: set[Reference] = set()
    while True:
        for name, template in after.items():
            stacks[name] = _compare_stack(name, before.get(name, {}), template, changed)
        grown = _changed_references(before, after, stacks)
        if grown == changed:
            break
        changed = grown
    outputs: dict[str, set[str]] = {name: set() for name in after}
    for reference in changed:
        if reference[0] == "output":
            outputs[reference[1]].add(reference[2])
    return AppChanges(stacks, outputs)


def _compare_stack(
    name: str, before: Template, after: Template, changed: set[Reference]
) -> StackChanges:
    old, new = before.get("Resources", {}), after.get("Resources", {})
    changes = StackChanges(added=set(new) - set(old), removed=set(old) - set(new))
    for logical_id in set(old) & set(new):
        resource_type = new[logical_id]["Type"]
        if old[logical_id]["Type"] != resource_type:
            changes.replaced[logical_id] = ["Type"]
            continue
        properties = new[logical_id].get("Properties", {})
        paths = set(_differing_paths(old[logical_id].get("Properties", {}), properties))
        paths |= set(_paths_referring_to(name, properties, changed))
        if not paths:
            continue
        hits = (
            []
            if is_custom(resource_type)
            else sorted(
                {
                    "/".join(create_only)
                    for create_only in create_only_paths(resource_type)
                    for path in paths
                    if _overlaps(path, create_only)
                }
            )
        )
        if hits:
            changes.replaced[logical_id] = hits
        else:
            changes.updated.add(logical_id)
    return changes


def _changed_references(
    before: Mapping[str, Template], after: Mapping[str, Template], stacks: dict[str, StackChanges]
) -> set[Reference]:
    """References whose value differs: Refs and GetAtts of replaced resources, volatile
    attributes of updated ones, and outputs (and their exports) that name either or whose
    expression changed."""
    changed: set[Reference] = set()
    for name, changes in stacks.items():
        for logical_id in changes.replaced:
            changed.add((name, "ref", logical_id))
            for reference in references(after[name]):
                if reference[0] == "getatt" and reference[1] == logical_id:
                    changed.add((name, *reference))
        for logical_id in changes.updated:
            changed |= {(name, "getatt", logical_id, a) for a in VOLATILE_ATTRIBUTES}
    for name, template in after.items():
        old_outputs = before.get(name, {}).get("Outputs", {})
        for output_id, output in template.get("Outputs", {}).items():
            old = old_outputs.get(output_id)
            if (
                old is None
                or _canonical(old["Value"]) != _canonical(output["Value"])
                or any(_qualified(name, ref) in changed for ref in references(output["Value"]))
            ):
                changed.add(("output", name, output_id))
                if "Export" in output:
                    changed.add(("import", output["Export"]["Name"]))
    return changed


def reference_problems(before: Mapping[str, Template], after: Mapping[str, Template]) -> list[str]:
    """Cross-stack references that would make deploying `after` over `before` fail."""
    changes = compare(before, after)
    exports_after = {
        output["Export"]["Name"]: (stack, output_id)
        for stack, template in after.items()
        for output_id, output in template.get("Outputs", {}).items()
        if "Export" in output
    }
    problems = []
    for stack, template in before.items():
        imports = {
            ref[1] for ref in references(template.get("Resources", {})) if ref[0] == "import"
        }
        for name in sorted(imports):
            if name not in exports_after:
                problems.append(f"{stack} imports {name}, which the new templates no longer export")
            elif exports_after[name][1] in changes.changed_outputs[exports_after[name][0]]:
                problems.append(
                    f"{stack} imports {name}, whose value would change (it names a replaced or "
                    "changed resource): CloudFormation refuses to update an export in use"
                )
    for stack, template in after.items():
        reads = {ref[1:] for ref in references(template.get("Resources", {})) if ref[0] == "output"}
        for producer, output_id in sorted(reads):
            if output_id not in after.get(producer, {}).get("Outputs", {}):
                problems.append(f"{stack} reads output {output_id} of {producer}: not there")
    return problems
