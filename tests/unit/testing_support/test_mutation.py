"""The mutation tester's own rules: what it mutates, what it leaves alone, and stable keys."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testing_support import mutation

SOURCE = '''\
"""Module docstring."""

LIMIT = 4
TABLE = {2: 3}


def check(value, names):
    """Function docstring."""
    if value > LIMIT:
        raise ValueError(f"too big: {value}")
    LOG.info("checked %s", value)
    return not names and [value, "tail"]


class Model:
    size: int = Field(default=1, ge=0, description="Nodes.")
'''


def keys(source: str = SOURCE) -> list[str]:
    return [mutant.key for mutant in mutation.enumerate_mutants(source)]


def test_every_kind_of_change_is_offered_once_under_its_scope() -> None:
    assert keys() == [
        "LIMIT: 4 -> 5",
        "LIMIT: 4 -> 3",
        "TABLE: 2 -> 3",
        "TABLE: 2 -> 1",
        "TABLE: 3 -> 4",
        "TABLE: 3 -> 2",
        "TABLE: drop dict entry 2",
        "check: Gt -> GtE in value > LIMIT",
        "check: never raise: if value > LIMIT",
        "check: drop not in not names",
        "check: string 'tail' -> 'Xtail'",
        "check: drop list element value",
        "check: drop list element 'tail'",
        "check: And -> Or",
        "Model.size: 1 -> 2",
        "Model.size: 1 -> 0",
        "Model.size: 0 -> 1",
        "Model.size: 0 -> -1",
        "Model.size: drop default= in Field(...)",
        "Model.size: drop ge= in Field(...)",
    ]


def test_docstrings_error_messages_and_log_lines_are_not_mutated() -> None:
    mutated = {mutation.mutate(SOURCE, index) for index in range(len(keys()))}
    for source in mutated:
        assert '"""Module docstring."""' in source
        assert '"""Function docstring."""' in source
        assert "f'too big: {value}'" in source
        assert "LOG.info('checked %s', value)" in source
        assert "description='Nodes.'" in source


def test_each_mutant_changes_exactly_what_its_key_says() -> None:
    by_key = dict(zip(keys(), range(len(keys())), strict=True))

    def changed(key: str) -> str:
        return ast.unparse(ast.parse(mutation.mutate(SOURCE, by_key[key])))

    assert "if value >= LIMIT:" in changed("check: Gt -> GtE in value > LIMIT")
    assert "if False:" in changed("check: never raise: if value > LIMIT")
    assert "TABLE = {}" in changed("TABLE: drop dict entry 2")
    assert "Field(default=1, description='Nodes.')" in changed("Model.size: drop ge= in Field(...)")
    assert "ge=-1" in changed("Model.size: 0 -> -1")
    assert "return names and [value, 'tail']" in changed("check: drop not in not names")
    assert "return not names or [value, 'tail']" in changed("check: And -> Or")


def test_keys_do_not_depend_on_line_numbers() -> None:
    shifted = SOURCE.replace('"""Module docstring."""\n', '"""Module docstring."""\n\n\n\nX = 1\n')
    assert [key for key in keys(shifted) if not key.startswith("X:")] == keys()


def test_a_change_repeated_in_one_scope_is_numbered() -> None:
    source = "def f(a):\n    return a == 1 or a == 1\n"
    assert keys(source)[:6] == [
        "f: 1 -> 2",
        "f: 1 -> 0",
        "f: Eq -> NotEq in a == 1",
        "f: 1 -> 2 #2",
        "f: 1 -> 0 #2",
        "f: Eq -> NotEq in a == 1 #2",
    ]


def test_equivalents_are_read_from_the_docs_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = tmp_path / "testing.md"
    doc.write_text(
        "| module | mutant | why equivalent |\n"
        "|---|---|---|\n"
        "| config/model.py | `LIMIT: 4 -> 5` | reason |\n"
        "| charts/other.py | `LIMIT: 4 -> 3` | reason |\n"
    )
    monkeypatch.setattr(mutation, "EQUIVALENTS_DOC", doc)
    assert mutation.documented_equivalents("config/model.py") == {"LIMIT: 4 -> 5"}


def test_every_mapped_module_and_test_path_exists() -> None:
    for module, tiers in mutation.MODULE_TESTS.items():
        assert (mutation.REPO / module).is_file(), module
        for tier in tiers:
            paths = [argument for argument in tier if argument.startswith("tests/")]
            assert paths, module
            for path in paths:
                assert (mutation.REPO / path).exists(), path


def test_line_ranges_are_parsed_inclusively() -> None:
    assert mutation._parse_lines("3-5,9") == {3, 4, 5, 9}
    assert mutation._parse_lines(None) is None
