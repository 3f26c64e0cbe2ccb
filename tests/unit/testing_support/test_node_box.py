"""The node box's pure parts: its pins agree with the Makefile, its cache entry is named by
every input and only by them, a mirror that moved on fails the build naming the package, the
kernel is the host's newest, and the user-data is the MIME form the product's is.
Booting it is tests/node_box's."""

from __future__ import annotations

import email
import re
from pathlib import Path

import pytest
import yaml

from testing_support.node_box import aws, image, karpenter, packages
from testing_support.node_box.aws import guest_forward
from testing_support.node_box.errors import BuildError, Unavailable
from testing_support.node_box.nodeadm import Nodeadm, pinned_version
from testing_support.node_box.seed import shell_script_user_data

REPO = Path(__file__).resolve().parents[3]
NODEADM = Nodeadm(Path("nodeadm"), "fedcba9876543210", "v0.0.0-20240229193347-cfab22a10647")


def test_the_makefile_installs_the_debootstrap_the_builder_pins() -> None:
    makefile = (REPO / "Makefile").read_text().replace("\\\n", " ")
    (tools,) = re.findall(r"^NODE_BOX_TOOLS\.debian-bookworm := (.+)$", makefile, re.MULTILINE)
    pins = dict(pin.split("=", 1) for pin in tools.split())
    assert pins[packages.DEBOOTSTRAP_PACKAGE] == packages.DEBOOTSTRAP_VERSION
    assert {"genisoimage", "qemu-utils", "e2fsprogs"} <= set(pins)


def _kernel(tmp_path: Path, vmlinuz: bytes = b"kernel") -> image.HostKernel:
    path = tmp_path / "vmlinuz-6.1.0-57-amd64"
    path.write_bytes(vmlinuz)
    return image.HostKernel("6.1.0-57-amd64", path, tmp_path, tmp_path, "6.1.192-3")


def test_the_cache_key_changes_with_each_input_and_only_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = _kernel(tmp_path)
    key = image.cache_key(image.inputs(kernel, NODEADM))
    assert image.cache_key(image.inputs(kernel, NODEADM)) == key

    assert image.cache_key(image.inputs(_kernel(tmp_path, b"another build"), NODEADM)) != key
    monkeypatch.setitem(packages.PACKAGES, "systemd", "252.40-1~deb12u1")
    assert image.cache_key(image.inputs(_kernel(tmp_path), NODEADM)) != key
    monkeypatch.undo()
    monkeypatch.setattr(packages, "DEBOOTSTRAP_VERSION", "1.0.129")
    assert image.cache_key(image.inputs(_kernel(tmp_path), NODEADM)) != key
    monkeypatch.undo()
    another_nodeadm = Nodeadm(Path("nodeadm"), "0123456789abcdef", NODEADM.version)
    assert image.cache_key(image.inputs(_kernel(tmp_path), another_nodeadm)) != key


def test_the_builders_own_source_is_an_input(tmp_path: Path) -> None:
    inputs = image.inputs(_kernel(tmp_path), NODEADM)
    assert set(inputs["builder"]) == {"image.py", "packages.py", "rootfs.py"}


def test_a_package_the_mirror_replaced_fails_the_build_naming_it() -> None:
    installed = dict(packages.PACKAGES, systemd="252.40-1~deb12u1")
    installed.pop("curl")
    with pytest.raises(BuildError, match=r"curl \(not installed\), systemd 252\.40-1~deb12u1"):
        image._check_pins(installed)
    image._check_pins(dict(packages.PACKAGES, libc6="2.36-9+deb12u10"))  # extra ones are fine


def test_the_kernel_is_the_hosts_newest_with_its_modules(tmp_path: Path) -> None:
    boot, modules = tmp_path / "boot", tmp_path / "modules"
    for version in ("6.1.0-9-amd64", "6.1.0-57-amd64"):
        (boot / f"vmlinuz-{version}").parent.mkdir(exist_ok=True)
        (boot / f"vmlinuz-{version}").write_bytes(b"")
        (boot / f"config-{version}").write_text("")
    (modules / "6.1.0-57-amd64").mkdir(parents=True)
    assert image.host_kernel(boot, modules).version == "6.1.0-57-amd64"

    (modules / "6.1.0-57-amd64").rmdir()
    with pytest.raises(Unavailable, match=r"6\.1\.0-57-amd64"):
        image.host_kernel(boot, modules)
    with pytest.raises(Unavailable, match="linux-image-amd64"):
        image.host_kernel(tmp_path / "empty", modules)


def test_nodeadm_is_the_pseudo_version_the_module_proxy_serves() -> None:
    # The module has no release tags; the proxy serves this one pseudo-version (README.md).
    assert pinned_version() == NODEADM.version


def test_user_data_is_mime_multipart_with_one_shell_script_part_per_script() -> None:
    message = email.message_from_string(
        shell_script_user_data("#!/bin/sh\necho 1\n", "#!/bin/sh\n")
    )
    assert message.get_content_type() == "multipart/mixed"
    parts = [part for part in message.walk() if not part.is_multipart()]
    assert [part.get_content_type() for part in parts] == ["text/x-shellscript"] * 2
    assert parts[0].get_payload() == "#!/bin/sh\necho 1\n"


def test_karpenters_user_data_puts_its_node_config_last_and_keeps_our_parts_as_they_are() -> None:
    """karpenter-provider-aws v1.14.1 pkg/providers/amifamily/bootstrap/nodeadm.go Script:
    mime.Archive(append(customEntries, NodeConfig)); its golden file
    al2023_mime_userdata_merged.golden has the custom parts, then "# Karpenter Generated
    NodeConfig"."""
    ours = shell_script_user_data("#!/bin/sh\necho first\n", "#!/bin/sh\necho second\n")
    config = karpenter.node_config(
        karpenter.ClusterDetails("box"),
        labels={"b": "2", "a": "1"},
        taints=[{"key": "multus/not-ready", "value": "true", "effect": "NoSchedule"}],
    )
    message = email.message_from_string(karpenter.user_data(config, ours))
    parts = [(part.get_content_type(), part.get_payload()) for part in message.walk()][1:]
    assert message.get_boundary() == "//"
    assert parts[-1] == ("application/node.eks.aws", config)
    assert parts[:-1] == [
        ("text/x-shellscript", "#!/bin/sh\necho first\n"),
        ("text/x-shellscript", "#!/bin/sh\necho second\n"),
    ]
    kubelet = yaml.safe_load(config)["spec"]["kubelet"]
    # Go's %q of the sorted labels; the pool's taints, then Karpenter's own
    assert kubelet["flags"] == ['--node-labels="a=1,b=2"']
    assert [taint["key"] for taint in kubelet["config"]["registerWithTaints"]] == [
        "multus/not-ready",
        "karpenter.sh/unregistered",
    ]


def test_a_guest_forward_is_one_netdev_option_value() -> None:
    # QEMU splits -netdev at commas: the rule, the interpreter and the relay's path have none
    rule = guest_forward("169.254.169.254", 80, 4321)
    assert "," not in rule
    assert rule.startswith("tcp:169.254.169.254:80-cmd:")
    assert rule.endswith(f"{aws.RELAY} 4321")
