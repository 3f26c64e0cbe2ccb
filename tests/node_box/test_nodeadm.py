"""nodeadm in the box (testing_support/node_box/nodeadm.py: the one version the Go module proxy
serves, 2024-02-29, without udev-net-manager or the boot hook) reads the user-data a node of
each pool of each example gets, as AL2023 reads it: `nodeadm config check -c imds://user-data`
takes the document from IMDSv2 at 169.254.169.254 (the box's, testing_support/node_box/aws.py),
parses the MIME multipart, skips our text/x-shellscript part and decodes the NodeConfig part.

The product's EC2NodeClass userData carries no NodeConfig part of its own: Karpenter generates
one from the NodePool (labels, taints, the Multus startup taint) and puts it last
(testing_support/node_box/karpenter.py). So the document checked per pool is Karpenter's, made
from the pool's NodePool props (stacks/cluster_props.py node_pool_props, what the cluster stack
renders) and our userData for the pool (node_bootstrap.render_user_data with stand-in IDs). What
the check proves: the document parses as MIME with our part in it, and the NodeConfig decodes;
this nodeadm's `config check` does not run its validation (cluster fields) nor refuse unknown
fields, so a field it does not know passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from config import AppConfig
from config.loader import load_config
from config.network_plan import NetworkPlan
from config.node_bootstrap_plan import node_bootstrap_props
from node_bootstrap import render_user_data
from node_bootstrap.renderer import deployed_size
from tests.node_box.conftest import MultusNode, pool_user_data

pytestmark = pytest.mark.node_box

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(path.name for path in (REPO / "examples").glob("*.json"))

NODE_CONFIG = """apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: node-box
    apiServerEndpoint: https://node-box.example
    certificateAuthority: Y2VydGlmaWNhdGUgYXV0aG9yaXR5
    cidr: 10.100.0.0/16
"""


def test_nodeadm_runs_and_checks_a_node_config_file(multus_node: MultusNode) -> None:
    box = multus_node.box
    assert box.sh("command -v nodeadm").strip() == "/usr/bin/nodeadm"
    box.write_file("/etc/eks/nodeconfig.yaml", NODE_CONFIG)
    box.write_file("/etc/eks/other.yaml", NODE_CONFIG.replace("node.eks.aws", "example.com"))

    valid = box.run(["nodeadm", "config", "check", "-c", "file:///etc/eks/nodeconfig.yaml"])
    assert valid.returncode == 0, valid.describe()
    assert "Configuration is valid" in valid.stdout + valid.stderr

    other = box.run(["nodeadm", "config", "check", "-c", "file:///etc/eks/other.yaml"])
    assert other.returncode != 0, other.describe()
    assert "Configuration is valid" not in other.stdout + other.stderr


def example_configs(example: str) -> list[tuple[str, AppConfig]]:
    """The example's config and, for a pipeline's, each environment's (a name for each)."""
    loaded = load_config({"config_file": f"examples/{example}"}, REPO, user_data_size=deployed_size)
    return [("base", loaded.base)] + [
        (environment.settings.name, environment.config) for environment in loaded.environments
    ]


def product_user_data(config: AppConfig, plan: NetworkPlan) -> str:
    """The pool's EC2NodeClass userData, with stand-ins where CloudFormation puts IDs."""
    props = node_bootstrap_props(
        config.cluster_name,
        plan,
        subnet_id=lambda row: "subnet-0123456789abcdef0",
        security_group_id=lambda row: "sg-0123456789abcdef0",
    )
    return render_user_data(props)


def check_from_imds(node: MultusNode, user_data: str) -> tuple[int | None, str]:
    node.node.imds.user_data = user_data
    result = node.box.run(["nodeadm", "config", "check", "-c", "imds://user-data"])
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("example", EXAMPLES)
def test_nodeadm_reads_each_pools_user_data_from_imds(
    multus_node: MultusNode, example: str
) -> None:
    served = multus_node.node.imds.user_data
    checked = []
    ours = ""
    try:
        for name, config in example_configs(example):
            for pool in config.node_pools:
                plan = config.pool_plan(pool)
                if not list(plan):
                    continue  # a pool without networks gets no userData of ours
                ours = product_user_data(config, plan)
                document = pool_user_data(config, pool, ours)
                status, output = check_from_imds(multus_node, document)
                assert status == 0 and "Configuration is valid" in output, (
                    f"{example} ({name}), pool {pool.name}: nodeadm refused its user-data:\n"
                    f"{output}"
                )
                checked.append(f"{name}/{pool.name}")
        assert checked, f"{example} has no pool with Multus networks"
        # the contrast: without Karpenter's part, nodeadm finds no NodeConfig in ours
        status, output = check_from_imds(multus_node, ours)
        assert status != 0 and "Could not find NodeConfig within UserData" in output, output
    finally:
        multus_node.node.imds.user_data = served
