"""The network-card part of the user-data: the device field <index>.<card> and network_card.sh
only where a network is on a card other than 0 (other pools' user-data stays as it was), what
its two wrappers send to EC2 and read from IMDS, shellcheck."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from config.node_bootstrap_plan import NodeBootstrapProps, NodePrefixNetwork
from node_bootstrap import render_user_data
from node_bootstrap.node_prefix import cni_config_file_name
from node_bootstrap.renderer import (
    NETWORK_CARD_SCRIPT_NAME,
    SCRIPT_NAME,
    render_configuration,
)
from testing_support.multus_emulator import expanded_script
from tests.unit.node_bootstrap.test_dual_stack_rendering import assert_shellcheck_clean
from tests.unit.node_bootstrap.test_node_prefix_rendering import functions
from tests.unit.node_bootstrap.test_renderer import two_network_props

NODE_DIR = Path(__file__).parents[3] / "node_bootstrap"


def multus2_on_card_1(props: NodeBootstrapProps | None = None) -> NodeBootstrapProps:
    """multus2 at device index 1 of card 1, next to multus1 at device index 1 of card 0."""
    props = props or two_network_props()
    first, second = props.interfaces
    return replace(props, interfaces=[first, replace(second, device_index=1, network_card=1)])


def test_without_a_second_card_the_node_runs_only_the_main_script() -> None:
    plain = expanded_script(render_user_data(two_network_props()))
    shebang = plain.split("\n", 1)[0]
    main_script = (NODE_DIR / SCRIPT_NAME).read_text().split("\n", 1)[1]

    assert "NetworkCardIndex" not in plain
    configuration = render_configuration(two_network_props())
    assert functions(plain) == functions(f"{shebang}\n{configuration}{main_script}")


def test_a_network_on_card_1_has_the_device_field_index_dot_card_and_the_library() -> None:
    configuration = render_configuration(multus2_on_card_1())
    script = expanded_script(render_user_data(multus2_on_card_1()))

    networks = configuration.split("MULTUS_NETWORKS='", 1)[1].split("'", 1)[0].splitlines()
    assert [line.split()[:3] for line in networks] == [
        ["multus1", "multus1", "1"],
        ["multus2", "multus2", "1.1"],
    ]
    assert "single_card_ec2_call AttachNetworkInterface" in script
    assert script.index("ec2_call() {") < script.index("single_card_ec2_call AttachNetwork")
    assert script.rstrip().endswith('main "$@"')


def test_the_same_device_index_is_refused_only_on_the_same_card() -> None:
    same_card = replace(
        two_network_props(),
        interfaces=[replace(i, device_index=1) for i in two_network_props().interfaces],
    )
    with pytest.raises(ValueError, match="duplicate device_index 1"):
        render_configuration(same_card)
    render_configuration(multus2_on_card_1())


def test_node_prefix_files_of_the_same_index_on_two_cards_differ() -> None:
    """The node-local CNI config is named after the ENI's slot; two node_prefix networks at
    device index 1 of cards 0 and 1 must not write one file."""
    assert cni_config_file_name(1) == "90-node-prefix-eni1.conflist"  # as before cards
    assert cni_config_file_name(1, 1) == "90-node-prefix-eni1-card1.conflist"
    props = multus2_on_card_1()
    misplaced = NodePrefixNetwork(
        availability_zone="us-west-2a",
        interface_name="multus2",
        device_index=1,
        prefix_count=1,
        cni_network_name="multus2-us-west-2a",
        subnet_cidr="10.0.6.0/24",
        reservation_cidr="10.0.6.32/27",
        ipvlan_mode="l2",
    )
    with pytest.raises(ValueError, match="device index 1 of network card 0"):
        render_configuration(replace(props, node_prefix=[misplaced]))
    render_configuration(replace(props, node_prefix=[replace(misplaced, network_card=1)]))


def test_the_wrappers_translate_the_device_field_for_ec2_and_imds(tmp_path: Path) -> None:
    """IMDS's device-number is unique only within a card; network-card exists on multi-card
    types only, 404 elsewhere (amazonlinux/amazon-ec2-net-utils#104). AttachNetworkInterface
    takes DeviceIndex and NetworkCardIndex (EC2 API reference); card 0 is spelled out
    (cilium/cilium#42512)."""
    library = (NODE_DIR / NETWORK_CARD_SCRIPT_NAME).read_text()
    probe = tmp_path / "probe.sh"
    probe.write_text(
        # Stand-ins for the script's functions: IMDS of three ENIs at device-number 1 (on card
        # 1, on card 0, and on a type without the key), EC2 printing what it would send.
        "imds() { case $1 in\n"
        "  */device-number) echo 1 ;;\n"
        "  */m1/network-card) echo 1 ;;\n"
        "  */m0/network-card) echo 0 ;;\n"
        "  *) return 22 ;;\n"
        "esac; }\n"
        'ec2_call() { echo "$*"; }\n'
        f"{library}\n"
        "for mac in m1 m0 m404; do imds network/interfaces/macs/$mac/device-number; echo; done\n"
        "imds network/interfaces/macs/m1/subnet-id || echo 'subnet-id: 404'\n"
        "ec2_call AttachNetworkInterface NetworkInterfaceId=eni-1 InstanceId=i-1 DeviceIndex=1.1\n"
        "ec2_call AttachNetworkInterface NetworkInterfaceId=eni-2 InstanceId=i-1 DeviceIndex=2\n"
        "ec2_call DescribeNetworkInterfaces Filter.1.Name=DeviceIndex=1.1\n"
    )
    completed = subprocess.run(["bash", str(probe)], capture_output=True, text=True, check=True)
    assert completed.stdout.splitlines() == [
        "1.1",
        "1",
        "1",
        "subnet-id: 404",
        "AttachNetworkInterface NetworkInterfaceId=eni-1 InstanceId=i-1 DeviceIndex=1 "
        "NetworkCardIndex=1",
        "AttachNetworkInterface NetworkInterfaceId=eni-2 InstanceId=i-1 DeviceIndex=2 "
        "NetworkCardIndex=0",
        "DescribeNetworkInterfaces Filter.1.Name=DeviceIndex=1.1",
    ]


def test_shellcheck_reports_nothing_but_the_wrapped_functions(tmp_path: Path) -> None:
    assert_shellcheck_clean(NETWORK_CARD_SCRIPT_NAME, multus2_on_card_1, tmp_path)
