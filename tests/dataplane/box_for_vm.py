"""On the host: the cluster box that the data-plane tier's real Multus chain talks to from the
kernel VM (tests/dataplane/real_multus.py). It starts the box with the VPC endpoint's address in
its serving certificate, applies what the charts apply for Multus and Whereabouts (their CRDs,
service accounts and RBAC: charts/multus.py, charts/whereabouts.py), asks the TokenRequest API
for each daemon's token and hands all of it to the VM as one JSON file (multus_node.BoxAccess).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import cdk8s

from charts.multus import MultusChart, MultusProps
from charts.whereabouts import WhereaboutsChart, WhereaboutsProps
from config.images import ImagesConfig
from testing_support.cluster_box import pki as box_pki
from testing_support.cluster_box.build import build_all, build_cni
from testing_support.cluster_box.control_plane import running
from testing_support.cluster_box.objects import PREREQUISITES, RBAC_KINDS, apply_objects
from testing_support.kernel_vpc import SERVICES_HOST
from testing_support.multus_node import BoxAccess

TOKEN_SECONDS = 7200
SETUP_KINDS = (*PREREQUISITES, *RBAC_KINDS)


def chart_objects() -> list[dict[str, Any]]:
    app = cdk8s.Testing.app()
    MultusChart(app, "multus", MultusProps(region="us-west-2"))
    image = ImagesConfig().whereabouts.reference
    WhereaboutsChart(app, "whereabouts", WhereaboutsProps(image=image))
    objects: list[dict[str, Any]] = [o for chart in app.charts for o in chart.to_json()]
    return objects


@contextmanager
def box_for_vm(directory: Path) -> Iterator[Path]:
    """Runs the box while the caller runs the VM; yields the hand-off file's path."""
    binaries, cni = build_all(), build_cni()
    objects = chart_objects()
    with running(directory / "box", binaries, extra_addresses=(SERVICES_HOST,)) as plane:
        apply_objects(plane, [o for o in objects if o["kind"] in SETUP_KINDS])
        (daemon_config,) = [
            json.loads(o["data"]["daemon-config.json"])
            for o in objects
            if o["kind"] == "ConfigMap" and "daemon-config.json" in o.get("data", {})
        ]
        tokens = {
            account: plane.kubectl(
                "create", "token", account, "-n", "kube-system", f"--duration={TOKEN_SECONDS}s"
            ).strip()
            for account in ("multus", "whereabouts")
        }
        access = BoxAccess(
            port=int(plane.server.rsplit(":", 1)[1]),
            ca=str(plane.pki.ca_cert),
            admin_cert=str(plane.pki.client_cert(box_pki.ADMIN)),
            admin_key=str(plane.pki.client_key(box_pki.ADMIN)),
            tokens=tokens,
            kubectl=str(binaries.kubectl),
            cni={
                "multus_daemon": str(cni.multus_daemon),
                "multus_shim": str(cni.multus_shim),
                "whereabouts": str(cni.whereabouts),
                "ip_control_loop": str(cni.ip_control_loop),
                "plugins_dir": str(cni.plugins_dir),
            },
            multus_daemon_config=daemon_config,
        )
        handoff = directory / "box.json"
        handoff.write_text(json.dumps(asdict(access)))
        yield handoff
