"""Multus ENI node bootstrap: the EC2NodeClass user-data (renderer) and its IAM (iam).

`node_bootstrap.iam` is a separate import so that rendering does not load aws_cdk.
"""

from node_bootstrap.node_prefix import NodePrefixNetwork
from node_bootstrap.renderer import (
    CLUSTER_TAG_KEY,
    READY_MARKER_DIR,
    READY_MARKER_PATH,
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
    render_user_data,
)

__all__ = [
    "CLUSTER_TAG_KEY",
    "READY_MARKER_DIR",
    "READY_MARKER_PATH",
    "AzPlacement",
    "MultusInterface",
    "NodeBootstrapProps",
    "NodePrefixNetwork",
    "render_user_data",
]
