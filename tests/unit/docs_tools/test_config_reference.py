"""The generated configuration reference: current, complete, and typed the way config reads."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from docs_tools import config_reference
from tests.conftest import REPO


class Inner(BaseModel):
    """An inner section."""

    size: int = Field(default=3, ge=1, description="How many.")


class Sample(BaseModel):
    """A config section with every kind of field the reference page documents."""

    mode: Literal["a", "b"] = Field(default="a", description="The mode.")
    names: list[str] | None = Field(default=None, description="Some names.")
    inner: Inner = Inner()
    items: list[Inner] = Field(description="Listed sections.")


def test_committed_page_matches_the_models() -> None:
    committed = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == config_reference.render(), (
        "docs/configuration.md is stale: run `make docs` and commit it"
    )


def test_rows_give_type_default_and_meaning_of_every_key() -> None:
    rows = {row.key: row for row in config_reference.key_rows(Sample)}
    assert list(rows) == ["mode", "names", "inner", "inner.size", "items", "items[].size"]
    assert rows["mode"].type == '`"a"` \\| `"b"`'
    assert rows["mode"].default == '`"a"`'
    assert rows["names"].type == "list of text (optional)"
    assert rows["names"].default == "not set"
    assert rows["inner"].meaning == "An inner section."  # the section's docstring
    assert rows["inner.size"].type == "integer (>= 1)"
    assert rows["inner.size"].default == "`3`"
    assert rows["items"].type == "list of objects"
    assert rows["items"].default == "required"


def test_a_key_without_meaning_is_refused() -> None:
    class Undocumented(BaseModel):
        colour: str = "red"

    with pytest.raises(ValueError, match="colour has no description"):
        list(config_reference.key_rows(Undocumented))


def test_page_covers_the_seed_defaults() -> None:
    # Seed values from DESIGN.md: the rows show them as the defaults an operator starts from.
    page = config_reference.render()
    assert '| `region` | text | `"us-west-2"` |' in page
    assert '| `vpc.cidr` | text | `"10.0.0.0/16"` |' in page
    assert '"reservation": "10.0.7.32/27"' in page
    assert "| `pipeline.environments[].manual_approval` | boolean | `false` |" in page
