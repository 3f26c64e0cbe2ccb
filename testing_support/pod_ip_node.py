"""A node for the Multus pod IP agent on the emulator: bootstrap, agent process, CNI calls.

The node's host filesystem is a temporary directory (`root`): the bootstrap writes its ENI
state there, the agent keeps its socket, records and readiness marker there, and a pod's
network namespace is a file under root/run/netns (deleting it is the pod going away).
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multus_pod_ips import AGENT_MODULE, CNI_PLUGIN_SCRIPT, PACKAGE_DIR
from node_bootstrap import render_user_data
from testing_support.eni_addresses import EniAddressModel
from testing_support.multus_emulator import (
    BootstrapRun,
    Ec2Emulator,
    EmulatedVpc,
    RecordedCall,
    free_port,
)

#: Whereabouts ranges per Multus network on the emulator's subnets (10.0.4.0/24 onwards).
EMULATOR_RANGES = {
    "multus1": ["10.0.4.32/27", "10.0.5.32/27"],
    "multus2": ["10.0.6.32/27", "10.0.7.32/27"],
}
#: Blocks of fixed addresses inside them (multus.networks[].subnets[].static_range).
EMULATOR_STATIC_RANGES = {"multus1": ["10.0.4.48/28", "10.0.5.48/28"]}
#: The IPv6 pod range of a dual-stack subnet: the second /112 of its /64 (pod_range_prefix_length
#: 112, pod_range_offset 1), so the bootstrap's seed address, which EC2 picks outside the
#: reservation, is never a pod's.
IPV6_POD_RANGE_PREFIX_LENGTH, IPV6_POD_RANGE_OFFSET = 112, 1


def ipv6_pod_range(subnet_ipv6_cidr: str) -> str:
    """The pod range of a dual-stack subnet's /64."""
    subnet = ipaddress.ip_network(subnet_ipv6_cidr)
    ranges = subnet.subnets(new_prefix=IPV6_POD_RANGE_PREFIX_LENGTH)
    return str(next(itertools.islice(ranges, IPV6_POD_RANGE_OFFSET, None)))


def model_secondary_addresses(emulator: Ec2Emulator) -> None:
    """EC2's secondary-address behaviour in the proxy (and its delay of moves in IMDS: see
    address_model)."""
    model = EniAddressModel(emulator.ec2)
    emulator.proxy.model = model
    emulator.imds.local_ipv4s = model.imds_addresses


def reserve_pod_ranges(emulator: Ec2Emulator, reservations: Iterable[tuple[str, str]]) -> None:
    """Explicit CIDR reservations of (subnet ID, CIDR), as the network stack makes them, so no
    ENI gets a pod's address as its primary."""
    for subnet_id, cidr in reservations:
        emulator.ec2.create_subnet_cidr_reservation(
            SubnetId=subnet_id, Cidr=cidr, ReservationType="explicit"
        )


def pod_ip_vpc(emulator: Ec2Emulator, dual_stack: Sequence[str] = ()) -> EmulatedVpc:
    """The emulator's Multus VPC with the pod ranges reserved and EC2's secondary-address
    behaviour modelled (model_secondary_addresses); the `dual_stack` networks' subnets also
    get their /64 and its IPv6 pod range reserved (ipv6_pod_range)."""
    model_secondary_addresses(emulator)
    return reserved_multus_vpc(emulator, dual_stack)


def reserved_multus_vpc(emulator: Ec2Emulator, dual_stack: Sequence[str] = ()) -> EmulatedVpc:
    """pod_ip_vpc's VPC without modelling the emulator again: another VPC of an emulator whose
    EniAddressModel already serves a first one (a second model would forget the first's
    moves in progress)."""
    vpc = emulator.create_multus_vpc(network_count=len(EMULATOR_RANGES), dual_stack=dual_stack)
    reservations = []
    for subnet_id in vpc.multus_subnets.values():
        subnet = emulator.ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]
        network = ipaddress.ip_network(subnet["CidrBlock"])
        for cidr in (c for ranges in EMULATOR_RANGES.values() for c in ranges):
            if ipaddress.ip_network(cidr).subnet_of(network):  # type: ignore[arg-type]
                reservations.append((subnet_id, cidr))
    for key, ipv6_cidr in vpc.ipv6_subnet_cidrs.items():
        reservations.append((vpc.multus_subnets[key], ipv6_pod_range(ipv6_cidr)))
    reserve_pod_ranges(emulator, reservations)
    return vpc


def dual_stack_ranges(vpc: EmulatedVpc, network: str) -> list[str]:
    """The agent's ranges of a dual-stack network: its Whereabouts IPv4 ranges and the IPv6 pod
    range of each of its subnets."""
    ipv6 = [
        ipv6_pod_range(cidr) for (name, _), cidr in vpc.ipv6_subnet_cidrs.items() if name == network
    ]
    return [*EMULATOR_RANGES[network], *ipv6]


def address_model(emulator: Ec2Emulator) -> EniAddressModel:
    """The EniAddressModel pod_ip_vpc plugged into the emulator (set its remap_seconds)."""
    model = emulator.proxy.model
    if not isinstance(model, EniAddressModel):
        raise RuntimeError("the emulator has no EniAddressModel: call pod_ip_vpc first")
    return model


@dataclass(frozen=True)
class CniOutcome:
    """Exit status and output of one CNI plugin invocation."""

    status: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)


def prev_result(
    ip: str, ifname: str = "net1", cni_version: str = "0.3.1", ipv6: str | None = None
) -> dict[str, Any]:
    """What ipvlan+whereabouts(+sbr) hand on: one container interface with one address (and
    one IPv6 address on a dual-stack network)."""
    ips = [{"version": "4", "address": f"{ip}/24", "gateway": "10.0.4.1", "interface": 0}]
    if ipv6 is not None:
        ips.append({"version": "6", "address": f"{ipv6}/64", "interface": 0})
    return {
        "cniVersion": cni_version,
        "interfaces": [{"name": ifname, "sandbox": "/run/netns/x"}],
        "ips": ips,
        "dns": {},
    }


@dataclass
class PodIpNode:
    """One emulated node: its instance, Multus ENIs, agent process and CNI plugin calls."""

    emulator: Ec2Emulator
    instance_id: str
    root: Path
    reconcile_seconds: float = 1.0
    settle_seconds: float = 0.5
    add_timeout_seconds: float = 50.0
    #: Where the agent looks for pods' network namespaces: under root by default; "" for the
    #: real /run/netns, where the data-plane tier's pods live.
    netns_root: str | None = None
    agent: subprocess.Popen[bytes] | None = None
    enis: dict[str, str] = field(default_factory=dict)  # interface -> ENI ID
    #: Where the agent serves its Prometheus metrics on 127.0.0.1 (a free port per node).
    metrics_port: int = field(default_factory=free_port)
    #: The agent's ranges and static ranges per Multus interface (AgentConfig's fields).
    interfaces: Mapping[str, Sequence[str]] = field(default_factory=lambda: EMULATOR_RANGES)
    static_ranges: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: EMULATOR_STATIC_RANGES
    )
    floating_addresses: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: The pod-routed ranges and route tables per Multus interface (AgentConfig's fields).
    routed_ranges: Mapping[str, Sequence[str]] = field(default_factory=dict)
    route_tables: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def bootstrap(
        cls,
        emulator: Ec2Emulator,
        vpc: EmulatedVpc,
        az: str,
        cluster: str,
        instance_type: str = "m5.large",
        **options: Any,
    ) -> PodIpNode:
        """Launches the instance and runs its bootstrap in dry-host mode."""
        instance_id = emulator.launch_instance(vpc, az, cluster, instance_type)
        run = emulator.run_bootstrap(render_user_data(vpc.bootstrap_props(cluster)), instance_id)
        return cls.bootstrapped(emulator, instance_id, run, **options)

    @classmethod
    def bootstrapped(
        cls, emulator: Ec2Emulator, instance_id: str, run: BootstrapRun, **options: Any
    ) -> PodIpNode:
        """The node of an instance whose bootstrap has run (and must have succeeded)."""
        if run.returncode != 0:
            raise RuntimeError(f"bootstrap failed:\n{run.output}")
        node = cls(emulator, instance_id, run.root, **options)
        for state in (run.root / "var/lib/multus-eni").glob("*.eni"):
            node.enis[state.stem] = state.read_text().split()[1]
        return node

    @property
    def socket_path(self) -> Path:
        return self.root / "run/multus-pod-ips/agent.sock"

    @property
    def ready_marker(self) -> Path:
        return self.root / "run/multus-pod-ips/ready"

    def start_agent(self, wait_ready: bool = True) -> None:
        config = {
            "socket_path": str(self.socket_path),
            "records_dir": str(self.root / "run/multus-pod-ips/pods"),
            "ready_marker": str(self.ready_marker),
            "eni_state_dir": str(self.root / "var/lib/multus-eni"),
            "netns_root": str(self.root) if self.netns_root is None else self.netns_root,
            "interfaces": {name: list(ranges) for name, ranges in self.interfaces.items()},
            "static_ranges": {name: list(r) for name, r in self.static_ranges.items()},
            "floating_addresses": {n: list(a) for n, a in self.floating_addresses.items()},
            "reconcile_seconds": self.reconcile_seconds,
            "settle_seconds": self.settle_seconds,
            "add_timeout_seconds": self.add_timeout_seconds,
            "metrics_port": self.metrics_port,  # 0: not served (AgentConfig.metrics_port)
            "routed_ranges": {name: list(r) for name, r in self.routed_ranges.items()},
            "route_tables": {name: list(ids) for name, ids in self.route_tables.items()},
        }
        config_path = self.root / "agent-config.json"
        config_path.write_text(json.dumps(config))
        self.ready_marker.unlink(missing_ok=True)
        log = (self.root / "agent.log").open("ab")
        self.agent = subprocess.Popen(
            [sys.executable, "-m", AGENT_MODULE, str(config_path)],
            cwd=PACKAGE_DIR.parent,  # as the DaemonSet runs it: -m finds the package there
            env={
                "MULTUS_IMDS_URL": self.emulator.imds.base_url(self.instance_id),
                "MULTUS_EC2_ENDPOINT": self.emulator.proxy.url,
                "PATH": "/usr/bin:/bin",
            },
            stdout=log,
            stderr=log,
        )
        if wait_ready:
            self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready_marker.exists():
            if self.agent is not None and self.agent.poll() is not None:
                raise RuntimeError(f"agent exited {self.agent.returncode}:\n{self.agent_log()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"agent not ready in {timeout} s:\n{self.agent_log()}")
            time.sleep(0.05)

    def kill_agent(self) -> None:
        if self.agent is not None:
            self.agent.send_signal(signal.SIGKILL)
            self.agent.wait(timeout=10)
            self.agent = None

    def stop_agent(self) -> None:
        if self.agent is not None:
            self.agent.terminate()
            try:
                self.agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill_agent()
            self.agent = None

    def scrape_metrics(self) -> str:
        """The agent's answer to GET /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    def agent_log(self) -> str:
        path = self.root / "agent.log"
        return path.read_text() if path.exists() else ""

    def netns(self, container_id: str) -> str:
        """Creates the pod's network namespace (a file) and returns its path as CNI sees it."""
        path = self.root / "run/netns" / f"cni-{container_id}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return f"/var/run/netns/cni-{container_id}"

    def remove_netns(self, container_id: str) -> None:
        (self.root / "run/netns" / f"cni-{container_id}").unlink(missing_ok=True)

    def cni_command(
        self,
        command: str,
        container_id: str,
        *,
        master: str = "multus1",
        ip: str | None = None,
        ifname: str = "net1",
        config: dict[str, Any] | None = None,
        fixed: bool = False,
        ipv6: str | None = None,
    ) -> PendingCni:
        """Starts the plugin the way Multus would; finish with `outcome`. fixed: as chained in
        a static NAD (a fixed address). ipv6: the pod's IPv6 address on a dual-stack network."""
        network = config or {
            "cniVersion": "0.3.1",
            "name": f"{master}-test",
            "type": "multus-pod-ip",
            "master": master,
            "agentSocket": str(self.socket_path),
            **({"fixedAddresses": True} if fixed else {}),
        }
        if ip is not None and "prevResult" not in network:
            network = {**network, "prevResult": prev_result(ip, ifname, ipv6=ipv6)}
        process = subprocess.Popen(
            [sys.executable, str(CNI_PLUGIN_SCRIPT)],
            env={
                "CNI_COMMAND": command,
                "CNI_CONTAINERID": container_id,
                "CNI_NETNS": f"/var/run/netns/cni-{container_id}",
                "CNI_IFNAME": ifname,
                "CNI_ARGS": f"K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-{container_id}",
                "CNI_PATH": "/opt/cni/bin",
                "PATH": "/usr/bin:/bin",
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return PendingCni(process, json.dumps(network))

    def cni(self, command: str, container_id: str, **options: Any) -> CniOutcome:
        return outcome(self.cni_command(command, container_id, **options))

    def add_pod(
        self,
        container_id: str,
        ip: str,
        master: str = "multus1",
        fixed: bool = False,
        ipv6: str | None = None,
    ) -> CniOutcome:
        self.netns(container_id)
        return self.cni("ADD", container_id, master=master, ip=ip, fixed=fixed, ipv6=ipv6)

    def delete_pod(
        self,
        container_id: str,
        ip: str,
        master: str = "multus1",
        fixed: bool = False,
        ipv6: str | None = None,
    ) -> CniOutcome:
        result = self.cni("DEL", container_id, master=master, ip=ip, fixed=fixed, ipv6=ipv6)
        self.remove_netns(container_id)
        return result

    def mac(self, interface: str = "multus1") -> str:
        """The MAC address of the ENI (its key under IMDS network/interfaces/macs/)."""
        eni = self.emulator.ec2.describe_network_interfaces(
            NetworkInterfaceIds=[self.enis[interface]]
        )["NetworkInterfaces"][0]
        return str(eni["MacAddress"])

    def imds_local_ipv4s(self, interface: str = "multus1") -> list[str]:
        """What IMDS lists as network/interfaces/macs/<mac>/local-ipv4s of the ENI."""
        path = f"network/interfaces/macs/{self.mac(interface)}/local-ipv4s"
        return (self.emulator.imds.metadata(self.instance_id, path) or "").split()

    def ec2_calls(self) -> list[RecordedCall]:
        """The EC2 requests (since the proxy's last reset) that name one of this node's ENIs."""
        enis = set(self.enis.values())
        return [
            call
            for call in self.emulator.proxy.calls
            if enis & {v for k, v in call.params.items() if k.startswith("NetworkInterfaceId")}
        ]

    def addresses(self, interface: str = "multus1") -> set[str]:
        """Secondary addresses EC2 (moto) holds on this node's ENI of `interface`."""
        eni = self.emulator.ec2.describe_network_interfaces(
            NetworkInterfaceIds=[self.enis[interface]]
        )["NetworkInterfaces"][0]
        return {a["PrivateIpAddress"] for a in eni["PrivateIpAddresses"] if not a["Primary"]}

    def ipv6_pod_range(self, interface: str = "multus1") -> str:
        """The IPv6 pod range (ipv6_pod_range) of the subnet of this node's ENI of `interface`,
        a dual-stack network's."""
        eni = self.emulator.ec2.describe_network_interfaces(
            NetworkInterfaceIds=[self.enis[interface]]
        )["NetworkInterfaces"][0]
        subnet = self.emulator.ec2.describe_subnets(SubnetIds=[eni["SubnetId"]])["Subnets"][0]
        (block,) = subnet["Ipv6CidrBlockAssociationSet"]
        return ipv6_pod_range(block["Ipv6CidrBlock"])

    def ipv6_addresses(self, interface: str = "multus1") -> set[str]:
        """IPv6 addresses EC2 (moto) holds on this node's ENI of `interface` (the bootstrap's
        seed address included)."""
        eni = self.emulator.ec2.describe_network_interfaces(
            NetworkInterfaceIds=[self.enis[interface]]
        )["NetworkInterfaces"][0]
        return {a["Ipv6Address"] for a in eni.get("Ipv6Addresses", [])}


@dataclass
class PendingCni:
    """A started plugin process, waiting for its network configuration on stdin: started
    processes are `release`d together to model requests that arrive at the same moment."""

    process: subprocess.Popen[str]
    stdin: str
    released: bool = False

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(self.stdin)
        self.process.stdin.close()
        self.released = True


def outcome(pending: PendingCni, timeout: float = 120) -> CniOutcome:
    if not pending.released:
        pending.release()
    process = pending.process
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = process.stdout.read(), process.stderr.read()
    process.wait(timeout=timeout)
    return CniOutcome(process.returncode, stdout.strip(), stderr)


def wait_until(condition: Any, timeout: float = 20, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def stop_all(nodes: Sequence[PodIpNode]) -> None:
    for node in nodes:
        node.stop_agent()
