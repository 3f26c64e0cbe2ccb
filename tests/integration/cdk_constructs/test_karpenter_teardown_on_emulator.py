"""The teardown handler destroying a cluster on the EC2 emulator: nothing of it stays in the VPC.

ENIs left in the VPC keep CloudFormation from deleting the subnets and security groups, and
keep EKS from deleting the cluster security group it created (aws/aws-cdk#18650,
aws/aws-k8s-tester#416): after the teardown, the VPC must hold no ENI at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from config import parse_config
from testing_support.multus_emulator import Ec2Emulator, EmulatedVpc
from testing_support.teardown_emulation import TeardownRun, destroy_a_cluster
from tests.conftest import SynthesizedApp
from tests.helpers import resources

pytestmark = pytest.mark.integration

CLUSTER = parse_config({}).cluster_name


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    return emulator.create_multus_vpc(network_count=2)


@pytest.fixture(scope="module")
def teardown_properties(default_app: SynthesizedApp) -> dict[str, Any]:
    template = default_app.template_json(default_app.stage.cluster)
    (resource,) = resources(template, "Custom::KarpenterTeardown").values()
    return dict(resource["Properties"])


@pytest.fixture(scope="module")
def run(
    emulator: Ec2Emulator, vpc: EmulatedVpc, teardown_properties: dict[str, Any]
) -> TeardownRun:
    return destroy_a_cluster(emulator, vpc, CLUSTER, teardown_properties)


def test_the_vpc_holds_no_eni_after_the_teardown(run: TeardownRun) -> None:
    # three nodes (primary + two Multus ENIs each), one attached and one leaked VPC CNI ENI,
    # one leaked Multus ENI
    assert len(run.vpc_enis_before) == 3 * 3 + 2 + 1
    assert run.complete
    assert run.responses == []  # the framework answers SUCCESS
    assert run.vpc_enis_after == set()


def test_the_leaked_enis_are_deleted_by_the_teardown_itself(run: TeardownRun) -> None:
    """The termination model deletes what EC2 deletes with an instance; the rest, available,
    is the teardown's: one Multus and one VPC CNI ENI."""
    deleted = [c for c in run.calls if c.action == "DeleteNetworkInterface" and c.status == 200]
    assert len(deleted) == 2
