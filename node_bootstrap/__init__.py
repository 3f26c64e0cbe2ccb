"""Multus ENI node bootstrap: the EC2NodeClass user-data (renderer) and its IAM (iam). What the
user-data is rendered from, the plan, is the config's (config/node_bootstrap_plan.py).

`node_bootstrap.iam` is a separate import so that rendering does not load aws_cdk.
"""

from node_bootstrap.renderer import CLUSTER_TAG_KEY, render_user_data

__all__ = ["CLUSTER_TAG_KEY", "render_user_data"]
