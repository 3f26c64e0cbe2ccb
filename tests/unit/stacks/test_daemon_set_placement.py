"""Where the DaemonSet controller would place our DaemonSets on each NodePool's nodes, in every
app with tainted pools: every DaemonSet that selects a pool's nodes (Multus, Whereabouts,
cleartaints, the pod IP agent) tolerates each NoSchedule and NoExecute taint those nodes carry
from the start, the pool's own taints and its startup taint. The controller places a pod only on
a node whose NoSchedule and NoExecute taints it all tolerates (kubernetes
pkg/controller/daemon/daemon_controller.go, predicates: FindMatchingUntoleratedTaint); a
cleartaints that is never placed never lifts the startup taint, and no pod lands on the pool.

What it does not model: the taints the node lifecycle controller adds (not-ready, unreachable;
DaemonSet pods get tolerations for them by default) and taints added later by other controllers.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SynthesizedApp
from tests.helpers import pool_nodes, tolerates
from tests.unit.stacks.test_cluster_workloads import by_kind

PLACEMENT_EFFECTS = ("NoSchedule", "NoExecute")


def selects(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    """nodeSelector and the required node affinity (In, NotIn, Exists, DoesNotExist)."""
    if any(labels.get(k) != v for k, v in pod.get("nodeSelector", {}).items()):
        return False
    required = pod.get("affinity", {}).get("nodeAffinity", {})
    terms = required.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get(
        "nodeSelectorTerms"
    )
    if not terms:
        return True

    def matches(expression: dict[str, Any]) -> bool:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        return {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]

    return any(all(matches(e) for e in term.get("matchExpressions", [])) for term in terms)


def untolerated(template: dict[str, Any]) -> dict[str, list[str]]:
    """Per pool and DaemonSet selecting its nodes, the taints it does not tolerate."""
    found: dict[str, list[str]] = {}
    for node_pool in by_kind(template, "NodePool"):
        labels, taints = pool_nodes(node_pool)
        for daemon_set in by_kind(template, "DaemonSet"):
            pod = daemon_set["spec"]["template"]["spec"]
            if not selects(pod, labels):
                continue
            missing = [
                f"{t['key']}:{t['effect']}"
                for t in taints
                if t["effect"] in PLACEMENT_EFFECTS
                and not tolerates(
                    pod.get("tolerations", []), t["key"], t.get("value", ""), t["effect"]
                )
            ]
            if missing:
                found[f"{node_pool['metadata']['name']}/{daemon_set['metadata']['name']}"] = missing
    return found


@pytest.mark.parametrize("fixture", ["default_app", "five_g_core_app", "existing_vpc_app"])
def test_every_daemon_set_of_a_pool_can_be_placed_on_its_nodes(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    app: SynthesizedApp = request.getfixturevalue(fixture)
    assert untolerated(app.template_json(app.stage.cluster)) == {}


def test_the_5g_core_upf_pool_is_tainted_and_gets_the_node_daemons(
    five_g_core_app: SynthesizedApp,
) -> None:
    """So that the rule above is not empty: the upf pool's nodes carry its own taint and the
    startup taint, and cleartaints, Multus, Whereabouts and the pod IP agent select them."""
    cluster = five_g_core_app.template_json(five_g_core_app.stage.cluster)
    (upf,) = [p for p in by_kind(cluster, "NodePool") if p["metadata"]["name"] == "upf"]
    labels, taints = pool_nodes(upf)
    assert len({t["key"] for t in taints}) >= 2
    selecting = {
        d["metadata"]["name"]
        for d in by_kind(cluster, "DaemonSet")
        if selects(d["spec"]["template"]["spec"], labels)
    }
    assert {"cleartaints-upf", "multus-pod-ips-upf", "kube-multus-ds", "whereabouts"} <= selecting
