"""A node of a dual-stack network on the emulator: its ENI gets exactly one IPv6 address of the
subnet's /64, an IPv4-only network's ENI none, and the host accepts no router advertisement on
the dual-stack interface (node_bootstrap/dual_stack.sh says why)."""

from __future__ import annotations

import ipaddress

import pytest

from node_bootstrap import render_user_data
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, EmulatedVpc
from tests.integration.node_bootstrap.conftest import CLUSTER
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import multus_enis

pytestmark = pytest.mark.integration

AZ = "us-west-2a"
SYSCTL_FILE = "etc/sysctl.d/90-multus-eni-ipv6.conf"


@pytest.fixture(scope="module")
def vpc(emulator: Ec2Emulator) -> EmulatedVpc:
    """multus1 IPv4 only, multus2 dual-stack."""
    return emulator.create_multus_vpc(network_count=2, dual_stack=("multus2",))


@pytest.fixture(scope="module")
def user_data(vpc: EmulatedVpc) -> str:
    return render_user_data(vpc.bootstrap_props(CLUSTER))


@pytest.fixture(scope="module")
def node(emulator: Ec2Emulator, vpc: EmulatedVpc, user_data: str) -> tuple[str, BootstrapRun]:
    instance_id = emulator.launch_instance(vpc, AZ, CLUSTER)
    return instance_id, emulator.run_bootstrap(user_data, instance_id)


def test_the_dual_stack_eni_gets_one_ipv6_address_of_its_subnet_and_the_other_none(
    emulator: Ec2Emulator, vpc: EmulatedVpc, node: tuple[str, BootstrapRun]
) -> None:
    """EC2 API reference, CreateNetworkInterface: Ipv6AddressCount, "Amazon EC2 automatically
    selects the IPv6 addresses from the subnet range"; one, as the seed's user-data does."""
    instance_id, run = node
    assert run.returncode == 0, run.output

    enis = multus_enis(emulator, instance_id)
    ipv6 = [item["Ipv6Address"] for item in enis[2].get("Ipv6Addresses", [])]
    assert len(ipv6) == 1
    subnet = ipaddress.ip_network(vpc.ipv6_subnet_cidrs["multus2", AZ])
    assert subnet.prefixlen == 64
    assert ipaddress.ip_address(ipv6[0]) in subnet
    assert enis[1].get("Ipv6Addresses", []) == []
    creates = {
        call.params["SubnetId"]: call.params.get("Ipv6AddressCount")
        for call in run.actions("CreateNetworkInterface")
    }
    assert creates == {
        vpc.multus_subnets["multus1", AZ]: None,
        vpc.multus_subnets["multus2", AZ]: "1",
    }


def test_imds_lists_the_seed_address_under_the_enis_ipv6s(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    """EC2 User Guide, "Instance metadata categories": network/interfaces/macs/mac/ipv6s."""
    instance_id, _ = node
    enis = multus_enis(emulator, instance_id)
    path = f"network/interfaces/macs/{enis[2]['MacAddress']}/ipv6s"
    assert emulator.imds.metadata(instance_id, path) == enis[2]["Ipv6Addresses"][0]["Ipv6Address"]
    assert (
        emulator.imds.metadata(
            instance_id, path.replace(enis[2]["MacAddress"], enis[1]["MacAddress"])
        )
        is None
    )


def test_router_advertisements_are_refused_on_the_dual_stack_interface_only(
    node: tuple[str, BootstrapRun],
) -> None:
    """The kernel's accept_ra (Documentation/networking/ip-sysctl.rst): 0 accepts none, so no
    default route through the Multus ENI appears in the host's table. sysctl.d is applied to
    an interface when it appears by systemd's udev rule (systemd rules.d/99-systemd.rules:
    systemd-sysctl --prefix=/net/ipv6/conf/$name), and once more after the link is up."""
    _, run = node
    assert (run.root / SYSCTL_FILE).read_text() == "net.ipv6.conf.multus2.accept_ra = 0\n"
    accept_ra = [command for command in run.host_commands if "accept_ra" in command]
    assert accept_ra == ["sysctl -qw net.ipv6.conf.multus2.accept_ra=0"]
    up = run.host_commands.index("ip link set dev multus2 up")
    assert run.host_commands.index(accept_ra[0]) > up


def test_a_re_run_creates_nothing_and_keeps_the_setting(
    emulator: Ec2Emulator, user_data: str, node: tuple[str, BootstrapRun]
) -> None:
    instance_id, first = node
    again = emulator.run_bootstrap(user_data, instance_id, root=first.root)

    assert again.returncode == 0, again.output
    assert again.actions("CreateNetworkInterface") == []
    assert (again.root / SYSCTL_FILE).read_text() == "net.ipv6.conf.multus2.accept_ra = 0\n"
    assert len(multus_enis(emulator, instance_id)[2]["Ipv6Addresses"]) == 1
