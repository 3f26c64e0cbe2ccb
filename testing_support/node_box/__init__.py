"""The node box: a real node under QEMU for the node software's tests (issue #36).

A Debian 12 image (systemd 252, as Amazon Linux 2023 runs it, with udev, systemd-networkd and
cloud-init), built with debootstrap and cached outside the clone (image.py, packages.py,
rootfs.py); booted with the host's Debian kernel under QEMU, with cloud-init's NoCloud seed
carrying the user-data a test gives (seed.py), commands run through QEMU's guest agent
(guest_agent.py) and NICs hot-plugged onto PCIe root ports through QMP (qmp.py, machine.py).

`make node-box` builds (or finds) the image and boots it once; tests use the fixtures of
tests/node_box/conftest.py. README.md says what the box models and what it does not.
"""

from testing_support.node_box.errors import BuildError, Unavailable
from testing_support.node_box.image import NodeImage, build_image
from testing_support.node_box.machine import GuestCommandFailed, Nic, NodeBox
from testing_support.node_box.seed import shell_script_user_data

__all__ = [
    "BuildError",
    "GuestCommandFailed",
    "Nic",
    "NodeBox",
    "NodeImage",
    "Unavailable",
    "build_image",
    "shell_script_user_data",
]
