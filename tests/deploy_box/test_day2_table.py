"""Every row of docs/operations.md's day-2 table ("What a change does"), through aws-cdk's
kubectl handler: the app of the row's `before` config created, then CloudFormation's update
events of its `after` config. Afterwards the cluster holds exactly the new template's objects
(nothing missing, nothing left over, `kubectl diff` of every manifest empty), no object of ours
that both templates have was replaced (same UID), and one whose desired content the change did
not touch was not rewritten either (same generation). Removing a pool or a network has its own,
closer tests in test_day2.py; the version bumps are the Kubernetes and Karpenter rows here.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testing_support.deploy_box.box import DeployBox
from testing_support.deploy_box.handler import HELM_CHART
from testing_support.deploy_box.inventory import (
    Identity,
    expected,
    helm_records,
    live,
    resource_types,
)
from testing_support.deploy_box.monitoring_crds import MONITORING_KINDS, apply_monitoring_crds
from testing_support.deploy_box.stack import StackEvent, resolved_properties
from testing_support.karpenter_box.app_world import AppTemplates
from tests.conftest import FIVE_G_CORE, REPO, SynthesizedApp, synthesize_config
from tests.deploy_box.checks import compare_with_template, manifest_differences
from tests.deploy_box.conftest import StartBox, assembly, templates

pytestmark = pytest.mark.deploy_box

OPERATIONS = REPO / "docs" / "operations.md"
TABLE_HEADER = "| change (config) |"

SEED_NETWORKS: list[dict[str, Any]] = [
    {
        "name": "multus1",
        "subnets": [
            {"cidr": "10.0.4.0/24", "reservation": "10.0.4.32/27"},
            {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
        ],
    },
    {
        "name": "multus2",
        "subnets": [
            {"cidr": "10.0.6.0/24", "reservation": "10.0.6.32/27"},
            {"cidr": "10.0.7.0/24", "reservation": "10.0.7.32/27"},
        ],
    },
]


def _networks(*edits: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The seed's networks with the keys of each (index, keys) edit set on that network."""
    networks = copy.deepcopy(SEED_NETWORKS)
    for index, keys in edits:
        networks[index].update(copy.deepcopy(keys))
    return networks


FIVE_G_CORE_CONFIG: dict[str, Any] = json.loads((REPO / FIVE_G_CORE).read_text())


def _upf_without_hugepages() -> dict[str, Any]:
    """examples/5g-core.json with the upf pool's node profile reserving no hugepages."""
    config = copy.deepcopy(FIVE_G_CORE_CONFIG)
    (upf,) = [pool for pool in config["node_pools"] if pool["name"] == "upf"]
    del upf["node_profile"]["hugepages_2mi"]
    return config


PINNED_TWO_ZONES = {"cluster": {"control_plane_availability_zones": ["us-west-2a", "us-west-2b"]}}


def _three_zones() -> dict[str, Any]:
    """The default config with a third AZ appended (one more CIDR in every subnet list) and the
    control plane kept in the two AZs the cluster was created with."""
    networks = copy.deepcopy(SEED_NETWORKS)
    networks[0]["subnets"].append({"cidr": "10.0.10.0/24", "reservation": "10.0.10.32/27"})
    networks[1]["subnets"].append({"cidr": "10.0.11.0/24", "reservation": "10.0.11.32/27"})
    return {
        "availability_zones": ["us-west-2a", "us-west-2b", "us-west-2c"],
        "vpc": {
            "public_subnet_cidrs": ["10.0.0.0/24", "10.0.1.0/24", "10.0.8.0/24"],
            "node_subnet_cidrs": ["10.0.2.0/24", "10.0.3.0/24", "10.0.9.0/24"],
        },
        "multus": {"networks": networks},
        **PINNED_TWO_ZONES,
    }


EDGE_POOL = {"name": "edge", "networks": ["multus1"], "instance_cpus": [4, 8]}


@dataclass(frozen=True)
class Day2Change:
    """A row of the table: `row` starts its first cell; `before` and `after` are config files."""

    row: str
    before: dict[str, Any]
    after: dict[str, Any]
    #: Whether the Prometheus Operator's CRDs are installed before the create.
    monitoring_crds: bool = False
    #: Whether the update sends the kubectl provider no event at all.
    no_kubectl_change: bool = False


CHANGES: dict[str, Day2Change] = {
    # The manifests and charts do not depend on the minor: CloudFormation invokes the handler
    # for none of them (its function keeps its ARN; only its layer is replaced).
    "kubernetes_bump": Day2Change(
        "bump `cluster.kubernetes_version`",
        {},
        {"cluster": {"kubernetes_version": "1.36"}},
        no_kubectl_change=True,
    ),
    "add_network": Day2Change(
        "add a network to `multus.networks`", {"multus": {"networks": _networks()[:1]}}, {}
    ),
    "change_reservation": Day2Change(
        "change a `reservation`",
        {},
        {
            "multus": {
                "networks": _networks(
                    (
                        0,
                        {
                            "subnets": [
                                {"cidr": "10.0.4.0/24", "reservation": "10.0.4.64/27"},
                                {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                            ]
                        },
                    )
                )
            }
        },
    ),
    "add_zone": Day2Change("add an AZ", PINNED_TWO_ZONES, _three_zones()),
    "remove_last_zone": Day2Change("remove the last AZ", _three_zones(), PINNED_TWO_ZONES),
    "move_subnet": Day2Change(
        "move a Multus subnet",
        {},
        {
            "multus": {
                "networks": _networks(
                    (
                        1,
                        {
                            "subnets": [
                                {"cidr": "10.0.6.0/24", "reservation": "10.0.6.32/27"},
                                {"cidr": "10.0.8.0/24", "reservation": "10.0.8.32/27"},
                            ]
                        },
                    )
                )
            }
        },
    ),
    "security_group_rules": Day2Change(
        "change a network's `security_group` rules",
        {},
        {
            "multus": {
                "networks": _networks(
                    (
                        0,
                        {
                            "security_group": {
                                "ingress": [
                                    {"protocol": "udp", "ports": "2152", "cidr": "10.20.0.0/16"}
                                ],
                            }
                        },
                    )
                )
            }
        },
        no_kubectl_change=True,
    ),
    "add_route": Day2Change(
        "add a route to a network's `routes`",
        {},
        {
            "multus": {
                "networks": _networks(
                    (
                        1,
                        {
                            "routes": [
                                {
                                    "destination": "172.16.0.0/16",
                                    "network_interface_id": "eni-0123456789abcdef0",
                                },
                            ]
                        },
                    )
                )
            }
        },
    ),
    "add_pool": Day2Change(
        "add a node pool to `node_pools`", {}, {"node_pools": [{"name": "multus"}, EDGE_POOL]}
    ),
    "dual_stack": Day2Change(
        "make a network dual-stack",
        {},
        {
            "vpc": {"ipv6": True},
            "multus": {
                "networks": _networks(
                    (
                        1,
                        {
                            "ipv6": {
                                "pod_range_prefix_length": 112,
                                "pod_range_offset": 1,
                            }
                        },
                    )
                )
            },
        },
    ),
    "instance_sizes": Day2Change(
        "change a pool's instance sizes",
        {},
        {"node_pools": [{"name": "multus", "instance_cpus": [4, 8, 16, 32]}]},
    ),
    "node_profile": Day2Change(
        "change a pool's `node_profile`", FIVE_G_CORE_CONFIG, _upf_without_hugepages()
    ),
    "monitoring_on": Day2Change(
        "turn `monitoring.prometheus_operator` on or off",
        {},
        {"monitoring": {"prometheus_operator": True}},
        monitoring_crds=True,
    ),
    "monitoring_off": Day2Change(
        "turn `monitoring.prometheus_operator` on or off",
        {"monitoring": {"prometheus_operator": True}},
        {},
        monitoring_crds=True,
    ),
}

#: 1.13.1 -> the default (1.14.1): the box serves both releases' charts from its registry.
KARPENTER_BUMP = Day2Change("bump `karpenter.version`", {"karpenter": {"version": "1.13.1"}}, {})

#: Rows with tests of their own: the bump below, and in test_day2.py the removal of a pool,
#: which also checks the remaining pools' objects.
COVERED_ELSEWHERE = (KARPENTER_BUMP.row, "remove a node pool from `node_pools`")


def table_rows() -> list[str]:
    """The first cell of each row of the day-2 table."""
    lines = OPERATIONS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TABLE_HEADER))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip())
    return rows


def test_every_row_of_the_day2_table_has_a_deploy_box_test() -> None:
    starts = [change.row for change in CHANGES.values()] + list(COVERED_ELSEWHERE)
    untested = [row for row in table_rows() if not any(row.startswith(s) for s in starts)]
    assert untested == []
    unknown = [s for s in starts if not any(row.startswith(s) for row in table_rows())]
    assert unknown == [], "a test names a row the table does not have"


class Synthesized:
    """Apps synthesized once per distinct config in this module."""

    def __init__(self, directory: Path, default_app: SynthesizedApp) -> None:
        self.directory = directory
        self.apps: dict[str, SynthesizedApp] = {json.dumps({}): default_app}

    def __call__(self, config: dict[str, Any]) -> SynthesizedApp:
        key = json.dumps(config, sort_keys=True)
        if key not in self.apps:
            name = re.sub(r"[^a-z0-9]+", "-", key.lower())[:60].strip("-") or "config"
            self.apps[key] = synthesize_config(self.directory / f"{len(self.apps)}-{name}", config)
        return self.apps[key]


@pytest.fixture(scope="module")
def synthesized(
    tmp_path_factory: pytest.TempPathFactory, default_app: SynthesizedApp
) -> Iterator[Synthesized]:
    yield Synthesized(tmp_path_factory.mktemp("day2-table"), default_app)


def _ours(box: DeployBox, baseline: set[Identity]) -> dict[Identity, dict[str, Any]]:
    return {i: o for i, o in live(box.plane).items() if i not in baseline}


def _uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def _desired(box: DeployBox, app: AppTemplates) -> dict[Identity, dict[str, Any]]:
    _, namespaced = resource_types(box.plane)
    return expected(resolved_properties(app), box.charts, box.helm, namespaced)


@dataclass(frozen=True)
class Outcome:
    """The box after the update, the update's events, and the objects of ours it holds."""

    box: DeployBox
    events: list[StackEvent]
    found: dict[Identity, dict[str, Any]]


def _deploy_then_change(
    change: Day2Change, synthesized: Synthesized, start_box: StartBox
) -> Outcome:
    """Creates `change.before`, updates to `change.after`, and checks what every row must hold
    (module docstring)."""
    before_app, after_app = synthesized(change.before), synthesized(change.after)
    assert before_app.synth_error is None and after_app.synth_error is None
    old, new = templates(before_app), templates(after_app)
    box = start_box(old, new)
    if change.monitoring_crds:
        apply_monitoring_crds(box.plane)
    baseline = set(live(box.plane))
    box.create(old, assembly(before_app))
    previous = _ours(box, baseline)
    desired_before = _desired(box, old)

    events = box.update(old, new, assembly(after_app))

    comparison = compare_with_template(box, new, baseline)
    assert comparison.missing == []
    assert comparison.left_over == [], "\n".join(comparison.left_over)
    assert manifest_differences(box, new) == {}
    if change.no_kubectl_change:
        assert events == []
    else:
        assert events, "the change reaches the cluster through the handler"
    desired_after = _desired(box, new)
    now = _ours(box, baseline)
    kept = set(previous) & set(now)
    replaced = [str(i) for i in sorted(kept) if _uid(now[i]) != _uid(previous[i])]
    assert replaced == []
    untouched = [
        i for i in kept if i in desired_before and desired_before[i] == desired_after.get(i)
    ]
    rewritten = [
        str(i)
        for i in sorted(untouched)
        if now[i]["metadata"].get("generation") != previous[i]["metadata"].get("generation")
    ]
    assert rewritten == []
    assert untouched, "some objects are the same before and after"
    return Outcome(box, events, comparison.found)


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_day2_change_leaves_exactly_the_new_templates_objects(
    name: str, synthesized: Synthesized, start_box: StartBox
) -> None:
    change = CHANGES[name]
    outcome = _deploy_then_change(change, synthesized, start_box)

    monitoring = {i.kind for i in outcome.found} & MONITORING_KINDS
    assert monitoring == (MONITORING_KINDS if "monitoring" in change.after else set())
    overlays = sorted(i.name for i in outcome.found if i.kind == "NodeOverlay")
    assert overlays == (["upf"] if change.after == FIVE_G_CORE_CONFIG else [])


def test_a_karpenter_version_bump_upgrades_the_crds_then_the_controller(
    synthesized: Synthesized, start_box: StartBox
) -> None:
    outcome = _deploy_then_change(KARPENTER_BUMP, synthesized, start_box)

    releases = [e.properties["Release"] for e in outcome.events if e.resource_type == HELM_CHART]
    assert releases == ["karpenter-crd", "karpenter"]
    assert [e.request_type for e in outcome.events if e.resource_type == HELM_CHART] == [
        "Update",
        "Update",
    ]
    records = {record for _, record in helm_records(outcome.found).items()}
    assert {("karpenter-crd", 2), ("karpenter", 2)} <= records
    # The CRDs in the cluster are the new release's (its karpenter-crd chart, rendered).
    crds = {i.name: o for i, o in outcome.found.items() if i.kind == "CustomResourceDefinition"}
    new_crds = {
        i.name: o
        for i, o in _desired(outcome.box, templates(synthesized({}))).items()
        if i.kind == "CustomResourceDefinition"
    }
    assert sorted(crds) == sorted(new_crds)
    for name, crd in new_crds.items():
        assert crds[name]["spec"]["versions"] == crd["spec"]["versions"], name
    (controller,) = [
        o for i, o in outcome.found.items() if i.kind == "Deployment" and i.name == "karpenter"
    ]
    (image,) = [c["image"] for c in controller["spec"]["template"]["spec"]["containers"]]
    assert image.split("@")[0].endswith(":1.14.1"), image
