"""Disruption as the real Karpenter does it, on examples/5g-core.json (a upf pool whose drift
budget closes its maintenance window, a control pool with Karpenter's default budget): a change
to one pool's EC2NodeClass drifts that pool's NodeClaims only (Karpenter's own drift hash) and
Karpenter replaces them; a budget whose window is closed keeps a drifted node, one whose window
is open lets its replacement through; `expire_after: Never` reaches the NodeClaims; a pool added
on day 2 drifts no node of the others."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest

from testing_support.cluster_box.objects import apply, delete_objects
from testing_support.karpenter_box.app_world import AppTemplates
from testing_support.karpenter_box.box import KarpenterBox
from testing_support.karpenter_box.kubelet import wait_for
from tests.conftest import FIVE_G_CORE, REPO, SynthesizedApp, synthesize_config
from tests.karpenter_box.pools import (
    LAUNCH_SECONDS as DRIFT_SECONDS,
)
from tests.karpenter_box.pools import (
    claims,
    deployment,
    launched_names,
    node_pools,
    registered_claims,
    settle,
)

pytestmark = pytest.mark.karpenter_box

#: Karpenter's disruption controller looks every 10 s (sigs.k8s.io/karpenter
#: pkg/controllers/disruption/controller.go, pollingPeriod); a drifted node that three rounds
#: leave in place is kept by its budget.
KEPT_SECONDS = 35.0
NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"


def drifted(claim: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Drifted" and c["status"] == "True"
        for c in claim.get("status", {}).get("conditions", [])
    )


def touch_user_data(box: KarpenterBox, pool: str, note: str) -> None:
    """A day-2 change of the pool's EC2NodeClass: its user data gains a line."""
    node_class = box.api.get(f"{NODECLASSES}/{pool}")
    user_data = node_class["spec"]["userData"].replace(
        "#!/usr/bin/env bash\n", f"#!/usr/bin/env bash\n# {note}\n", 1
    )
    box.api.merge_patch(f"{NODECLASSES}/{pool}", {"spec": {"userData": user_data}})


def drift_budget(hours_ago: int, duration: str) -> dict[str, Any]:
    """The upf pool's drift budget shape (nodes 0 for Drifted, from a daily schedule), its
    schedule hit `hours_ago` hours before now."""
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=hours_ago)
    return {
        "nodes": "0",
        "reasons": ["Drifted"],
        "schedule": f"{start.minute} {start.hour} * * *",
        "duration": duration,
    }


@pytest.fixture(scope="module")
def running_pools(five_g_core_box: KarpenterBox) -> Iterator[dict[str, set[str]]]:
    """A Deployment per pool of examples/5g-core.json and the NodeClaims launched for them."""
    box = five_g_core_box
    pools = node_pools(box)
    for name, pool in pools.items():
        box.api.create(
            "/apis/apps/v1/namespaces/default/deployments", deployment(f"nf-{name}", pool)
        )
    launched = {name: registered_claims(box, name) for name in pools}
    yield launched
    for name in pools:
        box.api.delete(f"/apis/apps/v1/namespaces/default/deployments/nf-{name}")


def test_expire_after_never_reaches_the_node_claims(
    five_g_core_box: KarpenterBox, running_pools: dict[str, set[str]]
) -> None:
    upf = [
        c for c in claims(five_g_core_box, "upf") if c["metadata"]["name"] in running_pools["upf"]
    ]
    assert upf and all(claim["spec"]["expireAfter"] == "Never" for claim in upf)
    control = claims(five_g_core_box, "control")
    assert control and all(claim["spec"]["expireAfter"] != "Never" for claim in control)


#: What Karpenter reads of a pool (and hashes for drift).
KARPENTER_KINDS = ("NodePool", "EC2NodeClass", "NodeOverlay")


@pytest.fixture(scope="module")
def five_g_core_with_an_edge_pool(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """examples/5g-core.json with a third pool on day 2: an edge pool on n6."""
    config = json.loads((REPO / FIVE_G_CORE).read_text())
    config["node_pools"].append(
        {"name": "edge", "networks": ["n6"], "labels": {"example.com/network-function": "edge"}}
    )
    return synthesize_config(tmp_path_factory.mktemp("5g-core-with-edge"), config)


def test_a_new_pool_drifts_no_node_of_the_other_pools(
    five_g_core_box: KarpenterBox,
    running_pools: dict[str, set[str]],
    five_g_core_with_an_edge_pool: SynthesizedApp,
) -> None:
    """The new synth's pool objects, every pool's, applied as the deploy would: Karpenter
    takes the new pool, and its drift hashes of the existing pools' NodePools and
    EC2NodeClasses find no difference (a change the new pool made to theirs would drift and
    replace every running node of the core)."""
    box = five_g_core_box
    app = five_g_core_with_an_edge_pool
    later = AppTemplates.of_stage(app.stage, app.stage.outdir)
    objects = [
        o
        for _, objects in box.world.manifests(later)
        for o in objects
        if o["kind"] in KARPENTER_KINDS
    ]
    assert {o["metadata"]["name"] for o in objects} == {"upf", "control", "edge"}
    before = {pool: launched_names(box, pool) for pool in running_pools}
    apply(box.plane, objects)
    try:
        wait_for(
            lambda: any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in box.api.get(f"{NODEPOOLS}/edge").get("status", {}).get("conditions", [])
            ),
            DRIFT_SECONDS,
            "Karpenter took the edge pool (its NodePool Ready)",
            lambda: box.api.get(f"{NODEPOOLS}/edge").get("status"),
        )
        settle(KEPT_SECONDS)
        for pool in running_pools:
            assert not [c["metadata"]["name"] for c in claims(box, pool) if drifted(c)], pool
            assert launched_names(box, pool) == before[pool], pool
    finally:
        delete_objects(box.plane, [o for o in objects if o["metadata"]["name"] == "edge"])


def test_drift_of_one_pool_replaces_its_nodes_only(
    five_g_core_box: KarpenterBox, running_pools: dict[str, set[str]]
) -> None:
    box = five_g_core_box
    before = {pool: launched_names(box, pool) for pool in running_pools}
    touch_user_data(box, "control", "day 2: the control pool's user data changed")
    wait_for(
        lambda: any(drifted(c) for c in claims(box, "control")),
        DRIFT_SECONDS,
        "the control pool's NodeClaim drifted",
        lambda: claims(box, "control"),
    )
    # Karpenter's default budget (10% of the pool's nodes, at least one) lets it through.
    replaced = wait_for(
        lambda: (
            (names := launched_names(box, "control")) and not names & before["control"] and names
        ),
        DRIFT_SECONDS,
        "the control pool's drifted node replaced",
        lambda: [
            (c["metadata"]["name"], c.get("status", {}).get("conditions"))
            for c in claims(box, "control")
        ],
    )
    assert replaced
    assert not any(drifted(c) for c in claims(box, "upf"))
    assert launched_names(box, "upf") == before["upf"]


def test_a_closed_drift_window_keeps_the_drifted_node_and_an_open_one_replaces_it(
    five_g_core_box: KarpenterBox, running_pools: dict[str, set[str]]
) -> None:
    box = five_g_core_box
    pool = box.api.get(f"{NODEPOOLS}/upf")
    budgets = pool["spec"]["disruption"]["budgets"]
    assert budgets[0]["nodes"] == "0" and budgets[0]["reasons"] == ["Drifted"]
    # The window is closed (the nodes-0 budget active): its schedule hit an hour ago, for 22h.
    closed = [drift_budget(1, "22h"), *budgets[1:]]
    box.api.merge_patch(f"{NODEPOOLS}/upf", {"spec": {"disruption": {"budgets": closed}}})
    before = launched_names(box, "upf")
    touch_user_data(box, "upf", "day 2: the upf pool's user data changed")
    wait_for(
        lambda: any(drifted(c) for c in claims(box, "upf")),
        DRIFT_SECONDS,
        "the upf pool's NodeClaim drifted",
        lambda: claims(box, "upf"),
    )
    settle(KEPT_SECONDS)
    assert launched_names(box, "upf") == before
    assert all(c["metadata"]["name"] in before for c in claims(box, "upf"))
    # The window opens: the nodes-0 budget's 22 hours ended an hour ago.
    opened = [drift_budget(23, "22h"), *budgets[1:]]
    box.api.merge_patch(f"{NODEPOOLS}/upf", {"spec": {"disruption": {"budgets": opened}}})
    wait_for(
        lambda: (names := launched_names(box, "upf")) and not names & before,
        DRIFT_SECONDS,
        "the upf pool's drifted node replaced once its window opened",
        lambda: claims(box, "upf"),
    )
