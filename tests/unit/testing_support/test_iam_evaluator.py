"""The small IAM evaluator decides as IAM does for the grammar it models, and refuses the rest."""

from __future__ import annotations

from typing import Any

import pytest

from testing_support.iam_evaluator import (
    AuthorizationRequest,
    RequestedResource,
    UnsupportedPolicy,
    evaluate,
)

ENI = "arn:aws:ec2:us-west-2:123456789012:network-interface/eni-1"
INSTANCE = "arn:aws:ec2:us-west-2:123456789012:instance/i-1"
OWNED_ENI = RequestedResource(ENI, {"aws:ResourceTag/owner": "c1"})
SELF = {"ec2:SourceInstanceARN": INSTANCE}
TARGET_INSTANCE = "arn:aws:ec2:us-west-2:123456789012:instance/${ec2:InstanceID}"


def allow(**statement: Any) -> dict[str, Any]:
    return {"Effect": "Allow", **statement}


def attach(*resources: RequestedResource, **context: Any) -> AuthorizationRequest:
    return AuthorizationRequest("ec2:AttachNetworkInterface", resources, context)


def test_nothing_allows_by_default() -> None:
    decision = evaluate([], attach(OWNED_ENI))
    assert not decision.allowed
    assert "no statement allows ec2:AttachNetworkInterface" in decision.reason


def test_every_resource_of_a_request_needs_an_allow() -> None:
    instance = RequestedResource(INSTANCE, {"ec2:InstanceID": "i-1"})
    eni_only = [allow(Action="ec2:Attach*", Resource=ENI)]
    assert not evaluate(eni_only, attach(OWNED_ENI, instance)).allowed
    both = [
        *eni_only,
        allow(Action="ec2:AttachNetworkInterface", Resource="arn:aws:ec2:*:*:instance/*"),
    ]
    assert evaluate(both, attach(OWNED_ENI, instance)).allowed


def test_explicit_deny_wins() -> None:
    statements = [
        allow(Action="ec2:*", Resource="*"),
        {
            "Effect": "Deny",
            "Sid": "NoAttach",
            "Action": "ec2:AttachNetworkInterface",
            "Resource": "*",
        },
    ]
    decision = evaluate(statements, attach(OWNED_ENI))
    assert (decision.allowed, decision.reason) == (False, f"NoAttach denies it on {ENI}")


def test_action_names_match_case_insensitively_and_arns_do_not() -> None:
    assert evaluate(
        [allow(Action="EC2:attachnetworkinterface", Resource=ENI)], attach(OWNED_ENI)
    ).allowed
    assert not evaluate([allow(Action="ec2:*", Resource=ENI.upper())], attach(OWNED_ENI)).allowed


@pytest.mark.parametrize(
    ("condition", "allowed"),
    [
        ({"StringEquals": {"aws:ResourceTag/owner": "c1"}}, True),
        ({"StringEquals": {"aws:ResourceTag/owner": "c2"}}, False),
        ({"StringEquals": {"aws:ResourceTag/missing": "c1"}}, False),
        ({"StringNotEquals": {"aws:ResourceTag/missing": "c1"}}, True),
        ({"StringLike": {"aws:ResourceTag/owner": "c*"}}, True),
        ({"StringEquals": {"aws:ResourceTag/owner": ["c2", "c1"]}}, True),  # values are ORed
        ({"StringNotEquals": {"aws:ResourceTag/owner": ["c2", "c1"]}}, False),
        ({"Null": {"aws:ResourceTag/owner": "false"}}, True),
        ({"Null": {"aws:ResourceTag/owner": "true"}}, False),
        ({"ArnEquals": {"ec2:SourceInstanceARN": INSTANCE}}, True),
        ({"ArnLike": {"ec2:SourceInstanceARN": "arn:aws:ec2:*:*:instance/i-2"}}, False),
        # Policy variables take the request's values.
        (
            {"ArnEquals": {"ec2:SourceInstanceARN": TARGET_INSTANCE}},
            True,
        ),
    ],
)
def test_condition_operators(condition: dict[str, Any], allowed: bool) -> None:
    resource = RequestedResource(ENI, {"aws:ResourceTag/owner": "c1", "ec2:InstanceID": "i-1"})
    statement = allow(Action="ec2:AttachNetworkInterface", Resource=ENI, Condition=condition)
    assert evaluate([statement], attach(resource, **SELF)).allowed is allowed


def test_a_variable_the_request_lacks_matches_nothing() -> None:
    condition = {
        "ArnEquals": {"ec2:SourceInstanceARN": "arn:aws:ec2:*:*:instance/${ec2:InstanceID}"}
    }
    statement = allow(Action="ec2:AttachNetworkInterface", Resource=ENI, Condition=condition)
    assert not evaluate([statement], attach(OWNED_ENI, **SELF)).allowed


@pytest.mark.parametrize(
    ("operator", "tag_keys", "allowed"),
    [
        ("ForAllValues:StringEquals", ["owner"], True),
        ("ForAllValues:StringEquals", ["owner", "other"], False),
        ("ForAllValues:StringEquals", None, True),  # vacuously true
        ("ForAnyValue:StringEquals", ["other", "owner"], True),
        ("ForAnyValue:StringEquals", None, False),
    ],
)
def test_set_qualifiers_on_tag_keys(
    operator: str, tag_keys: list[str] | None, allowed: bool
) -> None:
    context = {} if tag_keys is None else {"aws:TagKeys": tag_keys}
    statement = allow(
        Action="ec2:CreateTags", Resource="*", Condition={operator: {"aws:TagKeys": ["owner"]}}
    )
    request = AuthorizationRequest("ec2:CreateTags", [RequestedResource(ENI)], context)
    assert evaluate([statement], request).allowed is allowed


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
        allow(
            Action="ec2:*",
            Resource="*",
            Condition={"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}},
        ),
        allow(
            Action="ec2:*",
            Resource="*",
            Condition={"StringEqualsIfExists": {"aws:ResourceTag/x": "y"}},
        ),
    ],
)
def test_unmodelled_grammar_is_refused_not_guessed(statement: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedPolicy):
        evaluate([statement], attach(OWNED_ENI))
