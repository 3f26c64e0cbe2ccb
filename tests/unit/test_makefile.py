"""The Makefile's deploy/diff/destroy selection finds the stage's stacks (the CLI matches)."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO, SynthesizedApp


def makefile_default(variable: str) -> str:
    match = re.search(rf"^{variable} \?= (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, variable
    return match.group(1).strip("'")


def cdk_ls(assembly: str, *selection: str) -> list[str]:
    completed = subprocess.run(
        ["npx", "--no-install", "cdk", "ls", "--app", assembly, *selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return sorted(line for line in completed.stdout.splitlines() if line.strip())


def test_default_selection_is_every_stack_of_the_stage(default_app: SynthesizedApp) -> None:
    assert cdk_ls(str(default_app.outdir), makefile_default("STACKS")) == [
        "karpenterwithmultus/Cluster (karpenterwithmultus-cluster)",
        "karpenterwithmultus/Network (karpenterwithmultus-network)",
    ]
