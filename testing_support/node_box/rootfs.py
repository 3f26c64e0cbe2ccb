"""What the image builder changes in debootstrap's root file system, and why: the few files and
commands that turn a Debian 12 chroot into a node that boots the host's kernel from /dev/vda,
renders its network with systemd-networkd and takes its user-data from cloud-init.

Nothing here stands in for a node component: every file below configures a real one (systemd,
cloud-init, initramfs-tools); the rest of the image is Debian's packages as installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testing_support.node_box.errors import BuildError

#: The root disk as the runner attaches it (the first virtio-blk disk); the seed disk is vdb.
ROOT_DEVICE = "/dev/vda"

FILES: dict[str, str] = {
    "etc/fstab": f"{ROOT_DEVICE} / ext4 defaults 0 1\n",
    # an image has no identity: systemd makes one at first boot (ConditionFirstBoot), as on an
    # AMI, so every box is a new machine to systemd and cloud-init alike
    "etc/machine-id": "",
    # debootstrap copies the build host's name and resolver; the node's own come from
    # cloud-init's meta-data and the primary NIC's DHCP
    "etc/hostname": "node-box\n",
    "etc/hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
    "etc/resolv.conf": "",
    # Only the NoCloud seed disk is looked for (ds-identify would otherwise probe for every
    # cloud, which costs boot time); networkd renders the network, as on Amazon Linux 2023.
    # The image has no SSH server and no locales package: without these two settings the
    # ssh and locale modules log failures at every first boot.
    "etc/cloud/cloud.cfg.d/90-node-box.cfg": (
        "datasource_list: [NoCloud, None]\n"
        "system_info:\n"
        "  network:\n"
        "    renderers: [networkd]\n"
        "ssh_genkeytypes: []\n"
        "locale: C.UTF-8\n"
    ),
    # The initramfs only has to find /dev/vda: a short module list keeps it small (it is
    # unpacked under TCG at every boot); no resume device to wait for.
    "etc/initramfs-tools/conf.d/node-box.conf": "MODULES=list\nCOMPRESS=gzip\nRESUME=none\n",
    "etc/initramfs-tools/modules": "virtio_pci\nvirtio_blk\next4\n",
    # Amazon Linux 2023's EKS AMI settings for links and routes networkd does not own, as the
    # AMI has them (awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/):
    # networkd leaves alone the routes and policy rules others made (a CNI's, the pod IP
    # agent's) ...
    "etc/systemd/networkd.conf.d/80-release.conf": (
        "[Network]\nManageForeignRoutes=no\nManageForeignRoutingPolicyRules=no\n"
    ),
    # ... and udev keeps the MAC address a NIC came with (systemd's default policy would make
    # up a persistent one for some devices: amazon-vpc-cni-k8s#2103)
    "etc/systemd/network/99-default.link.d/99-no-policy.conf": "[Link]\nMACAddressPolicy=none\n",
}

#: systemd-networkd ships disabled in Debian; on Amazon Linux 2023 it manages every link.
ENABLED_UNITS = ("systemd-networkd.service",)


def install_kernel(rootfs: Path, kernel_version: str, modules: Path, config: Path) -> None:
    """Puts the host kernel's modules (and its config, which mkinitramfs reads) into the image,
    so what udev loads at run time (virtio_net for a hot-plugged NIC) matches the kernel the
    runner boots. Bookworm's /lib is a link to /usr/lib."""
    target = rootfs / "usr" / "lib" / "modules" / kernel_version
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(modules, target, symlinks=True)
    (rootfs / "boot").mkdir(exist_ok=True)
    shutil.copy2(config, rootfs / "boot" / config.name)


def install_binary(rootfs: Path, binary: Path) -> None:
    """A static binary of ours in /usr/bin (nodeadm: where Amazon Linux 2023 has it)."""
    target = rootfs / "usr" / "bin" / binary.name
    shutil.copy2(binary, target)
    target.chmod(0o755)


def configure(rootfs: Path, kernel_version: str, log: Path) -> Path:
    """Writes FILES, enables ENABLED_UNITS, makes the initramfs and drops the package caches.
    Returns the initramfs (inside the rootfs)."""
    for relative, text in FILES.items():
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # resolv.conf may be a link out of the chroot
        path.write_text(text)
    initrd = f"/boot/initrd.img-{kernel_version}"
    for command in (
        ["systemctl", "enable", *ENABLED_UNITS],
        ["mkinitramfs", "-o", initrd, kernel_version],
    ):
        _chroot(rootfs, command, log)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
    return rootfs / initrd.lstrip("/")


def _chroot(rootfs: Path, command: list[str], log: Path) -> None:
    with log.open("a") as stream:
        stream.write(f"$ chroot {rootfs} {' '.join(command)}\n")
        stream.flush()
        completed = subprocess.run(
            ["chroot", str(rootfs), *command],
            stdout=stream,
            stderr=subprocess.STDOUT,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
            check=False,
        )
    if completed.returncode != 0:
        tail = log.read_text()[-3000:]
        raise BuildError(f"chroot {' '.join(command)} failed ({completed.returncode}):\n{tail}")
