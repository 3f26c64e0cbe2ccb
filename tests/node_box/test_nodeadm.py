"""The image carries nodeadm (testing_support/node_box/nodeadm.py: built from the Go module
proxy at the pinned pseudo-version), and it runs in the box: `nodeadm config check` decodes a
NodeConfig from a file and refuses a document of another group. (`nodeadm init` needs IMDS and
EC2, which the box does not model yet.)"""

from __future__ import annotations

import pytest

from testing_support.node_box import shell_script_user_data
from tests.node_box.conftest import BootNode

pytestmark = pytest.mark.node_box

NODE_CONFIG = """apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: node-box
    apiServerEndpoint: https://node-box.example
    certificateAuthority: Y2VydGlmaWNhdGUgYXV0aG9yaXR5
    cidr: 10.100.0.0/16
"""


def test_nodeadm_runs_and_checks_a_node_config(boot_node: BootNode) -> None:
    box = boot_node(user_data=shell_script_user_data("#!/bin/sh\n"), instance_id="i-0b0a7c0de0003")
    assert box.sh("command -v nodeadm").strip() == "/usr/bin/nodeadm"
    box.write_file("/etc/eks/nodeconfig.yaml", NODE_CONFIG)
    box.write_file("/etc/eks/other.yaml", NODE_CONFIG.replace("node.eks.aws", "example.com"))

    valid = box.run(["nodeadm", "config", "check", "-c", "file:///etc/eks/nodeconfig.yaml"])
    assert valid.returncode == 0, valid.describe()
    assert "Configuration is valid" in valid.stdout + valid.stderr

    other = box.run(["nodeadm", "config", "check", "-c", "file:///etc/eks/other.yaml"])
    assert other.returncode != 0, other.describe()
    assert "Configuration is valid" not in other.stdout + other.stderr
