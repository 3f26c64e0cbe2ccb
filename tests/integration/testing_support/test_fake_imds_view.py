"""The fake IMDS keeps each instance's ENIs between EC2 changes (testing_support/multus_emulator.py,
FakeImds.ec2_changed), yet serves EC2's state after every change, whichever way it came: a
node's signed request through the proxy, or the emulator's own boto3 client (a test's set-up,
the termination model).

Source: EC2 User Guide, "Instance metadata categories": network/interfaces/macs/mac/local-ipv4s
lists the private IPv4 addresses of the interface (the emulator shows them with no lag unless
FakeImds.lag_seconds says otherwise)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from testing_support.multus_emulator import (
    AVAILABILITY_ZONES,
    NODE_CREDENTIALS,
    REGION,
    Ec2Emulator,
)

pytestmark = pytest.mark.integration

AZ = AVAILABILITY_ZONES[0]


def local_ipv4s(emulator: Ec2Emulator, instance_id: str, mac: str) -> list[str]:
    shown = emulator.imds.metadata(instance_id, f"network/interfaces/macs/{mac}/local-ipv4s")
    assert shown is not None
    return shown.split("\n")


def node_ec2(emulator: Ec2Emulator) -> Any:
    """An EC2 client as a node has it: the node role's credentials, through the proxy."""
    return boto3.client(
        "ec2",
        endpoint_url=emulator.proxy.url,
        region_name=REGION,
        aws_access_key_id=NODE_CREDENTIALS.access_key,
        aws_secret_access_key=NODE_CREDENTIALS.secret_key,
        aws_session_token=NODE_CREDENTIALS.token,
    )


def test_imds_shows_addresses_assigned_through_the_proxy_and_the_emulators_client(
    emulator: Ec2Emulator,
) -> None:
    vpc = emulator.create_multus_vpc()
    instance_id = emulator.launch_instance(vpc, AZ, "imds-view")
    (eni,) = emulator.instance_enis(instance_id)
    eni_id, mac, primary = eni["NetworkInterfaceId"], eni["MacAddress"], eni["PrivateIpAddress"]
    assert local_ipv4s(emulator, instance_id, mac) == [primary]  # read, and kept

    emulator.ec2.assign_private_ip_addresses(
        NetworkInterfaceId=eni_id, PrivateIpAddresses=["10.0.2.200"]
    )
    assert local_ipv4s(emulator, instance_id, mac) == [primary, "10.0.2.200"]

    node = node_ec2(emulator)
    node.assign_private_ip_addresses(NetworkInterfaceId=eni_id, PrivateIpAddresses=["10.0.2.201"])
    assert sorted(local_ipv4s(emulator, instance_id, mac)) == sorted(
        [primary, "10.0.2.200", "10.0.2.201"]
    )
    node.unassign_private_ip_addresses(NetworkInterfaceId=eni_id, PrivateIpAddresses=["10.0.2.200"])
    assert sorted(local_ipv4s(emulator, instance_id, mac)) == sorted([primary, "10.0.2.201"])


def test_an_attach_through_the_proxy_is_reported_once_ec2_carried_it_out(
    emulator: Ec2Emulator,
) -> None:
    """The data-plane tier plugs an ENI into its node when the proxy reports the attach
    (kernel_vpc.EniHotplug, as the kernel sees a NIC arrive once EC2 attached it); the attach
    path of the network-card model must report it too, and after EC2 has it (IMDS lists it)."""
    vpc = emulator.create_multus_vpc()
    instance_id = emulator.launch_instance(vpc, AZ, "attach-hook")
    subnet = vpc.multus_subnets["multus1", AZ]
    eni_id = emulator.ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"][
        "NetworkInterfaceId"
    ]
    reported: list[tuple[str, int]] = []
    emulator.proxy.on_attached = lambda eni: reported.append(
        (eni, len(emulator.instance_enis(instance_id)))
    )
    node = node_ec2(emulator)
    try:
        node.attach_network_interface(
            NetworkInterfaceId=eni_id, InstanceId=instance_id, DeviceIndex=1
        )
    finally:
        emulator.proxy.on_attached = None
    assert reported == [(eni_id, 2)]
