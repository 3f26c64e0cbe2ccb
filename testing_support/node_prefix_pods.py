"""EC2 cost of the node_prefix mode on the emulator: a node bootstrap, then pods through the real
host-local IPAM plugin with the config the bootstrap wrote (for `make bench`)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from config.node_bootstrap_plan import NodePrefixNetwork
from node_bootstrap import render_user_data
from node_bootstrap.node_prefix import cni_config_file_name
from testing_support.multus_emulator import AVAILABILITY_ZONES, Ec2Emulator, EmulatedVpc

HOST_LOCAL = Path("/usr/lib/cni/host-local")  # Debian's containernetworking-plugins
PREFIXES_PER_NODE = 2
CLUSTER = "bench-cluster"


@dataclass(frozen=True)
class NodePrefixCost:
    """EC2 calls per node and per pod of node_prefix networks, measured on the emulator."""

    networks: int
    ec2_calls_per_node: float
    pods: int
    ec2_calls_per_pod: float


def run_host_local(
    command: str, container: str, config: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """Runs host-local as a container runtime does: config on stdin, CNI_* environment.

    Returns its exit status and its JSON answer (the result, or the CNI error)."""
    completed = subprocess.run(
        [str(HOST_LOCAL)],
        input=json.dumps(config),
        env={
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container,
            "CNI_NETNS": f"/var/run/netns/{container}",
            "CNI_IFNAME": "net1",
            "CNI_PATH": str(HOST_LOCAL.parent),
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return completed.returncode, dict(json.loads(completed.stdout)) if completed.stdout else {}


def measure_node_prefix(emulator: Ec2Emulator) -> NodePrefixCost:
    """multus1 in whereabouts mode, multus2 in node_prefix mode; 16 x K pods on multus2."""
    if not HOST_LOCAL.exists():
        raise SystemExit(f"{HOST_LOCAL} is missing: run `make cni-plugins`")
    vpc = emulator.create_multus_vpc(network_count=2)
    user_data = node_prefix_user_data(emulator, vpc, ["multus2"])
    instance_id = emulator.launch_instance(vpc, AVAILABILITY_ZONES[0], CLUSTER)
    run = emulator.run_bootstrap(user_data, instance_id)
    if run.returncode != 0:
        raise SystemExit(f"node_prefix bootstrap failed:\n{run.output}")
    # As staged by the bootstrap (installed into /etc/cni/net.d once the VPC CNI runs).
    staged = run.root / "var/lib/multus-eni/cni" / cni_config_file_name(2)
    config_list = json.loads(staged.read_text())
    plugin = config_list["plugins"][0]
    pods = 16 * PREFIXES_PER_NODE
    emulator.proxy.reset()
    with tempfile.TemporaryDirectory(prefix="host-local-") as leases:
        config = {
            "cniVersion": config_list["cniVersion"],
            "name": config_list["name"],
            **plugin,
            "ipam": {**plugin["ipam"], "dataDir": leases},
        }
        for pod in range(pods):
            _succeeded(*run_host_local("ADD", f"pod-{pod}", config))
        for pod in range(pods):
            _succeeded(*run_host_local("DEL", f"pod-{pod}", config))
    return NodePrefixCost(
        networks=2,
        ec2_calls_per_node=len(run.ec2_calls),
        pods=pods,
        ec2_calls_per_pod=len(emulator.proxy.calls) / pods,
    )


def node_prefix_user_data(emulator: Ec2Emulator, vpc: EmulatedVpc, networks: list[str]) -> str:
    """The user-data of a node of `vpc` whose `networks` are in node_prefix mode (each with
    PREFIXES_PER_NODE /28 prefixes from a prefix reservation, the subnet's 10.0.x.64/26), the
    others in Whereabouts mode."""
    node_prefix = []
    for network in networks:
        device_index = vpc.networks.index(network) + 1
        for az_index, az in enumerate(AVAILABILITY_ZONES):
            # create_multus_vpc's layout: 10.0.(4 + 2 * network index + AZ index).0/24
            third_octet = 4 + 2 * (device_index - 1) + az_index
            reservation = f"10.0.{third_octet}.64/26"
            emulator.ec2.create_subnet_cidr_reservation(
                SubnetId=vpc.multus_subnets[network, az], Cidr=reservation, ReservationType="prefix"
            )
            node_prefix.append(
                NodePrefixNetwork(
                    availability_zone=az,
                    interface_name=network,
                    device_index=device_index,
                    prefix_count=PREFIXES_PER_NODE,
                    cni_network_name=f"{network}-{az}",
                    subnet_cidr=f"10.0.{third_octet}.0/24",
                    reservation_cidr=reservation,
                    ipvlan_mode="l2",
                )
            )
    return render_user_data(replace(vpc.bootstrap_props(CLUSTER), node_prefix=node_prefix))


def _succeeded(status: int, answer: dict[str, Any]) -> None:
    if status != 0:
        raise RuntimeError(f"host-local failed ({status}): {answer}")
