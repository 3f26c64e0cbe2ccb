"""A pool's replace_not_ready_after reaches its startup-taint remover as REPLACE_AFTER_SECONDS,
and the remover may delete NodeClaims only under the policy that limits it to its own node's
claim (the Karpenter box's test_stuck_node.py shows the whole replacement with the real
Karpenter, and the API server evaluating the policy)."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from charts.cleartaints import NODE_NAME_EXTRA, ClearTaintsChart, ClearTaintsNodes, ClearTaintsProps
from config import parse_config
from stacks.cluster_props import clear_taints_nodes


@pytest.mark.parametrize(
    ("setting", "seconds"),
    [({}, 1200), ({"replace_not_ready_after": "1h30m"}, 5400),
     ({"replace_not_ready_after": "Never"}, 0)],
    ids=["default-20m", "1h30m", "never"],
)  # fmt: skip
def test_the_pools_bound_reaches_its_remover(setting: dict[str, Any], seconds: int) -> None:
    config = parse_config({"node_pools": [{"name": "multus", **setting}]})
    (pool,) = config.node_pools
    assert clear_taints_nodes(pool, config.pool_plan(pool)).replace_after_seconds == seconds
    objects = cdk8s.Testing.synth(
        ClearTaintsChart(
            cdk8s.Testing.app(),
            "cleartaints",
            ClearTaintsProps(
                image="al2023", pools=[ClearTaintsNodes(replace_after_seconds=seconds)]
            ),
        )
    )
    (daemon_set,) = [o for o in objects if o["kind"] == "DaemonSet"]
    env = {
        e["name"]: e["value"]
        for e in daemon_set["spec"]["template"]["spec"]["containers"][0]["env"]
        if "value" in e
    }
    assert env["REPLACE_AFTER_SECONDS"] == str(seconds)
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    claims = [r for r in role["rules"] if "nodeclaims" in r["resources"]]
    assert [(r["apiGroups"], r["verbs"], r.get("resourceNames", [])) for r in claims] == [
        (["karpenter.sh"], ["delete"], [])
    ]
    policies = {
        o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"
    }
    policy = policies["cleartaints-own-node-claim"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["DELETE"] and rule["resources"] == ["nodeclaims"]
    (validation,) = policy["spec"]["validations"]
    assert (
        f"oldObject.status.nodeName in request.userInfo.extra['{NODE_NAME_EXTRA}']"
        in validation["expression"]
    )
    bindings = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert {b["spec"]["policyName"] for b in bindings} >= {"cleartaints-own-node-claim"}
