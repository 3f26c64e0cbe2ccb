"""A node that loses power in the middle of its bootstrap leaves Multus ENIs behind, and the
product's sweeper (cdk_constructs/multus_eni_sweeper.py, its handler's `sweep`) deletes them once
EC2 has terminated the instance: no ENI of ours outlives the instance.

The node is a box of the default app's pool on the emulator (testing_support/node_box/aws.py),
stopped by the EC2 side at the worst moments the bootstrap has: one network's ENI created but
not yet attached (its AttachNetworkInterface held until the power is cut), the other's attached
but before DeleteOnTermination is set (the power cut when that call arrives, so EC2 never
carries it out). What EC2 does at termination is the emulator's (Ec2Emulator.terminated: the
attached ENI without DeleteOnTermination is detached, the unattached one stays).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdk_constructs.multus_eni_sweeper_handler import index as sweeper
from config.network_plan import networks_in_order
from node_bootstrap.renderer import INSTANCE_TAG_KEY, NETWORK_TAG_KEY, OWNER_TAG_KEY
from testing_support.multus_emulator import Ec2Emulator
from testing_support.node_box import NodeImage, Unavailable
from testing_support.node_box.aws import AwsNode
from tests.helpers import unavailable_here
from tests.node_box.conftest import AZ, default_config, pool_user_data, record_boots

pytestmark = pytest.mark.node_box

#: From power-on to the bootstrap's EC2 calls under TCG (a boot is 60-150 s here).
BOOTSTRAP_TIMEOUT = 400.0


@pytest.fixture
def proxy_model(emulator: Ec2Emulator) -> Iterator[None]:
    """The shared proxy's model hook, put back as it was after the test."""
    before = emulator.proxy.model
    yield
    emulator.proxy.model = before


def test_termination_mid_bootstrap_leaves_no_multus_eni_once_the_sweeper_ran(
    node_image: NodeImage, emulator: Ec2Emulator, tmp_path: Path, proxy_model: None
) -> None:
    config = default_config()
    (pool,) = config.node_pools
    planned = emulator.create_config_vpc(config)
    plan = config.pool_plan(pool)
    attached_first, held = [row for row in networks_in_order(plan) if row.availability_zone == AZ]
    instance_id = emulator.launch_instance(planned.vpc, AZ, config.cluster_name)
    user_data = pool_user_data(config, pool, planned.user_data(config.cluster_name, plan))
    node = AwsNode(node_image, tmp_path, emulator, instance_id, user_data)

    attach_held = threading.Event()
    power_cut = threading.Event()
    started = time.monotonic()
    cut_after: list[float] = []  # seconds from power-on to the cut

    def ec2_side(action: str, params: dict[str, str]) -> tuple[int, str, str] | None:
        if action == "AttachNetworkInterface" and params.get("DeviceIndex") == str(
            held.device_index
        ):
            attach_held.set()
            power_cut.wait(timeout=BOOTSTRAP_TIMEOUT)
            return 500, "InternalError", "the instance lost power"
        if action == "ModifyNetworkInterfaceAttribute" and (
            params.get("Attachment.DeleteOnTermination") == "true"
        ):
            attach_held.wait(timeout=60)  # both networks at their worst moment
            node.box.kill()
            cut_after.append(time.monotonic() - started)
            power_cut.set()
            return 500, "InternalError", "the instance lost power"
        return None

    emulator.proxy.model = ec2_side
    try:
        try:
            node.start()
        except Unavailable as error:
            unavailable_here(f"the node box cannot run here: {error}")
        assert power_cut.wait(timeout=BOOTSTRAP_TIMEOUT), (
            f"the bootstrap made no DeleteOnTermination call; console tail:\n"
            f"{node.box.console()[-3000:]}"
        )
    finally:
        node.stop()
        record_boots("termination (power-on to the cut)", cut_after)

    ours = {eni["NetworkInterfaceId"]: eni for eni in emulator.instance_enis(instance_id)}
    by_network = {
        {tag["Key"]: tag["Value"] for tag in eni["TagSet"]}[NETWORK_TAG_KEY]: eni_id
        for eni_id, eni in ours.items()
        if any(tag["Key"] == INSTANCE_TAG_KEY for tag in eni["TagSet"])
    }
    assert set(by_network) == {attached_first.network, held.network}
    attached = ours[by_network[attached_first.network]]
    assert attached["Attachment"]["DeviceIndex"] == attached_first.device_index
    assert ours[by_network[held.network]]["Status"] == "available"

    emulator.terminate_instances([instance_id])
    leftovers = {eni["NetworkInterfaceId"] for eni in emulator.instance_enis(instance_id)}
    # what the cut left: both Multus ENIs, available, with nothing in EC2 that deletes them
    assert leftovers == set(by_network.values())

    deleted = sweeper.sweep(
        emulator.ec2,
        cluster=config.cluster_name,
        owner_tag=OWNER_TAG_KEY,
        instance_tag=INSTANCE_TAG_KEY,
    )
    assert sorted(deleted) == sorted(by_network.values())
    assert emulator.instance_enis(instance_id) == []
