"""Build the node box's disk image once per set of inputs, into a cache outside the clone.

A cache entry, ~/.cache/karpenter-multus/node-box/<key>/ (NODE_BOX_CACHE moves the root),
holds a raw ext4 disk (the root file system, read-only: every boot writes to its own overlay),
the host kernel it boots and the initramfs made for it inside the image, and manifest.json
(the inputs, every installed package and version, the build's duration). The key is the
SHA-256 of the inputs: the Debian release and mirror, the pinned debootstrap and packages
(packages.py), the kernel (version, its package's version, the SHA-256 of vmlinuz), nodeadm's
pinned version and build inputs (nodeadm.py) and the builder's own source (this file,
packages.py, rootfs.py), so a change to any of them builds a new image and anything else
reuses the one there.

The build runs as root: debootstrap into a staging folder of the cache, the pinned versions
checked, the host kernel's modules and nodeadm (built with Go, cached apart) copied in
(rootfs.py), then `mkfs.ext4 -d` writes the
folder into the disk image without a loop device. The staging folder is renamed into place
only once complete, and a lock keeps two sessions from building the same entry at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing_support.node_box import packages, rootfs
from testing_support.node_box.errors import BuildError, Unavailable
from testing_support.node_box.nodeadm import Nodeadm, build_nodeadm

CACHE_ENV = "NODE_BOX_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "karpenter-multus" / "node-box"
#: Sparse: the file takes what the root file system uses (about 0.8 GB); the rest is room for
#: what a test writes (into its overlay).
DISK_SIZE = "3G"
_BUILDER_SOURCES = ("packages.py", "rootfs.py", "image.py")


@dataclass(frozen=True)
class HostKernel:
    """The host's newest Debian kernel (the one testing_support/kernel_vm/run boots too)."""

    version: str
    vmlinuz: Path
    modules: Path
    config: Path
    package_version: str


@dataclass(frozen=True)
class NodeImage:
    """A built image: boot `kernel` with `initrd` and `disk` as /dev/vda (never written)."""

    directory: Path
    disk: Path
    kernel: Path
    initrd: Path
    kernel_version: str
    manifest: dict[str, Any]
    #: seconds this call spent building it; None when the cache already had it
    built_seconds: float | None


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def _version_key(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def host_kernel(
    boot: Path = Path("/boot"), modules_root: Path = Path("/lib/modules")
) -> HostKernel:
    kernels = sorted(boot.glob("vmlinuz-*"), key=lambda path: _version_key(path.name))
    if not kernels:
        raise Unavailable(f"no kernel in {boot} (Debian package linux-image-amd64)")
    vmlinuz = kernels[-1]
    version = vmlinuz.name.removeprefix("vmlinuz-")
    modules, config = modules_root / version, boot / f"config-{version}"
    for needed in (modules, config):
        if not needed.exists():
            raise Unavailable(f"kernel {version} has no {needed} (reinstall linux-image-{version})")
    query = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", f"linux-image-{version}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return HostKernel(version, vmlinuz, modules, config, query.stdout.strip())


def inputs(kernel: HostKernel, nodeadm: Nodeadm) -> dict[str, Any]:
    """Everything the image is made from; its digest names the cache entry."""
    here = Path(__file__).parent
    return {
        "suite": packages.SUITE,
        "mirror": packages.MIRROR,
        "variant": packages.VARIANT,
        "debootstrap": packages.DEBOOTSTRAP_VERSION,
        "packages": packages.PACKAGES,
        "kernel": {
            "version": kernel.version,
            "package_version": kernel.package_version,
            "vmlinuz_sha256": hashlib.sha256(kernel.vmlinuz.read_bytes()).hexdigest(),
        },
        "nodeadm": {"version": nodeadm.version, "digest": nodeadm.digest},
        "disk_size": DISK_SIZE,
        "builder": {
            name: hashlib.sha256((here / name).read_bytes()).hexdigest()
            for name in _BUILDER_SOURCES
        },
    }


def cache_key(build_inputs: dict[str, Any]) -> str:
    encoded = json.dumps(build_inputs, sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def build_image() -> NodeImage:
    """The image for the current inputs: from the cache, or built now (as root)."""
    kernel = host_kernel()
    root = cache_root()
    nodeadm = build_nodeadm(root)  # cached by its own inputs; built once per pinned version
    build_inputs = inputs(kernel, nodeadm)
    target = root / cache_key(build_inputs)
    if (target / "manifest.json").is_file():
        return _load(target, None)
    _check_build_prerequisites()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same entry
        if (target / "manifest.json").is_file():
            return _load(target, None)
        started = time.monotonic()
        _build(target, kernel, nodeadm, build_inputs)
        return _load(target, time.monotonic() - started)


def _load(directory: Path, built_seconds: float | None) -> NodeImage:
    manifest = json.loads((directory / "manifest.json").read_text())
    return NodeImage(
        directory=directory,
        disk=directory / "disk.raw",
        kernel=directory / "vmlinuz",
        initrd=directory / "initrd.img",
        kernel_version=manifest["inputs"]["kernel"]["version"],
        manifest=manifest,
        built_seconds=built_seconds,
    )


def _check_build_prerequisites() -> None:
    if os.geteuid() != 0:
        raise Unavailable("building the node box image needs root (debootstrap, chroot)")
    for tool, package in (("debootstrap", "debootstrap"), ("mkfs.ext4", "e2fsprogs")):
        if shutil.which(tool) is None:
            raise Unavailable(f"{tool} is not installed (Debian package {package})")
    installed = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", packages.DEBOOTSTRAP_PACKAGE],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if installed != packages.DEBOOTSTRAP_VERSION:
        raise Unavailable(
            f"debootstrap {installed or '(none)'} is installed, the box pins "
            f"{packages.DEBOOTSTRAP_VERSION} (make dataplane-tools)"
        )


def _build(
    target: Path, kernel: HostKernel, nodeadm: Nodeadm, build_inputs: dict[str, Any]
) -> None:
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    log = staging / "build.log"
    tree = staging / "rootfs"
    debs = target.parent / "debs"  # downloads shared by every build (debootstrap names them)
    debs.mkdir(exist_ok=True)
    try:
        _run(
            [
                "debootstrap",
                f"--variant={packages.VARIANT}",
                f"--include={','.join(packages.PACKAGES)}",
                f"--cache-dir={debs}",
                packages.SUITE,
                str(tree),
                packages.MIRROR,
            ],
            log,
        )
        installed = _installed_packages(tree)
        _check_pins(installed)
        rootfs.install_kernel(tree, kernel.version, kernel.modules, kernel.config)
        rootfs.install_binary(tree, nodeadm.binary)
        initrd = rootfs.configure(tree, kernel.version, log)
        shutil.copy2(initrd, staging / "initrd.img")
        shutil.copy2(kernel.vmlinuz, staging / "vmlinuz")
        _unmount_below(tree)
        _run(["mkfs.ext4", "-q", "-L", "node-box-root", "-d", str(tree),
              str(staging / "disk.raw"), DISK_SIZE], log)  # fmt: skip
        shutil.rmtree(tree)
        (staging / "disk.raw").chmod(0o444)  # the pristine image: boots write to overlays
        manifest = {
            "inputs": build_inputs,
            "installed": installed,
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
        staging.rename(target)  # atomic: a half-built entry is never seen
    except BaseException:
        if log.exists():
            shutil.copy2(log, target.parent / "last-failed-build.log")
        try:
            _unmount_below(tree)
            shutil.rmtree(staging, ignore_errors=True)
        except BuildError:
            pass  # a tree with mounts left stays where it is (said on stderr by umount)
        raise


def _installed_packages(tree: Path) -> dict[str, str]:
    listing = subprocess.run(
        ["chroot", str(tree), "dpkg-query", "-W", "-f", "${Package}\t${Version}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pairs = (line.split("\t", 1) for line in listing.splitlines() if line)
    return {name: version for name, version in pairs}


def _check_pins(installed: dict[str, str]) -> None:
    wrong = {
        name: installed.get(name, "(not installed)")
        for name, version in packages.PACKAGES.items()
        if installed.get(name) != version
    }
    if wrong:
        found = ", ".join(f"{name} {version}" for name, version in sorted(wrong.items()))
        raise BuildError(
            f"{packages.MIRROR} {packages.SUITE} installed {found}, not the versions pinned in "
            "testing_support/node_box/packages.py: pin the new ones there (a point release "
            "replaced them) after checking their changelogs"
        )


def _unmount_below(tree: Path) -> None:
    """debootstrap mounts /proc and /sys (and may bind /dev) inside the tree and can leave them
    after a failure: removing the tree through them would reach the host's, so each mount is
    detached first, and a tree that still has one is never removed."""
    prefix = str(tree.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False)
    with open("/proc/mounts") as mounts:
        if any(line.split()[1].startswith(prefix) for line in mounts):
            raise BuildError(f"{tree} still has mounts; remove it by hand once they are gone")


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as stream:
        stream.write(f"$ {' '.join(command)}\n")
        stream.flush()
        completed = subprocess.run(command, stdout=stream, stderr=subprocess.STDOUT, check=False)
    if completed.returncode != 0:
        tail = log.read_text()[-3000:]
        raise BuildError(f"{command[0]} failed ({completed.returncode}):\n{tail}")
