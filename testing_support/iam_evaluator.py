"""A small IAM policy evaluator: would these identity-policy statements allow this request?

Enough of IAM's evaluation logic to judge the calls our code makes against the statements we
synthesize: a request is one action on one or more resources (each an ARN with the condition
keys IAM sets for it, e.g. aws:ResourceTag/<key>) plus the request's own context
(aws:RequestTag/<key>, aws:TagKeys, aws:RequestedRegion, ec2:SourceInstanceARN, ...). IAM allows
it when no statement denies it and, for every resource, some statement allows the action on
that resource. Modelled: Allow/Deny, Action and Resource wildcards (* and ?), policy variables
(${key}) in Resource and condition values, the operators StringEquals, StringNotEquals,
StringLike, StringNotLike, StringEqualsIgnoreCase, ArnEquals, ArnLike, ArnNotEquals,
ArnNotLike, Bool and Null, and the ForAllValues:/ForAnyValue: qualifiers on multi-valued keys
(aws:TagKeys).

Not modelled (each would only change results for policies we do not write): NotAction,
NotResource and NotPrincipal (refused, not guessed); the ...IfExists suffix and numeric, date,
IP and binary operators (refused); resource-based policies, permission boundaries, session
policies and SCPs; AWS managed policies attached to a role (their text is not in the template;
they contain no Deny, so they can only add permissions: a call our own statements allow stays
allowed); case-insensitive matching of condition key names beyond lower-casing; and which
optional resource types a service adds to a request: the caller states them (see
testing_support/ec2_iam_requests.py for EC2).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ContextValue = str | Sequence[str]


@dataclass(frozen=True)
class RequestedResource:
    """One resource of a request: its ARN and the condition keys IAM sets for it."""

    arn: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)


@dataclass(frozen=True)
class AuthorizationRequest:
    """What IAM evaluates for one API call (or one implied authorization, such as the
    ec2:CreateTags that tagging on create adds)."""

    action: str
    resources: Sequence[RequestedResource]
    context: Mapping[str, ContextValue] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.action} on {[r.arn for r in self.resources]}"


@dataclass(frozen=True)
class Decision:
    """Whether a request is allowed, and why."""

    allowed: bool
    reason: str


class UnsupportedPolicy(ValueError):
    """A statement uses policy grammar this evaluator does not model."""


def evaluate(statements: Sequence[Mapping[str, Any]], request: AuthorizationRequest) -> Decision:
    """IAM's decision for the request under these (resolved) identity-policy statements."""
    for resource in request.resources:
        context = _context(request, resource)
        for statement in statements:
            if statement["Effect"] == "Deny" and _applies(
                statement, request.action, resource, context
            ):
                return Decision(
                    False, f"{statement.get('Sid', 'a statement')} denies it on {resource.arn}"
                )
    for resource in request.resources:
        context = _context(request, resource)
        if not any(
            statement["Effect"] == "Allow"
            and _applies(statement, request.action, resource, context)
            for statement in statements
        ):
            return Decision(False, f"no statement allows {request.action} on {resource.arn}")
    return Decision(True, "allowed")


def _context(request: AuthorizationRequest, resource: RequestedResource) -> dict[str, ContextValue]:
    return {key.lower(): value for key, value in {**request.context, **resource.context}.items()}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _applies(
    statement: Mapping[str, Any],
    action: str,
    resource: RequestedResource,
    context: Mapping[str, ContextValue],
) -> bool:
    for unsupported in ("NotAction", "NotResource", "NotPrincipal"):
        if unsupported in statement:
            raise UnsupportedPolicy(f"{unsupported} is not modelled")
    if not any(
        _glob(str(pattern), action, ignore_case=True) for pattern in _as_list(statement["Action"])
    ):
        return False
    if not any(
        _glob(_substitute(str(pattern), context), resource.arn)
        for pattern in _as_list(statement["Resource"])
    ):
        return False
    return all(
        _condition(operator, key, _as_list(values), context)
        for operator, pairs in statement.get("Condition", {}).items()
        for key, values in pairs.items()
    )


def _glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    return bool(re.fullmatch(fnmatch.translate(pattern), value, flags=re.DOTALL))


_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _substitute(text: str, context: Mapping[str, ContextValue]) -> str:
    """Policy variables take the request's value; a missing or multi-valued key makes the text
    match nothing (IAM treats such a variable as not matching)."""

    def replace(match: re.Match[str]) -> str:
        value = context.get(match.group(1).lower())
        return value if isinstance(value, str) else "\x00unresolved\x00"

    return _VARIABLE.sub(replace, text)


_MATCHERS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda policy, actual: policy == actual,
    "StringNotEquals": lambda policy, actual: policy != actual,
    "StringEqualsIgnoreCase": lambda policy, actual: policy.lower() == actual.lower(),
    "StringLike": lambda policy, actual: _glob(policy, actual),
    "StringNotLike": lambda policy, actual: not _glob(policy, actual),
    "ArnEquals": lambda policy, actual: _glob(policy, actual),
    "ArnLike": lambda policy, actual: _glob(policy, actual),
    "ArnNotEquals": lambda policy, actual: not _glob(policy, actual),
    "ArnNotLike": lambda policy, actual: not _glob(policy, actual),
    "Bool": lambda policy, actual: policy.lower() == actual.lower(),
}
_NEGATED = {"StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike"}


def _condition(
    operator: str, key: str, policy_values: list[Any], context: Mapping[str, ContextValue]
) -> bool:
    qualifier, _, base = operator.rpartition(":")
    values = [_substitute(str(v), context) for v in policy_values]
    actual = context.get(key.lower())
    if base == "Null":
        return (actual is None) == (values[0].lower() == "true")
    if base not in _MATCHERS:
        raise UnsupportedPolicy(f"condition operator {operator} is not modelled")
    matcher = _MATCHERS[base]
    negated = base in _NEGATED

    def matches(single: str) -> bool:
        # Several policy values are ORed; for a negated operator, none may match.
        hits = [matcher(value, single) for value in values]
        return all(hits) if negated else any(hits)

    if qualifier == "ForAllValues":
        return actual is None or all(matches(v) for v in _as_list(actual))
    if qualifier == "ForAnyValue":
        return actual is not None and any(matches(v) for v in _as_list(actual))
    if qualifier:
        raise UnsupportedPolicy(f"condition qualifier {qualifier} is not modelled")
    if actual is None:
        return negated
    if not isinstance(actual, str):
        raise UnsupportedPolicy(f"{key} is multi-valued; use ForAllValues/ForAnyValue")
    return matches(actual)
