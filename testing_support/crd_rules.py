"""The CEL rules of a CRD schema (x-kubernetes-validations) evaluated on an object, as the API
server does on create (Kubernetes, "CustomResourceDefinitions: Validation rules").

JSON Schema checks the structure; the rules carry what Karpenter refuses beyond it (restricted
label domains, a single alias term, requirement operators...). Transition rules (those naming
oldSelf) only run on updates and are left out here. Kubernetes' CEL libraries add `find` (regex
library) and `split` (strings library) to standard CEL, which celpy provides otherwise.

A stand-in, kept for the unit loop (milliseconds per chart variant, no Go, no box): it does not
model the API server's CEL cost limits, its other CEL libraries (quantity, IP, CIDR, format),
defaulting before validation, or transition rules. The cluster box's API server is the truth
for every object the apps apply (tests/cluster_box/test_admission.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELFunction


def _find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    found = re.search(str(pattern), str(text))
    return celtypes.StringType(found.group(0) if found else "")


def _split(text: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(separator)])


_KUBERNETES_FUNCTIONS: dict[str, CELFunction] = {"find": _find, "split": _split}


def rule_violations(value: Any, schema: Mapping[str, Any], path: str = "") -> Iterator[str]:
    """ "<path>: <message>" for every rule of `schema` (and the schemas below it) that `value`
    breaks; a rule that cannot be evaluated counts as broken, with its error."""
    environment = celpy.Environment()
    for rule in schema.get("x-kubernetes-validations", ()):
        expression = rule["rule"]
        if "oldSelf" in expression:
            continue
        program = environment.program(
            environment.compile(expression), functions=_KUBERNETES_FUNCTIONS
        )
        try:
            result = program.evaluate({"self": json_to_cel(value)})
        except Exception as error:  # celpy raises its own and Python's errors
            yield f"{path or '.'}: {expression!r} failed to evaluate: {error}"
            continue
        if result != celtypes.BoolType(True):
            yield f"{path or '.'}: {rule.get('message', expression)}"
    if isinstance(value, Mapping):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            below = properties.get(key) if key in properties else extra
            if isinstance(below, Mapping):
                yield from rule_violations(item, below, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            yield from rule_violations(item, schema["items"], f"{path}[{index}]")
