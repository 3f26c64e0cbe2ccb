"""The README stays an operator's front door: short, and every make command it shows exists."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO

README = REPO / "README.md"


def test_readme_is_at_most_8_kb() -> None:
    assert len(README.read_bytes()) <= 8 * 1024


def test_every_make_target_the_readme_shows_exists() -> None:
    targets = sorted(set(re.findall(r"\bmake ([a-z][a-z-]*)", README.read_text())))
    assert {"synth", "test", "bootstrap", "diff", "deploy", "destroy", "diagram"} <= set(targets)
    # A dry run (-n) only prints the recipe; it fails when a target does not exist.
    completed = subprocess.run(
        ["make", "-n", *targets, "ENV=aws://111122223333/us-west-2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
