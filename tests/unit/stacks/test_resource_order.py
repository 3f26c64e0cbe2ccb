"""CloudFormation's order on every stack of every synthesized app (the default, every example,
the feature configs of tests/conftest.py, the pipeline's stages), from the templates alone
(testing_support/cloudformation_order.py):

- every custom resource depends on each function, state machine, role, policy and access entry
  its provider runs on, so none is created after its first request or deleted while its delete
  runs (aws/aws-cdk#9840 is that race in AwsCustomResource; `cdk destroy` failed on every config
  when the teardown's isComplete lost its four policies at the start of the stack's deletion);
- everything that uses the VPC's IPv6 block depends on it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from testing_support.cloudformation_order import StackOrder
from testing_support.custom_resource_chains import provider_chains, unheld_chain_members
from testing_support.ipv6_block_users import ipv6_blocks, users_not_waiting
from tests.conftest import APP_FIXTURES

REPO = Path(__file__).resolve().parents[3]
# fixture -> the example it synthesizes (None: the default app or a feature config)
EXAMPLES = {
    "three_by_three_app": "examples/three-az-three-networks.json",
    "five_g_core_app": "examples/5g-core.json",
    "existing_vpc_app": "examples/existing-vpc.json",
    "dual_stack_app": "examples/dual-stack.json",
    "node_prefix_app": "examples/node-prefix.json",
    "host_device_app": "examples/host-device.json",
    "pipeline_synth": "examples/pipeline-three-environments.json",
}
APPS = {**dict.fromkeys(APP_FIXTURES), **EXAMPLES}


def templates(request: pytest.FixtureRequest, fixture: str) -> dict[str, dict[str, Any]]:
    """Every template the app wrote (a pipeline's stages are assemblies of their own)."""
    outdir = Path(request.getfixturevalue(fixture).outdir)
    return {
        path.name: json.loads(path.read_text()) for path in sorted(outdir.rglob("*.template.json"))
    }


def test_every_example_is_checked() -> None:
    examples = {str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*.json")}
    assert examples == {example for example in APPS.values() if example}


@pytest.mark.parametrize("fixture", sorted(APPS))
def test_every_custom_resource_holds_its_provider_chain(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    found = templates(request, fixture)
    chains = [chain for template in found.values() for chain in provider_chains(template)]
    # the reservations (network), the AMI check, teardown and kubectl resources (cluster)
    assert len(chains) >= 10
    assert {name: unheld_chain_members(t) for name, t in found.items()} == {
        name: {} for name in found
    }


@pytest.mark.parametrize("fixture", sorted(APPS))
def test_every_user_of_the_ipv6_block_waits_for_it(
    request: pytest.FixtureRequest, fixture: str
) -> None:
    found = templates(request, fixture)
    assert {name: users_not_waiting(t) for name, t in found.items()} == {name: {} for name in found}


def test_the_dual_stack_example_has_a_block_with_users(dual_stack_app: Any) -> None:
    """So that the rule above is not empty: the block and what uses it (the /64s, the IPv6
    egress routes, the IPv6 reservations, the group's IPv6 rule)."""
    network = dual_stack_app.template_json(dual_stack_app.stage.network)
    (block,) = ipv6_blocks(network)
    order = StackOrder(network)
    users = {r["Type"] for lid, r in network["Resources"].items() if order.depends_on(lid, block)}
    assert {
        "AWS::EC2::Subnet",
        "AWS::EC2::Route",
        "Custom::SubnetCidrReservation",
        "AWS::EC2::SecurityGroup",
    } <= users


def nothing_depends_on(template: dict[str, Any], grant: str) -> dict[str, Any]:
    """The template with every DependsOn naming `grant` dropped (as a construct that attached
    the policy without making anything depend on it would write it)."""
    changed = copy.deepcopy(template)
    for resource in changed["Resources"].values():
        depends_on = resource.get("DependsOn")
        if isinstance(depends_on, list):
            resource["DependsOn"] = [d for d in depends_on if d != grant]
        elif depends_on == grant:
            del resource["DependsOn"]
    return changed


def test_a_grant_nothing_depends_on_is_found_for_every_custom_resource_it_serves(
    default_app: Any,
) -> None:
    checked = 0
    for template in default_app.templates_by_stack_name().values():
        chains = provider_chains(template)
        for grant in sorted({g for chain in chains for g in chain.grants}):
            found = unheld_chain_members(nothing_depends_on(template, grant))
            served = {c.custom_resource for c in chains if grant in c.grants}
            assert {cr for cr, members in found.items() if grant in members} == served, grant
            checked += 1
    assert checked >= 10


def test_the_teardown_outlives_the_policies_of_its_polls(default_app: Any) -> None:
    """The teardown's delete polls isComplete until no node or ENI is left: each policy of the
    isComplete role is deleted only after the teardown (reverse creation order)."""
    cluster = default_app.template_json(default_app.stage.cluster)
    order = StackOrder(cluster)
    (teardown,) = [
        lid for lid, r in cluster["Resources"].items() if r["Type"] == "Custom::KarpenterTeardown"
    ]
    (chain,) = [c for c in provider_chains(cluster) if c.custom_resource == teardown]
    is_complete_policies = {
        lid
        for lid in chain.grants
        if lid.startswith("TeardownIsComplete")
        and cluster["Resources"][lid]["Type"] == "AWS::IAM::Policy"
    }
    assert len(is_complete_policies) == 4
    wave = {lid: i for i, w in enumerate(order.deletion_waves) for lid in w}
    assert all(wave[teardown] < wave[policy] for policy in is_complete_policies)
