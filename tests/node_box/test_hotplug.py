"""A NIC hot-plugged into a running node box goes through the kernel, udev and systemd as an
ENI attached to a node does: a .link file written before the plug names it by MAC (how the
bootstrap script names each Multus ENI), a NIC no file matches gets udev's path-based name,
and an unplugged NIC leaves."""

from __future__ import annotations

import pytest

from testing_support.node_box import shell_script_user_data
from tests.node_box.conftest import BootNode
from tests.node_box.guest import link_file, link_with_mac, links, udev_properties, wait_until

pytestmark = pytest.mark.node_box

MAC = "02:6d:75:6c:74:01"
OTHER_MAC = "02:6d:75:6c:74:02"
LINK_FILE = "/etc/systemd/network/10-node-box-multus1.link"
#: A kernel event, udev's rules and a rename, under TCG: seconds, not minutes.
EVENT_TIMEOUT = 90.0


def test_a_link_file_names_the_hot_plugged_nic_with_its_mac(boot_node: BootNode) -> None:
    box = boot_node(user_data=shell_script_user_data("#!/bin/sh\n"), instance_id="i-0b0a7c0de0001")
    box.write_file(LINK_FILE, link_file(MAC, "multus1"))
    box.sh("udevadm control --reload")  # as the bootstrap script does after writing its files
    assert "multus1" not in links(box)

    nic = box.plug_nic(MAC)
    link = wait_until(
        lambda: links(box).get("multus1"), timeout=EVENT_TIMEOUT, what="multus1 in ip link"
    )
    assert link["address"] == MAC
    # udev handled the device: its net_setup_link builtin applied our file, the kernel driver
    # is virtio's, and systemd has the device unit udev tagged it for
    box.sh("udevadm settle")
    properties = udev_properties(box, "multus1")
    assert properties["ID_NET_LINK_FILE"] == LINK_FILE
    assert properties["ID_NET_DRIVER"] == "virtio_net"
    assert properties["INTERFACE"] == "multus1"
    assert box.sh("systemctl is-active sys-subsystem-net-devices-multus1.device") == "active\n"

    # a NIC no .link file of ours matches: udev's default policy names it by its PCI path
    box.plug_nic(OTHER_MAC)
    other = wait_until(
        lambda: link_with_mac(box, OTHER_MAC), timeout=EVENT_TIMEOUT, what=f"{OTHER_MAC} in ip link"
    )
    assert other["ifname"].startswith("enp"), other["ifname"]
    box.sh("udevadm settle")
    assert udev_properties(box, other["ifname"])["ID_NET_LINK_FILE"].endswith(
        "/systemd/network/99-default.link"
    )

    box.unplug_nic(nic, timeout=EVENT_TIMEOUT)
    wait_until(
        lambda: "multus1" not in links(box), timeout=EVENT_TIMEOUT, what="multus1 gone from ip link"
    )
    device_unit = box.run(["systemctl", "is-active", "sys-subsystem-net-devices-multus1.device"])
    assert device_unit.stdout.strip() == "inactive"
