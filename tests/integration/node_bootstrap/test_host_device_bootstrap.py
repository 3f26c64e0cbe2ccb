"""host-device networks on the emulator (examples/host-device.json, pool upf): the node attaches
enis_per_node ENIs of the network at consecutive device indexes, names them <name><slot>, lists
them in the readiness marker and writes each one's node-local CNI config; then the config runs
through the real host-device plugin in network namespaces (docs/network.md, Whole-ENI
networks)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config import AppConfig, parse_config
from config.node_bootstrap_plan import READY_MARKER_PATH
from node_bootstrap.host_device import host_device_config_file_name
from testing_support.cni_chain import DEBIAN_CNI_PLUGIN_DIR, IP_COMMAND
from testing_support.multus_emulator import BootstrapRun, Ec2Emulator, PlannedVpc
from tests.integration.node_bootstrap.test_multus_eni_bootstrap_script import multus_enis

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
CLUSTER = "host-device-cluster"
AZ = "us-west-2a"
STAGED = "var/lib/multus-eni/cni"


@pytest.fixture(scope="module")
def config() -> AppConfig:
    return parse_config(json.loads((REPO / "examples" / "host-device.json").read_text()))


@pytest.fixture(scope="module")
def planned(emulator: Ec2Emulator, config: AppConfig) -> PlannedVpc:
    return emulator.create_config_vpc(config)


@pytest.fixture(scope="module")
def node(emulator: Ec2Emulator, config: AppConfig, planned: PlannedVpc) -> tuple[str, BootstrapRun]:
    """One upf node in us-west-2a: n3 (ipvlan) at device 1, n6's two ENIs at 2 and 3."""
    instance_id = emulator.launch_instance(planned.vpc, AZ, CLUSTER, instance_type="c5n.xlarge")
    plan = config.pool_plan(config.node_pools[0])
    return instance_id, emulator.run_bootstrap(planned.user_data(CLUSTER, plan), instance_id)


def staged_config(run: BootstrapRun, device_index: int) -> dict[str, Any]:
    path = run.root / STAGED / host_device_config_file_name(device_index)
    return dict(json.loads(path.read_text()))


def test_the_node_attaches_enis_per_node_enis_of_the_network_at_consecutive_indexes(
    emulator: Ec2Emulator, planned: PlannedVpc, node: tuple[str, BootstrapRun]
) -> None:
    instance_id, run = node
    assert run.returncode == 0, run.output
    subnets = planned.vpc.multus_subnets
    assert {
        index: eni["SubnetId"] for index, eni in multus_enis(emulator, instance_id).items()
    } == {1: subnets["n3", AZ], 2: subnets["n6", AZ], 3: subnets["n6", AZ]}


def test_each_eni_is_named_by_its_slot_and_the_marker_waits_for_all(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    instance_id, run = node
    enis = multus_enis(emulator, instance_id)
    for index, name in ((2, "n60"), (3, "n61")):
        link = (run.root / f"etc/systemd/network/10-multus-{name}.link").read_text()
        assert f"MACAddress={enis[index]['MacAddress']}\n" in link
        assert f"Name={name}\n" in link
    marker = run.root / READY_MARKER_PATH.lstrip("/")
    assert marker.read_text().split() == ["n3", "n60", "n61"]


def test_each_host_device_eni_gets_a_config_with_its_primary_address(
    emulator: Ec2Emulator, node: tuple[str, BootstrapRun]
) -> None:
    """The keys host-device.go takes (containernetworking/plugins v1.9.1, plugins/main/
    host-device: NetConf's "device") and static IPAM's (plugins/ipam/static: addresses with
    address and gateway, routes with dst and gw); the address is the one EC2 gave the ENI."""
    instance_id, run = node
    enis = multus_enis(emulator, instance_id)
    for slot, index in enumerate((2, 3)):
        assert staged_config(run, index) == {
            "cniVersion": "0.3.1",
            "name": f"n6-{AZ}-{slot}",
            "type": "host-device",
            "device": f"n6{slot}",
            "ipam": {
                "type": "static",
                "addresses": [
                    {"address": f"{enis[index]['PrivateIpAddress']}/24", "gateway": "10.0.8.1"}
                ],
                "routes": [{"dst": "10.200.0.0/16", "gw": "10.0.8.1"}],
            },
        }
    # n3 is an ipvlan network: its NAD carries its config, the node writes none.
    assert sorted(path.name for path in (run.root / STAGED).iterdir()) == [
        "90-host-device-eni2.conf",
        "90-host-device-eni3.conf",
    ]


def test_a_rerun_creates_nothing_and_writes_the_same_configs(
    emulator: Ec2Emulator, config: AppConfig, planned: PlannedVpc, node: tuple[str, BootstrapRun]
) -> None:
    instance_id, first = node
    before = {index: staged_config(first, index) for index in (2, 3)}
    plan = config.pool_plan(config.node_pools[0])
    again = emulator.run_bootstrap(planned.user_data(CLUSTER, plan), instance_id)
    assert again.returncode == 0, again.output
    assert again.actions("CreateNetworkInterface") == []
    assert {index: staged_config(again, index) for index in (2, 3)} == before


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IP_COMMAND, *args], capture_output=True, text=True, check=check)


@pytest.fixture
def node_and_pod() -> Iterator[tuple[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces")
    if not (DEBIAN_CNI_PLUGIN_DIR / "host-device").exists():
        message = f"no host-device in {DEBIAN_CNI_PLUGIN_DIR}: run `make cni-plugins`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    tag = uuid.uuid4().hex[:6]
    names = (f"hd-node-{tag}", f"hd-pod-{tag}")
    created = []
    try:
        for name in names:
            made = ip("netns", "add", name, check=False)
            if made.returncode != 0:
                pytest.skip(f"cannot create network namespaces here: {made.stderr.strip()}")
            created.append(name)
        yield names
    finally:
        for name in created:
            ip("netns", "del", name, check=False)


def run_plugin(command: str, config: dict[str, Any], node_ns: str, pod_ns: str) -> str:
    """The plugin as Multus runs a delegate: in the node's namespace, the config on stdin."""
    completed = subprocess.run(
        [IP_COMMAND, "netns", "exec", node_ns, str(DEBIAN_CNI_PLUGIN_DIR / "host-device")],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        check=False,
        env={
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": "host-device-test",
            "CNI_NETNS": f"/run/netns/{pod_ns}",
            "CNI_IFNAME": "net1",
            "CNI_PATH": str(DEBIAN_CNI_PLUGIN_DIR),
        },
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_the_real_plugin_moves_the_eni_into_the_pod_as_net1_with_its_address_and_routes(
    node: tuple[str, BootstrapRun], node_and_pod: tuple[str, str]
) -> None:
    """Debian's host-device plugin (containernetworking-plugins 1.1.1; v1.9.1 moves the link
    the same way, through a temporary namespace) takes the rendered file: the link named by
    "device" leaves the node, shows up in the pod as CNI_IFNAME, up, with the ENI's address and
    the network's route via the VPC router; DEL gives it back to the node under its name. One
    end of a veth pair stands in for the ENI (the build machine has no ENA device, and its
    kernel no dummy links)."""
    _, run = node
    config = staged_config(run, 2)
    address = config["ipam"]["addresses"][0]["address"]
    node_ns, pod_ns = node_and_pod
    ip("-n", node_ns, "link", "add", "n60", "mtu", "8500", "type", "veth", "peer", "name", "peer")

    run_plugin("ADD", config, node_ns, pod_ns)

    assert ip("-n", node_ns, "link", "show", "n60", check=False).returncode != 0
    net1 = ip("-n", pod_ns, "-o", "addr", "show", "dev", "net1").stdout
    assert f"inet {address} " in net1
    link = ip("-n", pod_ns, "-o", "link", "show", "dev", "net1").stdout
    assert ",UP" in link and "mtu 8500" in link
    routes = ip("-n", pod_ns, "route", "show", "dev", "net1").stdout
    assert "10.200.0.0/16 via 10.0.8.1" in routes

    run_plugin("DEL", config, node_ns, pod_ns)

    assert ip("-n", pod_ns, "link", "show", "net1", check=False).returncode != 0
    assert ip("-n", node_ns, "link", "show", "n60").returncode == 0
