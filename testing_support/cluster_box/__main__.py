"""`python -m testing_support.cluster_box CMD...` (make cluster-box CMD="...", which passes CMD
in CLUSTER_BOX_CMD): build the box if needed, start it, run CMD through the shell with
KUBECONFIG set and the box's kubectl first on PATH, stop the box, and exit with CMD's code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from testing_support.cluster_box.build import BuildError, build_all
from testing_support.cluster_box.control_plane import running

COMMAND_ENV = "CLUSTER_BOX_CMD"


def main(argv: list[str]) -> int:
    command = " ".join(argv) or os.environ.get(COMMAND_ENV, "")
    if not command:
        print("usage: make cluster-box CMD='kubectl get --raw /readyz'", file=sys.stderr)
        return 2
    try:
        binaries = build_all()
    except BuildError as error:
        print(f"cluster-box: {error}", file=sys.stderr)
        return 1
    with (
        tempfile.TemporaryDirectory(prefix="cluster-box-") as directory,
        running(Path(directory), binaries) as plane,
    ):
        print(f"cluster-box: API server {plane.server}", file=sys.stderr)
        return subprocess.run(command, shell=True, env=plane.environment(), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
