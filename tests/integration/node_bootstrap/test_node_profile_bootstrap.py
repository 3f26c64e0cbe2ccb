"""A node of a pool with a node profile on the emulator: the whole bootstrap writes the
hugepages and kernel settings to sysctl.d and applies them before it creates the first ENI,
and a re-run writes the same (node_bootstrap/node_profile.sh says why and when)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from config.node_profile import NodeProfile
from node_bootstrap import render_user_data
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, EmulatedVpc
from tests.integration.node_bootstrap.conftest import CLUSTER

pytestmark = pytest.mark.integration

AZ = "us-west-2a"
SYSCTL_FILE = "etc/sysctl.d/91-node-profile.conf"
PROFILE = NodeProfile(
    hugepages_2mi=512,
    sysctls=(("net.core.rmem_max", 16777216), ("net.netfilter.nf_conntrack_max", 262144)),
)
SYSCTLS = (
    "vm.nr_hugepages = 512\nnet.core.rmem_max = 16777216\nnet.netfilter.nf_conntrack_max = 262144\n"
)


@pytest.fixture(scope="module")
def user_data(vpc: EmulatedVpc) -> str:
    return render_user_data(replace(vpc.bootstrap_props(CLUSTER), node_profile=PROFILE))


@pytest.fixture(scope="module")
def node(emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str) -> tuple[str, BootstrapRun]:
    instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)
    return instance_id, emulator.run_bootstrap(user_data, instance_id)


def test_the_profile_is_written_and_applied_before_any_eni_exists(
    node: tuple[str, BootstrapRun],
) -> None:
    """vm.nr_hugepages sets the default-size (2 MiB on x86_64) pool, as
    /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages does (kernel admin-guide/mm/
    hugetlbpage.rst); sysctl.d is applied by systemd-sysctl at every boot."""
    _, run = node
    assert run.returncode == 0, run.output
    assert (run.root / SYSCTL_FILE).read_text() == SYSCTLS
    assert (run.root / "etc/modules-load.d/node-profile.conf").read_text() == "nf_conntrack\n"
    commands = run.host_commands
    applied = commands.index(f"sysctl -q -e -p {run.root / SYSCTL_FILE}")
    assert commands.index("modprobe nf_conntrack") < applied
    # The first command of an ENI's setup (udevadm for its .link) comes after the profile.
    assert all(index > applied for index, command in enumerate(commands) if "multus1" in command)


def test_a_re_run_writes_the_same_profile(
    emulator: Ec2Emulator, user_data: str, node: tuple[str, BootstrapRun]
) -> None:
    instance_id, first = node
    again = emulator.run_bootstrap(user_data, instance_id, root=first.root)

    assert again.returncode == 0, again.output
    assert again.actions("CreateNetworkInterface") == []
    assert (again.root / SYSCTL_FILE).read_text() == SYSCTLS
