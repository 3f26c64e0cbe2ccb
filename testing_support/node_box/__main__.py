"""`python -m testing_support.node_box [CMD]` (make node-box CMD="..."): build the image if
needed, boot a box, print the boot time and what systemd says, run CMD in the guest (shell,
as root) if given, power it off, and exit with CMD's code. The box's files (console.log, the
QEMU command) stay in a temporary folder that is printed."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from testing_support.node_box.errors import BuildError, Unavailable
from testing_support.node_box.image import build_image
from testing_support.node_box.machine import NodeBox
from testing_support.node_box.seed import shell_script_user_data

COMMAND_ENV = "NODE_BOX_CMD"


def main(argv: list[str]) -> int:
    command = " ".join(argv) or os.environ.get(COMMAND_ENV, "")
    started = time.monotonic()
    try:
        image = build_image()
    except (BuildError, Unavailable) as error:
        print(f"node-box: {error}", file=sys.stderr)
        return 1
    built = "built" if image.built_seconds is not None else "cached"
    print(f"node-box: image {image.directory} ({built}, {time.monotonic() - started:.0f} s)")
    workdir = Path(tempfile.mkdtemp(prefix="node-box-"))
    user_data = shell_script_user_data("#!/bin/sh\necho node-box: user-data ran\n")
    with NodeBox(image, workdir, user_data=user_data, instance_id="i-0node0box0manual") as box:
        seconds = box.wait_until_booted()
        print(f"node-box: booted in {seconds:.1f} s ({box.boots.states[-1]}); files in {workdir}")
        print(box.sh("systemd-analyze time; systemctl --failed --no-legend"), end="")
        if not command:
            return 0
        result = box.run(["/bin/sh", "-c", command], timeout=600)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.returncode if result.returncode is not None else 128 + (result.signal or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
