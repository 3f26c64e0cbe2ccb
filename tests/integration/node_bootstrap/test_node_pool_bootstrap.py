"""Each node pool's user-data on the emulator: a node of the pool attaches exactly the pool's
networks, at the device indexes of its view of the network plan, with the security groups its
plan rows name (examples/two-node-pools.json: upf attaches n3 + n6, control n2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import AppConfig, parse_config
from config.network_plan import NetworkPlanRow
from config.node_bootstrap_plan import node_bootstrap_props
from node_bootstrap import render_user_data
from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, EmulatedVpc
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import multus_enis

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CLUSTER = "pools-cluster"


@pytest.fixture(scope="module")
def config() -> AppConfig:
    return parse_config(json.loads((REPO / "examples" / "two-node-pools.json").read_text()))


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator, config: AppConfig) -> EmulatedVpc:
    """The config's Multus subnets in the emulator, and one security group per group name the
    network plan gives (the network stack's layout)."""
    ec2 = emulator.ec2
    vpc_id = ec2.create_vpc(CidrBlock=config.vpc.cidr)["Vpc"]["VpcId"]

    def subnet(cidr: str, az: str) -> str:
        created = ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)
        return str(created["Subnet"]["SubnetId"])

    private = {
        az: subnet(cidr, az)
        for az, cidr in zip(config.availability_zones, config.vpc.node_subnet_cidrs, strict=True)
    }
    multus = {
        (network.name, az): subnet(multus_subnet.cidr, az)
        for network in config.multus.networks
        for az, multus_subnet in zip(config.availability_zones, network.subnets, strict=True)
    }
    return EmulatedVpc(
        vpc_id,
        private,
        multus,
        security_group_id="",  # unused: groups() gives each row's
        networks=tuple(network.name for network in config.multus.networks),
    )


@pytest.fixture(scope="module")
def groups(emulator: Ec2Emulator, config: AppConfig, vpc: EmulatedVpc) -> dict[str, str]:
    """Security group name of the plan -> the emulator's group ID."""
    names = sorted(
        {row.security_group for pool in config.node_pools for row in config.pool_plan(pool)}
    )
    return {
        name: emulator.ec2.create_security_group(
            GroupName=f"{name}-{vpc.vpc_id}", Description=f"Multus {name}", VpcId=vpc.vpc_id
        )["GroupId"]
        for name in names
    }


def pool_user_data(
    config: AppConfig, pool_name: str, vpc: EmulatedVpc, groups: dict[str, str]
) -> str:
    (pool,) = [pool for pool in config.node_pools if pool.name == pool_name]

    def subnet_id(row: NetworkPlanRow) -> str:
        return vpc.multus_subnets[row.network, row.availability_zone]

    return render_user_data(
        node_bootstrap_props(
            CLUSTER,
            config.pool_plan(pool),
            subnet_id=subnet_id,
            security_group_id=lambda row: groups[row.security_group],
        )
    )


@pytest.mark.parametrize("pool_name", ["upf", "control"])
@pytest.mark.parametrize("az", AVAILABILITY_ZONES)
def test_a_pools_node_attaches_exactly_its_networks_at_its_indexes_with_their_groups(
    emulator: Ec2Emulator,
    config: AppConfig,
    vpc: EmulatedVpc,
    groups: dict[str, str],
    pool_name: str,
    az: str,
) -> None:
    (pool,) = [pool for pool in config.node_pools if pool.name == pool_name]
    rows = [row for row in config.pool_plan(pool) if row.availability_zone == az]
    instance_id = emulator.launch_instance(vpc, az, CLUSTER)
    run = emulator.run_bootstrap(pool_user_data(config, pool_name, vpc, groups), instance_id)
    assert run.returncode == 0, run.output

    enis = multus_enis(emulator, instance_id)
    expected = {
        row.device_index: (vpc.multus_subnets[row.network, az], [groups[row.security_group]])
        for row in rows
    }
    assert {
        index: (eni["SubnetId"], [group["GroupId"] for group in eni["Groups"]])
        for index, eni in enis.items()
    } == expected
    # One create per network of the pool, none for the networks of other pools.
    created = [call.params["SubnetId"] for call in run.actions("CreateNetworkInterface")]
    assert sorted(created) == sorted(vpc.multus_subnets[row.network, az] for row in rows)
