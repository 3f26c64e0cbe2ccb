"""Scheduling truth with the real DaemonSet controller and scheduler, for the default app and
every example, each applied for real: a Node per pool and AZ registered as Karpenter registers
them (the pool's labels, its taints and the startup taint; tests/cluster_box/nodes.py) and one
of the system node group as EKS registers it. What must run where comes from the config (its
pools and the networks each attaches), not from the template: Multus and Whereabouts on every
node; on a pool with Multus networks its startup-taint remover, and the pod IP agent when one
of its networks has per-pod addresses; on the system nodes nothing of a pool, and the
Whereabouts reconciler. The DaemonSet controller places a pod only where it tolerates every
NoSchedule and NoExecute taint (kubernetes pkg/controller/daemon/daemon_controller.go,
predicates), so a remover without the pool's own tolerations never lifts the startup taint.

Sample workloads (the three-AZ example): while the startup taint is on, none lands; once it is
lifted, each lands in its AZ on a node whose pool attaches its networks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from charts.sample_workloads import deployment_name
from config import AppConfig
from config.node_labels import pool_object_name
from testing_support.cluster_box.control_plane import ControlPlane
from tests.cluster_box.nodes import (
    bound,
    delete_app,
    karpenter_node,
    register_node,
    remove_taint,
    system_node,
    wait_until,
)
from tests.cluster_box.objects import apply_app
from tests.conftest import APP_FIXTURES, SynthesizedApp
from tests.unit.stacks.test_cluster_workloads import by_kind

pytestmark = pytest.mark.cluster_box

EVERY_NODE = {"kube-multus-ds", "whereabouts"}
SYSTEM_ONLY = {"whereabouts-reconciler"}
STARTUP_TAINT_KEY = "multus/not-ready"


def attached_networks(config: AppConfig, pool_name: str) -> set[str]:
    (pool,) = [p for p in config.node_pools if p.name == pool_name]
    return {row.network for row in config.pool_plan(pool)}


def daemons_for_pool(config: AppConfig, pool_name: str) -> set[str]:
    """What the config says must run on a node of the pool."""
    (pool,) = [p for p in config.node_pools if p.name == pool_name]
    plan = config.pool_plan(pool)
    expected = set(EVERY_NODE)
    if plan:
        expected.add(pool_object_name("cleartaints", pool.name))
    if any(row.ip_management.pod_ip_agent for row in plan):
        expected.add(pool_object_name("multus-pod-ips", pool.name))
    return expected


@dataclass(frozen=True)
class Placement:
    """The nodes registered for an app: node -> its pool ('' for the system node) and AZ."""

    pool: dict[str, str]
    zone: dict[str, str]
    expected: dict[str, set[str]]


def register_app_nodes(plane: ControlPlane, app: SynthesizedApp, prefix: str) -> Placement:
    """A node per NodePool and AZ, and a system node; what each must run, from the config."""
    config = app.stage.config
    template = app.template_json(app.stage.cluster)
    placement = Placement(pool={}, zone={}, expected={})
    for node_pool in by_kind(template, "NodePool"):
        pool = node_pool["metadata"]["name"]
        for zone in config.availability_zones:
            name = f"{prefix}-{pool}-{zone}"
            register_node(plane, name, *karpenter_node(node_pool, zone))
            placement.pool[name], placement.zone[name] = pool, zone
            placement.expected[name] = daemons_for_pool(config, pool)
    system = f"{prefix}-system"
    register_node(plane, system, *system_node(template, config.availability_zones[0]))
    placement.pool[system], placement.zone[system] = "", config.availability_zones[0]
    placement.expected[system] = EVERY_NODE | SYSTEM_ONLY
    return placement


@pytest.fixture(scope="module", params=APP_FIXTURES)
def applied(
    cluster_box: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[tuple[SynthesizedApp, Placement, dict[str, set[str]]]]:
    """The app applied and its nodes registered; node -> owners of the pods bound there once
    every expected one is (or waiting is over)."""
    app: SynthesizedApp = request.getfixturevalue(request.param)
    template = app.template_json(app.stage.cluster)
    prefix = request.param.removesuffix("_app").replace("_", "-")
    placement = Placement(pool={}, zone={}, expected={})
    try:
        apply_app(cluster_box, template)
        placement = register_app_nodes(cluster_box, app, prefix)
        wait_until(
            lambda: all(
                want <= bound(cluster_box).get(node, set())
                for node, want in placement.expected.items()
            )
        )
        yield app, placement, bound(cluster_box)
    finally:
        delete_app(cluster_box, template, list(placement.pool))


def owners_of_kind(template: dict[str, Any], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in by_kind(template, kind)}


def test_every_daemon_set_runs_where_the_config_says_and_nowhere_else(
    applied: tuple[SynthesizedApp, Placement, dict[str, set[str]]],
) -> None:
    app, placement, now_bound = applied
    template = app.template_json(app.stage.cluster)
    ours = owners_of_kind(template, "DaemonSet") | SYSTEM_ONLY
    placed = {node: now_bound.get(node, set()) & ours for node in placement.expected}
    assert placed == placement.expected


# The one app with sample workloads (tests.conftest: three_by_three_app turns them on).
@pytest.mark.parametrize("applied", ["three_by_three_app"], indirect=True)
def test_sample_workloads_wait_for_the_startup_taint_then_land_on_their_pool_and_zone(
    cluster_box: ControlPlane, applied: tuple[SynthesizedApp, Placement, dict[str, set[str]]]
) -> None:
    app, placement, now_bound = applied
    config = app.stage.config
    template = app.template_json(app.stage.cluster)
    workloads = owners_of_kind(template, "Deployment") - SYSTEM_ONLY
    assert workloads
    assert not any(owners & workloads for owners in now_bound.values())
    acceptable: dict[str, set[str]] = {}
    for pool in config.node_pools:
        for zone in config.availability_zones:
            name = deployment_name(zone, pool.name)
            if name in workloads:
                networks = attached_networks(config, pool.name)
                acceptable[name] = {
                    node
                    for node, node_pool in placement.pool.items()
                    if node_pool
                    and placement.zone[node] == zone
                    and attached_networks(config, node_pool) >= networks
                }
    assert set(acceptable) == workloads
    for node, node_pool_name in placement.pool.items():
        if node_pool_name:
            remove_taint(cluster_box, node, STARTUP_TAINT_KEY)

    def landed() -> dict[str, str]:
        return {
            owner: node
            for node, owners in bound(cluster_box).items()
            for owner in owners & workloads
        }

    assert wait_until(lambda: set(landed()) == workloads), landed()
    assert all(node in acceptable[name] for name, node in landed().items()), landed()
