"""A network on the second network card: the user-data the cluster stack renders for a pool
of c6in.32xlarge (two cards, config/instance_types.py), run with bash against the emulator
(testing_support/network_cards.py models EC2's per-card device numbering, which moto lacks)."""

from __future__ import annotations

import pytest

from config import parse_config
from config.node_bootstrap_plan import node_bootstrap_props
from node_bootstrap import render_user_data
from node_bootstrap.renderer import NETWORK_TAG_KEY
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, EmulatedVpc
from tests.helpers import seed_network
from tests.integration.node_bootstrap.conftest import CLUSTER

pytestmark = pytest.mark.integration

TWO_CARDS = "c6in.32xlarge"


@pytest.fixture(scope="module")
def user_data(vpc: EmulatedVpc) -> str:
    config = parse_config(
        {
            "multus": {
                "networks": [
                    seed_network(1, connection_tracking={"udp_timeout": 60}),
                    seed_network(
                        2, network_card=1, connection_tracking={"udp_stream_timeout": 120}
                    ),
                ]
            },
            "node_pools": [{"name": "upf", "instance_families": ["c6in"], "instance_cpus": [128]}],
        }
    )
    props = node_bootstrap_props(
        CLUSTER,
        config.pool_plan(config.node_pools[0]),
        subnet_id=lambda row: vpc.multus_subnets[row.network, row.availability_zone],
        security_group_id=lambda row: vpc.security_group_ids[row.security_group],
    )
    return render_user_data(props)


@pytest.fixture(scope="module")
def node(emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str) -> tuple[str, BootstrapRun]:
    instance_id = emulator.launch_instance(vpc, "us-west-2a", CLUSTER, instance_type=TWO_CARDS)
    run = emulator.run_bootstrap(user_data, instance_id)
    assert run.returncode == 0, run.output
    return instance_id, run


def network_of(emulator: Ec2Emulator, eni_id: str) -> str:
    eni = emulator.ec2.describe_network_interfaces(NetworkInterfaceIds=[eni_id])
    tags = eni["NetworkInterfaces"][0]["TagSet"]
    return str(next(tag["Value"] for tag in tags if tag["Key"] == NETWORK_TAG_KEY))


def test_each_attach_names_its_networks_card_and_the_index_on_that_card(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    """AttachNetworkInterface takes NetworkCardIndex (EC2 API reference; the emulator refuses a
    parameter botocore's model lacks); device indexes count per card, so both ENIs are device 1
    (AWS CLI example "attach a network interface to an instance with multiple network cards":
    --network-card-index 1 --device-index 1). multus1's card 0 is spelled out: EC2 checked a
    free card-0 slot against the other cards' when it was left out (cilium/cilium#42512)."""
    _, run = node
    attached = {
        network_of(emulator, call.params["NetworkInterfaceId"]): (
            call.params["DeviceIndex"],
            call.params.get("NetworkCardIndex"),
        )
        for call in run.actions("AttachNetworkInterface")
        if call.status == 200
    }
    assert attached == {"multus1": ("1", "0"), "multus2": ("1", "1")}


def test_each_create_carries_its_networks_connection_tracking(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    _, run = node
    tracking = {
        call.params["Description"].split()[1]: {
            key: value
            for key, value in call.params.items()
            if key.startswith("ConnectionTrackingSpecification.")
        }
        for call in run.actions("CreateNetworkInterface")
        if call.status == 200
    }
    assert tracking == {
        "multus1": {"ConnectionTrackingSpecification.UdpTimeout": "60"},
        "multus2": {"ConnectionTrackingSpecification.UdpStreamTimeout": "120"},
    }


def test_imds_shows_both_enis_at_device_1_of_their_cards(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    """IMDS's device-number is unique only within a card and network-card names the card
    (amazonlinux/amazon-ec2-net-utils#104): what the bootstrap's re-run reads."""
    instance_id, _ = node
    shown = {}
    macs = emulator.imds.metadata(instance_id, "network/interfaces/macs/")
    assert macs is not None
    for mac in macs.split():
        leaf = f"network/interfaces/macs/{mac.rstrip('/')}/"
        eni_id = emulator.imds.metadata(instance_id, leaf + "interface-id")
        assert eni_id is not None
        shown[eni_id] = (
            emulator.imds.metadata(instance_id, leaf + "network-card"),
            emulator.imds.metadata(instance_id, leaf + "device-number"),
        )
    by_network = {
        network_of(emulator, eni_id): slot
        for eni_id, slot in shown.items()
        if slot[1] != "0" or slot[0] != "0"
    }
    assert by_network == {"multus1": ("0", "1"), "multus2": ("1", "1")}


def test_a_rerun_tells_the_two_device_1_apart_and_makes_no_ec2_call(
    emulator: Ec2Emulator, user_data: str, node: tuple[str, BootstrapRun]
) -> None:
    """Without the card in the lookup, one network would find the other's ENI at its device
    index and stop (the subnet check of test_multus_eni_bootstrap_script.py)."""
    instance_id, first = node
    rerun = emulator.run_bootstrap(user_data, instance_id, root=first.root)
    assert rerun.returncode == 0, rerun.output
    assert (rerun.ec2_calls, rerun.ec2_client_processes) == ([], 0)
