"""Every command-line tool's --help gives its docstring's whole first paragraph (issue #53:
`python -m docs_tools.diagram --help` stopped mid-sentence, at the docstring's first line)."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import runpy
import sys

import pytest

from tests.conftest import REPO

MODULES = ["docs_tools.diagram", "testing_support.mutation"]
SCRIPTS = sorted(
    str(path.relative_to(REPO))
    for path in (REPO / "benchmarks").glob("*.py")
    if "argparse" in path.read_text(encoding="utf-8")
)


def help_text(tool: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys, "argv", [tool, "--help"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        if tool in MODULES:
            importlib.import_module(tool).main()
        else:
            runpy.run_path(str(REPO / tool), run_name="__main__")
    assert exited.value.code == 0
    return out.getvalue()


def description(text: str) -> str:
    """The paragraph between the usage lines and the first argument group."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return " ".join(paragraphs[1].split())


def first_paragraph(docstring: str) -> str:
    return " ".join(docstring.split("\n\n", 1)[0].split())


@pytest.mark.parametrize("tool", MODULES + SCRIPTS)
def test_help_gives_the_whole_first_paragraph_of_the_docstring(
    tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if tool in MODULES:
        docstring = importlib.import_module(tool).__doc__
    else:
        docstring = runpy.run_path(str(REPO / tool), run_name="help_probe")["__doc__"]
    said = description(help_text(tool, monkeypatch))
    assert docstring is not None
    assert said == first_paragraph(docstring)
    assert said[-1] in ".?!)", said  # a whole sentence, not a cut line
