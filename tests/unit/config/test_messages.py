"""Validation errors in plain words: paths, did-you-mean, pattern words, several per validator."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, ValidationError, model_validator

from config.messages import describe_errors
from config.model import StrictModel
from config.patterns import KUBERNETES_NAME


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
