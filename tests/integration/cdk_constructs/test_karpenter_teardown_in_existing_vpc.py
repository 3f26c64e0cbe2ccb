"""Node bootstrap and teardown in a VPC the network team owns (examples/existing-vpc.json): the
team's VPC, node subnets and their tags are as they were afterwards, and once the teardown is
done the Multus subnets and security groups the app created can go (what CloudFormation
deletes), leaving the team's resources behind.

The emulator holds a pre-created VPC and node subnets carrying the team's own tags; the network
stack's part (the Multus subnets and a group per network) is laid into it from the example's
network plan; nodes boot with the example's bootstrap and the teardown handler runs with the
properties of the example's synthesized template.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from config import parse_config
from config.model import ExistingVpcConfig
from config.network_plan import network_plan
from testing_support.multus_emulator import Ec2Emulator, PlannedVpc
from testing_support.teardown_emulation import TeardownRun, destroy_a_cluster, vpc_enis
from tests.conftest import EXISTING_VPC, REPO, SynthesizedApp
from tests.helpers import resources

pytestmark = pytest.mark.integration

CONFIG = parse_config(json.loads((REPO / EXISTING_VPC).read_text()))


def _existing_section() -> ExistingVpcConfig:
    existing = CONFIG.vpc.existing
    assert existing is not None
    return existing


EXISTING = _existing_section()
# Tags the network team put on its resources; the app must neither change nor remove them.
TEAM_TAGS = {"Name": "network-team-prod", "owner": "network-team", "cost-center": "4711"}


@pytest.fixture(scope="module")
def users_vpc(emulator: Ec2Emulator) -> tuple[str, dict[str, str]]:
    node_subnets = {
        az: subnet.cidr
        for az, subnet in zip(CONFIG.availability_zones, EXISTING.node_subnets, strict=True)
    }
    return emulator.create_users_vpc(EXISTING.cidrs[0], node_subnets, TEAM_TAGS)


def team_resources(emulator: Ec2Emulator, vpc_id: str, subnet_ids: list[str]) -> dict[str, Any]:
    """What EC2 says about the team's VPC and node subnets: state, CIDRs and tags."""

    def tags(resource: dict[str, Any]) -> dict[str, str]:
        return {tag["Key"]: tag["Value"] for tag in resource.get("Tags", [])}

    (vpc,) = emulator.ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"]
    subnets = emulator.ec2.describe_subnets(SubnetIds=subnet_ids)["Subnets"]
    return {
        vpc_id: (vpc["State"], vpc["CidrBlock"], tags(vpc)),
        **{
            subnet["SubnetId"]: (
                subnet["VpcId"],
                subnet["CidrBlock"],
                subnet["AvailabilityZone"],
                tags(subnet),
            )
            for subnet in subnets
        },
    }


@pytest.fixture(scope="module")
def before(emulator: Ec2Emulator, users_vpc: tuple[str, dict[str, str]]) -> dict[str, Any]:
    vpc_id, subnets = users_vpc
    return team_resources(emulator, vpc_id, list(subnets.values()))


@pytest.fixture(scope="module")
def planned(
    emulator: Ec2Emulator, users_vpc: tuple[str, dict[str, str]], before: dict[str, Any]
) -> PlannedVpc:
    vpc_id, node_subnets = users_vpc
    return emulator.plan_in_vpc(vpc_id, node_subnets, network_plan(CONFIG))


@pytest.fixture(scope="module")
def run(
    emulator: Ec2Emulator, planned: PlannedVpc, existing_vpc_app: SynthesizedApp
) -> TeardownRun:
    template = existing_vpc_app.template_json(existing_vpc_app.stage.cluster)
    (resource,) = resources(template, "Custom::KarpenterTeardown").values()
    return destroy_a_cluster(emulator, planned.vpc, CONFIG.cluster_name, resource["Properties"])


def test_the_teardown_leaves_no_eni_in_the_teams_vpc(run: TeardownRun) -> None:
    # three nodes (primary + one ENI per network each: n2, n3, n6), one attached and one
    # leaked VPC CNI ENI, one leaked Multus ENI
    assert len(run.vpc_enis_before) == 3 * (1 + len(CONFIG.multus.networks)) + 2 + 1
    assert run.complete
    assert run.vpc_enis_after == set()


def test_the_teardown_changes_nothing_of_the_teams(run: TeardownRun) -> None:
    """The handler's EC2 calls name no resource the network team owns (it only terminates
    instances and deletes ENIs the cluster tagged)."""
    changes = {c.action for c in run.calls if not c.action.startswith("Describe")}
    assert changes == {"TerminateInstances", "DeleteNetworkInterface"}


def test_after_bootstrap_teardown_and_stack_deletion_the_teams_vpc_is_as_it_was(
    emulator: Ec2Emulator,
    users_vpc: tuple[str, dict[str, str]],
    before: dict[str, Any],
    planned: PlannedVpc,
    run: TeardownRun,
) -> None:
    """The stack deletion removes only what the app created: EC2 deletes a subnet or group only
    once no ENI is in it (EC2 API Reference, DeleteSubnet: "You must terminate all running
    instances in the subnet before you can delete the subnet"), which the teardown made so."""
    assert run.complete
    for subnet_id in planned.vpc.multus_subnets.values():
        emulator.ec2.delete_subnet(SubnetId=subnet_id)
    for group_id in planned.security_groups.values():
        emulator.ec2.delete_security_group(GroupId=group_id)
    vpc_id, subnets = users_vpc
    assert team_resources(emulator, vpc_id, list(subnets.values())) == before
    left = emulator.ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    assert sorted(s["SubnetId"] for s in left["Subnets"]) == sorted(subnets.values())
    assert vpc_enis(emulator, planned.vpc) == set()
