"""A node box rebooted keeps what its disk holds and the NICs still plugged in: a file written
to /etc is there after the reboot, the hot-plugged NIC comes back under the name its .link file
gives it, and cloud-init, seeing the same instance, does not run the user-data again."""

from __future__ import annotations

import pytest

from testing_support.node_box import shell_script_user_data
from tests.node_box.conftest import BootNode
from tests.node_box.guest import link_file, links, udev_properties, wait_until
from tests.node_box.test_boot import MARKER, MARKER_SCRIPT

pytestmark = pytest.mark.node_box

MAC = "02:6d:75:6c:74:11"
LINK_FILE = "/etc/systemd/network/10-node-box-multus1.link"
PERSISTED = "/etc/node-box/written-before-reboot"


def test_a_reboot_keeps_etc_and_the_renamed_nic(boot_node: BootNode) -> None:
    box = boot_node(user_data=shell_script_user_data(MARKER_SCRIPT), instance_id="i-0b0a7c0de0002")
    first_boot = box.boot_id()
    box.write_file(PERSISTED, f"{first_boot}\n")
    box.write_file(LINK_FILE, link_file(MAC, "multus1"))
    box.sh("udevadm control --reload")
    box.plug_nic(MAC)
    wait_until(lambda: links(box).get("multus1"), timeout=90, what="multus1 before the reboot")

    seconds = box.reboot()
    print(f"reboot: {seconds:.1f} s")

    assert box.boot_id() != first_boot
    assert box.boots.states[-1] == "running", box.sh("systemctl --failed --no-legend")
    assert box.sh(f"cat {PERSISTED}").strip() == first_boot
    # the NIC never left: the kernel found it at boot and udev named it by the same file
    link = wait_until(
        lambda: links(box).get("multus1"), timeout=90, what="multus1 after the reboot"
    )
    assert link["address"] == MAC
    assert udev_properties(box, "multus1")["ID_NET_LINK_FILE"] == LINK_FILE
    # user-data runs once per instance: the marker still names the first boot only
    assert box.sh(f"cat {MARKER}").split() == [first_boot]
