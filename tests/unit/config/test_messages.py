"""Validation errors in plain words: paths, did-you-mean, pattern words, several per validator."""

from __future__ import annotations

from typing import Any, Optional, get_args

import annotated_types
import pytest
from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from config.messages import describe_errors, element_type, model_at
from config.model import AppConfig, StrictModel
from config.patterns import KUBERNETES_NAME
from config.pipeline import PipelineConfig


class Inner(StrictModel):
    """A section whose validator reports what its message names."""

    size: int = 1
    problem: str = ""

    @model_validator(mode="after")
    def _report(self) -> Inner:
        if self.problem:
            raise ValueError(self.problem)
        return self


class Outer(StrictModel):
    """The document."""

    inner: Inner = Inner()
    items: list[Inner] = Field(default_factory=list)
    name: str = Field(default="ok", pattern=KUBERNETES_NAME.regex)


def message_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(raw)
    return describe_errors(caught.value, "config", Outer)


def test_a_message_naming_a_field_of_its_section_is_filed_under_it() -> None:
    message = message_for({"inner": {"problem": "size: too small; use 2"}})
    assert "  - inner.size: too small; use 2" in message


def test_a_message_naming_something_else_keeps_its_section_path() -> None:
    message = message_for({"inner": {"problem": "outer.inner.size: too small"}})
    assert "  - inner: outer.inner.size: too small" in message


def test_several_problems_of_one_validator_get_a_line_each() -> None:
    message = message_for({"items": [{}, {"problem": "size: too small\nproblem: odd"}]})
    assert "  - items[1].size: too small" in message
    assert "  - items[1].problem: odd" in message


def test_unknown_key_names_the_closest_key_or_lists_them() -> None:
    assert "inner.sise: unknown key; did you mean 'size'?" in message_for({"inner": {"sise": 2}})
    message = message_for({"items": [{"zzz": 1}]})
    assert "items[0].zzz: unknown key; the accepted keys here are size, problem" in message


def test_pattern_mismatch_in_plain_words() -> None:
    message = message_for({"name": "Not_OK"})
    assert "name: 'Not_OK' is not a Kubernetes name" in message
    assert "for example multus-networks" in message
    assert "^[a-z0-9]" not in message


class Document(StrictModel):
    """A document whose root validator reports a problem without a field path."""

    inner: Inner = Inner()
    optional_inner: Inner | None = None
    items: list[Inner] | None = None
    either: int | str = 0
    labels: dict[str, str] = Field(default_factory=dict)
    teams: dict[str, Inner] = Field(default_factory=dict)
    code: str = Field(default="a", pattern=r"^[a-z]$")
    broken: bool = False
    problem: str = ""

    @model_validator(mode="after")
    def _report(self) -> Document:
        if self.broken:
            raise ValueError("the document as a whole is wrong")
        if self.problem:
            raise ValueError(self.problem)
        return self


def describe(raw: dict[str, Any], section: str = "") -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Document.model_validate(raw)
    return describe_errors(caught.value, "settings.yaml", Document, section).splitlines()


def test_the_first_line_names_the_source_and_each_problem_gets_its_own_line() -> None:
    assert describe({"inner": {"size": "x"}, "code": "B"})[0] == "Invalid settings.yaml:"
    assert len(describe({"inner": {"size": "x"}, "code": "B"})) == 3


def test_a_problem_of_the_whole_document_is_filed_at_the_top_level() -> None:
    assert describe({"broken": True}) == [
        "Invalid settings.yaml:",
        "  - (top level): the document as a whole is wrong",
    ]


def test_the_section_prefixes_every_path() -> None:
    inner = describe({"inner": {"problem": "size: too small"}}, "pipeline")
    assert inner[1:] == ["  - pipeline.inner.size: too small"]
    whole = describe({"broken": True}, "pipeline")
    assert whole[1:] == ["  - pipeline: the document as a whole is wrong"]


def test_a_pattern_without_plain_words_keeps_the_pydantic_message() -> None:
    (line,) = describe({"code": "B"})[1:]
    assert line.startswith("  - code: String should match pattern '^[a-z]$'")


@pytest.mark.parametrize(
    ("location", "section"),
    [
        ((), Document),
        (("inner",), Inner),
        (("optional_inner",), Inner),
        (("items", 3), Inner),
        (("inner", "size"), None),  # a scalar, not a section
        (("inner", "size", "deeper"), None),
        (("labels", "team"), None),  # a mapping, not a section
        (("labels", "team", "deeper"), None),
        (("either",), None),  # a union of two types
        (("nosuch",), None),
    ],
)
def test_the_section_at_a_location(location: tuple[int | str, ...], section: type | None) -> None:
    assert model_at(Document, location) is section


@pytest.mark.parametrize(
    ("annotation", "element"),
    [
        (int, int),
        (int | None, int),
        (Optional[Inner], Inner),  # noqa: UP045 - typing.Union spelling, as older code writes it
        (list[Inner], Inner),
        (list[Inner] | None, Inner),
        (int | str, int | str),
        (dict[str, Inner], dict[str, Inner]),
    ],
)
def test_the_element_type_behind_optional_and_list(annotation: Any, element: Any) -> None:
    assert element_type(annotation) == element


def test_a_top_level_message_naming_a_nested_field_is_filed_under_it() -> None:
    assert describe({"problem": "inner.size: too small"})[1:] == ["  - inner.size: too small"]
    assert describe({"problem": "items[1] (second).size: too small"})[1:] == [
        "  - items[1] (second).size: too small"
    ]


def test_an_unknown_key_below_a_mapping_is_still_called_unknown() -> None:
    assert describe({"teams": {"a": {"zzz": 1}}})[1:] == [
        "  - teams.a.zzz: unknown key (typo?); see docs/configuration.md for the accepted keys"
    ]


@pytest.mark.parametrize("value", [True, 5, 2.5])
def test_only_a_text_field_asks_for_quotes(value: object) -> None:
    (line,) = describe({"items": value})[1:]
    assert line.startswith("  - items: Input should be a valid list")


def test_an_unknown_key_is_named_as_written() -> None:
    assert describe({".inner": 1})[1:] == [
        "  - .inner: unknown key; did you mean 'inner'?",
    ]


def _bounded_fields(model: type[BaseModel], path: str = "") -> list[tuple[str, FieldInfo]]:
    """(dotted path, field) of every field with a Ge/Gt/Le/Lt bound under `model`."""
    found = []
    for name, field in model.model_fields.items():
        if any(isinstance(item, BOUNDS) for item in field.metadata):
            found.append((f"{path}{name}", field))
        for member in get_args(field.annotation) or (field.annotation,):
            nested = element_type(member)
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                found += _bounded_fields(nested, f"{path}{name}.")
    return found


BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)
# Bounded numbers that count nothing: a priority, an index.
UNITLESS = {
    "node_pools.weight",
    "multus.networks.network_card",
    "multus.networks.ipv6.pod_range_offset",
}


def test_every_bounded_number_names_its_unit_or_counts_nothing() -> None:
    # Issue #53: "Input should be greater than or equal to 10" did not say 10 of what.
    fields = dict(_bounded_fields(AppConfig) + _bounded_fields(PipelineConfig, "pipeline."))
    assert "cluster.teardown_timeout_minutes" in fields
    missing = sorted(
        path
        for path, field in fields.items()
        if path not in UNITLESS and not isinstance(field.json_schema_extra, dict)
    )
    assert missing == []
    assert set(fields) >= UNITLESS


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"inner": {"size": "2"}}, "inner.size: '2' is text, but this field takes a whole number"),
        ({"name": "ok "}, "name: 'ok ' has surrounding whitespace (at its end)"),
    ],
)
def test_a_value_that_is_text_or_padded_says_so(raw: dict[str, Any], expected: str) -> None:
    assert expected in message_for(raw)
