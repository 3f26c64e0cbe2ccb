"""Fixtures of the bootstrap script's tests: one emulator, a two-network VPC and the rendered
user-data per module (a module may override them, as the node-prefix tests do)."""

from __future__ import annotations

import pytest

from node_bootstrap import render_user_data
from testing_support.multus_emulator import Ec2Emulator, EmulatedVpc

CLUSTER = "telco-cluster"


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    return emulator.create_multus_vpc(network_count=2)


@pytest.fixture(scope="module")
def user_data(vpc: EmulatedVpc) -> str:
    return render_user_data(vpc.bootstrap_props(CLUSTER))
