"""Each node pool's user-data on the emulator: a node of the pool attaches exactly the pool's
networks, at the device indexes of its view of the network plan, with the security groups its
plan rows name (examples/5g-core.json: upf attaches n3 + n6, control n2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import AppConfig, parse_config
from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, PlannedVpc
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import multus_enis

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CLUSTER = "pools-cluster"


@pytest.fixture(scope="module")
def config() -> AppConfig:
    return parse_config(json.loads((REPO / "examples" / "5g-core.json").read_text()))


@pytest.fixture(scope="module")
def planned(emulator: Ec2Emulator, config: AppConfig) -> PlannedVpc:
    return emulator.create_config_vpc(config)


@pytest.mark.parametrize("pool_name", ["upf", "control"])
@pytest.mark.parametrize("az", AVAILABILITY_ZONES)
def test_a_pools_node_attaches_exactly_its_networks_at_its_indexes_with_their_groups(
    emulator: Ec2Emulator, config: AppConfig, planned: PlannedVpc, pool_name: str, az: str
) -> None:
    (pool,) = [pool for pool in config.node_pools if pool.name == pool_name]
    plan = config.pool_plan(pool)
    rows = [row for row in plan if row.availability_zone == az]
    instance_id = emulator.launch_instance(planned.vpc, az, CLUSTER)
    run = emulator.run_bootstrap(planned.user_data(CLUSTER, plan), instance_id)
    assert run.returncode == 0, run.output

    subnets = planned.vpc.multus_subnets
    expected = {
        row.device_index: (subnets[row.network, az], [planned.security_groups[row.security_group]])
        for row in rows
    }
    assert {
        index: (eni["SubnetId"], [group["GroupId"] for group in eni["Groups"]])
        for index, eni in multus_enis(emulator, instance_id).items()
    } == expected
    # One create per network of the pool, none for the networks of other pools.
    created = [call.params["SubnetId"] for call in run.actions("CreateNetworkInterface")]
    assert sorted(created) == sorted(subnets[row.network, az] for row in rows)
