"""cron_probe: robfig/cron v3.0.1, the parser Karpenter reads disruption budget schedules with,
behind a small Go program (go/main.go: each schedule as Karpenter v1.14.1 parses it, the NodePool
CRD's pattern in Go's regexp, whether it fires, its longest gap between hits), built once per
version with Go from the module proxy (go/go.mod pins the version, go/go.sum its hashes) into
~/.cache/karpenter-multus/cron_probe (CRON_PROBE_CACHE), as testing_support/go_build.py builds
every Go binary of the tests. tests/integration/config/test_cron_schedule_robfig.py holds
config/cron_schedule.py to it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testing_support.go_build import GoBuild, built

CACHE_ENV = "CRON_PROBE_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "karpenter-multus" / "cron_probe"


class BuildError(RuntimeError):
    """Go is missing or the build failed; the message says which."""


BUILD = GoBuild(
    name="cron_probe",
    directory=Path(__file__).parent / "go",
    packages=((".", "cron_probe"),),
    error=BuildError,
)


def build() -> Path:
    """The path of the probe, built first if this version is not in the cache yet."""
    go = shutil.which("go")
    if go is None:
        raise BuildError("cron_probe is built with Go: no go on PATH")
    return built(BUILD, go, Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE))["cron_probe"]


def probe(binary: Path, schedules: Sequence[str]) -> list[dict[str, Any]]:
    """The probe's answer for each schedule, in order (main.go, `answer`)."""
    done = subprocess.run(
        [str(binary)],
        input="".join(json.dumps(schedule) + "\n" for schedule in schedules),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(schedules), done.stderr
    return answers
