"""The Makefile: its deploy/diff/destroy selection finds the stage's stacks (the CLI matches),
and `make cni-plugins` installs a version each supported distribution's archive has."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from testing_support.build_images import DEBIAN_BOOKWORM, UBUNTU_NOBLE, Distribution
from tests.conftest import REPO, SynthesizedApp


def makefile_default(variable: str) -> str:
    match = re.search(rf"^{variable} \?= (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, variable
    return match.group(1).strip("'")


def cdk_ls(assembly: str, *selection: str) -> list[str]:
    completed = subprocess.run(
        ["npx", "--no-install", "cdk", "ls", "--app", assembly, *selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return sorted(line for line in completed.stdout.splitlines() if line.strip())


def test_default_selection_is_every_stack_of_the_stage(default_app: SynthesizedApp) -> None:
    assert cdk_ls(str(default_app.outdir), makefile_default("STACKS")) == [
        "karpenterwithmultus/Cluster (karpenterwithmultus-cluster)",
        "karpenterwithmultus/Network (karpenterwithmultus-network)",
    ]


def run_cni_plugins(
    tmp_path: Path, distribution: Distribution, host_local: bool = False
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`make cni-plugins` as on `distribution`, with a plugin directory of its own and an
    apt-get that only records its arguments. Returns the run and that record."""
    (tmp_path / "os-release").write_text(distribution.os_release())
    plugins = tmp_path / "cni"
    plugins.mkdir()
    if host_local:
        (plugins / "host-local").write_text("#!/bin/sh\n")
        (plugins / "host-local").chmod(0o755)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    apt_calls = tmp_path / "apt-get.calls"
    (fake_bin / "apt-get").write_text(f'#!/bin/sh\necho "$*" >>{apt_calls}\n')
    (fake_bin / "apt-get").chmod(0o755)
    completed = subprocess.run(
        [
            "make",
            "cni-plugins",
            f"OS_RELEASE={tmp_path / 'os-release'}",
            f"CNI_PLUGIN_DIR={plugins}",
        ],
        cwd=REPO,
        env={**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return completed, apt_calls


@pytest.mark.parametrize("distribution", [DEBIAN_BOOKWORM, UBUNTU_NOBLE], ids=lambda d: d.codename)
def test_cni_plugins_installs_the_version_its_distributions_archive_offers(
    tmp_path: Path, distribution: Distribution
) -> None:
    """packages.debian.org (bookworm) and packages.ubuntu.com (noble-updates): apt installs
    `name=version` only when that distribution's archive has that exact version."""
    completed, apt_calls = run_cni_plugins(tmp_path, distribution)

    assert completed.returncode == 0, completed.stderr
    version = distribution.packages["containernetworking-plugins"]
    assert apt_calls.read_text().splitlines() == [
        "update -qq",
        f"install -y -qq --no-install-recommends containernetworking-plugins={version}",
    ]


# Ubuntu 22.04 (CodeBuild standard:7.0) has no pin: its 0.9.1 is older than PLUGINS_FIXED.
JAMMY = Distribution("ubuntu", "jammy", {})


def test_cni_plugins_refuses_a_distribution_without_a_pin_naming_the_variable(
    tmp_path: Path,
) -> None:
    completed, apt_calls = run_cni_plugins(tmp_path, JAMMY)

    assert completed.returncode != 0
    assert "add CNI_PLUGINS_VERSION.ubuntu-jammy to the Makefile" in completed.stderr
    assert not apt_calls.exists()


def test_cni_plugins_needs_no_pin_where_host_local_is_installed(tmp_path: Path) -> None:
    completed, apt_calls = run_cni_plugins(tmp_path, JAMMY, host_local=True)

    assert completed.returncode == 0, completed.stderr
    assert not apt_calls.exists()


# containernetworking/plugins v0.9.1, plugins/ipam/host-local/backend/allocator/allocator.go
# (RangeIter.Next): when the last reserved address ends a range, iteration starts in the next
# range but keeps the previous range's index as where it began, so once every address is taken
# the "looped back" check never holds and ADD never returns (the node_prefix test fills two
# ranges: a host-local built from v0.9.1 hangs there). Fixed by b8119674, first in v1.0.0.
PLUGINS_FIXED = (1, 0, 0)


def test_every_pinned_cni_plugins_release_has_a_host_local_that_answers_when_full() -> None:
    pins = re.findall(
        r"^CNI_PLUGINS_VERSION\.([\w-]+) := (\d+)\.(\d+)\.(\d+)\+",
        (REPO / "Makefile").read_text(),
        re.MULTILINE,
    )
    assert {distribution for distribution, *_ in pins} >= {"debian-bookworm", "ubuntu-noble"}
    assert {
        distribution: tuple(int(part) for part in upstream) >= PLUGINS_FIXED
        for distribution, *upstream in pins
    } == {distribution: True for distribution, *_ in pins}
