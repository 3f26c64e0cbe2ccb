"""`make cluster-box CONFIG=... CMD=...` as an operator runs it to see, before any deploy, which
instances Karpenter picks for each pool: the box for examples/5g-core.json, and in it
`python -m testing_support.karpenter_box.launches --json`, which creates a pod per pool and reads
what Karpenter launched back from the emulator through AWS_ENDPOINT_URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from config import load_config
from tests.conftest import REPO

pytestmark = pytest.mark.karpenter_box

COMMAND_SECONDS = 600
EXAMPLE = "examples/5g-core.json"


def test_cluster_box_with_a_config_shows_each_pools_launch() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "testing_support.cluster_box"],
        cwd=REPO,
        env={
            **os.environ,
            "CLUSTER_BOX_CONFIG": EXAMPLE,
            "CLUSTER_BOX_CMD": "python -m testing_support.karpenter_box.launches --json",
        },
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    shown = json.loads(completed.stdout)
    assert shown["no_launch"] == []
    by_pool = {row["pool"]: row for row in shown["launches"]}
    assert set(by_pool) == {"upf", "control"}
    # The pools' own families, node subnets (never a Multus subnet), and the upf user data's
    # two NodeConfig parts (its profile's, Karpenter's).
    config = load_config({"config_file": EXAMPLE}, REPO).base
    (upf,) = [pool for pool in config.node_pools if pool.name == "upf"]
    assert by_pool["upf"]["instance_type"].split(".")[0] in upf.instance_families
    for row in by_pool.values():
        assert row["subnet_cidr"] in config.vpc.node_subnet_cidrs, row
        assert row["security_groups"], row
        assert row["user_data_parts"][0] == "text/x-shellscript"
    assert by_pool["upf"]["user_data_parts"].count("application/node.eks.aws") == 2
    assert by_pool["control"]["user_data_parts"].count("application/node.eks.aws") == 1
