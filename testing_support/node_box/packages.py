"""What the node box's image is made of: the Debian release, the debootstrap that makes it and
every package asked for, each pinned.

Debian's mirror serves only the current point release of bookworm, so a pin cannot make
debootstrap fetch an older package; it makes the build fail, naming the package and the
version the mirror now has, instead of building another image silently (image.py checks the
installed versions against these before the image is cached). The full list of what got
installed, dependencies included, is written beside the image (manifest.json).
"""

from __future__ import annotations

#: Debian 12: its systemd 252 is the one Amazon Linux 2023 runs (networkd, udev, .link files).
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
#: minbase: no ifupdown and no isc-dhcp-client, so cloud-init renders the primary NIC's network
#: configuration for systemd-networkd, as on Amazon Linux 2023, and nothing else manages links.
VARIANT = "minbase"

#: The host's debootstrap that builds the image (the Makefile's dataplane-tools pins the same).
DEBOOTSTRAP_PACKAGE = "debootstrap"
DEBOOTSTRAP_VERSION = "1.0.128+nmu2+deb12u2"

#: Package -> version in the image. What the node runs and why each is there:
PACKAGES: dict[str, str] = {
    # init, udev (it applies the .link files) and systemd-networkd (in the systemd package)
    "systemd": "252.39-1~deb12u2",
    "systemd-sysv": "252.39-1~deb12u2",
    "udev": "252.39-1~deb12u2",
    # networkctl talks to systemd-networkd over D-Bus
    "dbus": "1.14.10-1~deb12u1",
    # runs the user-data as on EC2 (here from a NoCloud seed disk)
    "cloud-init": "22.4.2-1+deb12u4",
    # debootstrap installs Depends but does not resolve virtual packages: cloud-init's
    # python3-cryptography depends on python3-cffi-backend-api-*, which only this provides
    "python3-cffi-backend": "1.15.1-5+b1",
    # the bootstrap script's tools; the pod IP agent is Python
    "iproute2": "6.1.0-3",
    "python3": "3.11.2-1+b1",
    "curl": "7.88.1-10+deb12u15",
    "ca-certificates": "20230311+deb12u1",
    # the test's way in: commands run through QEMU's guest agent over a virtio-serial port,
    # so the box needs no network path from the host and no login
    "qemu-guest-agent": "1:7.2+dfsg-7+deb12u18+b3",
    # the host kernel's initramfs is made inside the image (virtio_blk and ext4 are modules)
    "initramfs-tools": "0.142+deb12u3",
    "kmod": "30+20221128-1",
}
