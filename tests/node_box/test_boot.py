"""A node box boots as a node boots: systemd reaches multi-user.target with nothing failed,
and cloud-init runs the instance's user-data (MIME multipart with a shell script part, the
form Karpenter and node_bootstrap/renderer.py give) once, from the NoCloud seed."""

from __future__ import annotations

import json

import pytest

from testing_support.node_box import shell_script_user_data
from tests.node_box.conftest import KNOWN_FAILED_UNITS, BootNode

pytestmark = pytest.mark.node_box

INSTANCE_ID = "i-0b0a7c0de0000000a"
#: Appends the boot's ID to a marker, so a test sees which boots ran it and how often.
MARKER = "/var/lib/node-box/user-data-ran"
MARKER_SCRIPT = f"""#!/bin/sh
set -eu
mkdir -p "$(dirname {MARKER})"
cat /proc/sys/kernel/random/boot_id >>{MARKER}
"""


def test_systemd_reaches_multi_user_and_cloud_init_runs_the_user_data(
    boot_node: BootNode,
) -> None:
    box = boot_node(user_data=shell_script_user_data(MARKER_SCRIPT), instance_id=INSTANCE_ID)
    print(f"boot: {box.boots.seconds[-1]:.1f} s\n{box.sh('systemd-analyze time')}")

    state = box.boots.states[-1]
    failed = set(box.sh("systemctl list-units --failed --no-legend --plain").split()[::4])
    assert state == "running" or (state == "degraded" and failed <= KNOWN_FAILED_UNITS), (
        f"systemd is {state}; failed units: {sorted(failed)}"
    )
    assert box.sh("systemctl is-active multi-user.target").strip() == "active"

    # cloud-init found the seed, took this instance's ID and finished without an error
    result = json.loads(box.sh("cat /run/cloud-init/result.json"))["v1"]
    assert result["errors"] == []
    assert result["datasource"].startswith("DataSourceNoCloud")
    assert box.sh("cat /var/lib/cloud/data/instance-id").strip() == INSTANCE_ID
    # the user-data's script ran, in this boot, once
    assert box.sh(f"cat {MARKER}").split() == [box.boot_id()]
