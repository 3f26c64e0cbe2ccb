"""The cluster box's stop order (testing_support/cluster_box/control_plane.py, _stop): each
process stops before the one started before it is signalled, so etcd is still up while
kube-apiserver shuts down. Stand-ins play both: "etcd" holds a marker file while it runs, and
"kube-apiserver", once signalled, takes a moment (as a busy API server does) and then records
whether etcd's marker was still there."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from testing_support.cluster_box.control_plane import ControlPlane, _stop

ETCD = """trap 'rm -f {marker}; exit 0' TERM
touch {marker}
while :; do sleep 0.05; done
"""
API_SERVER = """shut_down() {{
  sleep 0.5
  if [ -e {marker} ]; then echo up; else echo down; fi > {seen}
  exit 0
}}
trap shut_down TERM
while :; do sleep 0.05; done
"""


def test_etcd_is_still_up_while_the_api_server_shuts_down(tmp_path: Path) -> None:
    marker, seen = tmp_path / "etcd-running", tmp_path / "etcd-seen-by-apiserver"
    etcd = subprocess.Popen(["sh", "-c", ETCD.format(marker=marker)])
    while not marker.exists():
        time.sleep(0.01)
    api_server = subprocess.Popen(["sh", "-c", API_SERVER.format(marker=marker, seen=seen)])
    time.sleep(0.2)  # both traps set
    plane = ControlPlane(
        directory=tmp_path,
        binaries=None,  # type: ignore[arg-type]  # _stop reads only the processes
        processes=[("etcd", etcd), ("kube-apiserver", api_server)],
    )

    _stop(plane)

    assert seen.read_text().strip() == "up"
    assert etcd.returncode == 0 and api_server.returncode == 0
    assert plane.processes == []
