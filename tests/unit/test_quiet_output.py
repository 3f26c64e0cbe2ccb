"""`make synth` prints what an operator needs: the stacks it synthesized, no jsii banner as
Python byte strings, no empty "Supply a stack id ()" hint."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, SynthesizedApp


def make_synth(cdk_command: str) -> subprocess.CompletedProcess[str]:
    """The Makefile's synth recipe and environment, with its `cdk` command replaced."""
    return subprocess.run(
        ["make", "-s", "--no-print-directory", "synth", f"CDK={cdk_command}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )


def test_synth_names_the_stage_stacks(default_app: SynthesizedApp) -> None:
    # The CLI reads the already synthesized assembly (--app <dir>) instead of running the app.
    completed = make_synth(f"npx --no-install cdk --app {default_app.outdir}")
    output = completed.stdout + completed.stderr
    assert "()" not in output
    assert "karpenterwithmultus/Network" in output
    assert "karpenterwithmultus/Cluster" in output


def test_the_app_process_prints_no_jsii_banner() -> None:
    # Starting any jsii module starts the jsii runtime, which warns about unsupported Node.js
    # releases on its own stderr; Python's jsii relays that as b'...' lines.
    completed = make_synth(f"{sys.executable} -c 'import constructs'")
    assert "b'!!" not in completed.stderr
    assert "end-of-life" not in completed.stderr
