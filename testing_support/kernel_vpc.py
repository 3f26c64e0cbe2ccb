"""The emulated VPC as a real network in a Linux kernel, for the data-plane tier (tests/dataplane).

Run as root in a kernel with ipvlan (testing_support/kernel_vm/run boots one). Layout:

- namespace `vpc`: one bridge per subnet of the fabric (the AZ's node subnet and its Multus
  subnets), the VPC router at each subnet's gateway address on the bridge device (with the
  subnet's `router_mac`), and the fabric's nftables bridge table (testing_support/vpc_fabric.py)
  generated from the emulator's ENI state by `sync`; the routes of the subnets' route tables
  whose target is an ENI become the router's routes (`sync` too: one routing table for all the
  subnets, so two tables sending one destination to different ENIs are refused), each via the
  ENI's primary address with its MAC as a permanent neighbour (the VPC knows each ENI's MAC;
  nothing answers ARP for an ENI's primary address that the node does not configure);
- the root namespace: the emulator (the proxy and the fake IMDS; moto_server too, unless the
  host runs it) at SERVICES_HOST, reached from the VPC router over a veth, as a node reaches
  the EC2 endpoint and IMDS;
- one namespace per node: eth0 is a veth with its primary ENI's MAC and address on the node
  subnet's bridge; each Multus ENI the bootstrap attaches appears as a veth on its subnet's
  bridge, named and sized by the .link file the bootstrap wrote (`EniHotplug` plays the kernel
  and udev);
- pods (testing_support/kernel_pods.py): a namespace each, eth0 as the VPC CNI sets it up,
  net1 by the NAD's plugin chain.
"""

from __future__ import annotations

import configparser
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testing_support.multus_emulator import Ec2Emulator
from testing_support.vpc_fabric import TABLE_NAME, VpcFabric, fabric_from_ec2

VPC_NAMESPACE = "vpc"
#: The emulator's side of the services link (TEST-NET-2), and the VPC router's.
SERVICES_HOST = "198.51.100.1"
SERVICES_ROUTER = "198.51.100.2"
VPC_CIDR = "10.0.0.0/16"
#: The routing protocol number that marks the router's routes to ENIs (`ip route ... proto`),
#: so that `sync` replaces exactly those.
ENI_ROUTE_PROTOCOL = "200"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def in_netns(
    namespace: str, *command: str, check: bool = True, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{namespace}: {' '.join(command)}: {done.stderr.strip()}")
    return done


def sysctl(namespace: str, setting: str) -> None:
    in_netns(namespace, "sysctl", "-qw", setting)


def services_link() -> None:
    """The `vpc` namespace and its link to the root namespace, where the emulator listens on
    SERVICES_HOST (run before the emulator starts: it binds that address)."""
    ip("netns", "add", VPC_NAMESPACE)
    ip("-n", VPC_NAMESPACE, "link", "set", "lo", "up")
    sysctl(VPC_NAMESPACE, "net.ipv4.ip_forward=1")
    ip("link", "add", "aws0", "type", "veth", "peer", "name", "svc0", "netns", VPC_NAMESPACE)
    ip("address", "add", f"{SERVICES_HOST}/24", "dev", "aws0")
    ip("link", "set", "aws0", "up")
    ip("route", "add", VPC_CIDR, "via", SERVICES_ROUTER)
    ip("-n", VPC_NAMESPACE, "address", "add", f"{SERVICES_ROUTER}/24", "dev", "svc0")
    ip("-n", VPC_NAMESPACE, "link", "set", "svc0", "up")


@dataclass(frozen=True)
class LinkFile:
    """What a systemd .link file tells udev about a device with this MAC."""

    mac: str
    name: str
    mtu: int


def link_files(directory: Path) -> dict[str, LinkFile]:
    """The .link files in `directory` by the MAC they match (systemd.link: [Match]
    MACAddress=, [Link] Name= and MTUBytes=)."""
    found = {}
    for path in sorted(directory.glob("*.link")):
        parser = configparser.ConfigParser()
        parser.read_string(path.read_text())
        mac = parser["Match"]["MACAddress"].lower()
        link = parser["Link"]
        found[mac] = LinkFile(mac, link["Name"], int(link.get("MTUBytes", "1500")))
    return found


@dataclass
class KernelNode:
    """A node's network namespace and where its bootstrap writes files (`root`)."""

    name: str
    instance_id: str
    root: Path
    primary_eni_id: str
    primary_address: str
    plugged: dict[str, str] = field(default_factory=dict)  # ENI ID -> interface name

    @property
    def link_dir(self) -> Path:
        return self.root / "etc/systemd/network"


class KernelVpc:
    """The VPC's subnets as bridges in `vpc`, with the fabric's rules from the emulator."""

    def __init__(self, emulator: Ec2Emulator, subnet_ids: Sequence[str]) -> None:
        self.emulator = emulator
        self.subnet_ids = tuple(subnet_ids)
        self.nodes: dict[str, KernelNode] = {}
        self._subnets = {subnet.subnet_id: subnet for subnet in self.fabric().subnets}
        self._build()

    def fabric(self) -> VpcFabric:
        """The fabric as EC2 (the emulator) shows the subnets' ENIs now."""
        ec2 = self.emulator.ec2
        enis = ec2.describe_network_interfaces(
            Filters=[{"Name": "subnet-id", "Values": list(self.subnet_ids)}]
        )
        subnets = ec2.describe_subnets(SubnetIds=list(self.subnet_ids))
        vpc_ids = sorted({subnet["VpcId"] for subnet in subnets["Subnets"]})
        return fabric_from_ec2(
            enis,
            subnets,
            _prefixes_of(self.emulator, enis),
            ec2.describe_route_tables(Filters=[{"Name": "vpc-id", "Values": vpc_ids}]),
        )

    def sync(self) -> VpcFabric:
        """Replaces the bridge table with one from the emulator's current ENI state (what the
        VPC's mapping service would know once EC2 answered)."""
        fabric = self.fabric()
        ruleset = f"table bridge {TABLE_NAME}\ndelete table bridge {TABLE_NAME}\n"
        loaded = subprocess.run(
            ["ip", "netns", "exec", VPC_NAMESPACE, "nft", "-f", "-"],
            input=ruleset + fabric.nftables_ruleset(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if loaded.returncode != 0:
            raise RuntimeError(f"nft refused the fabric's table: {loaded.stderr}")
        self._route_to_enis(fabric)
        return fabric

    def _route_to_enis(self, fabric: VpcFabric) -> None:
        """The router's routes to ENIs, replaced by those of the fabric's route tables."""
        targets: dict[str, tuple[str, str, str]] = {}  # destination -> (address, MAC, bridge)
        for subnet in fabric.subnets:
            for destination, eni in subnet.delivered_routes:
                target = (str(eni.addresses[0]), eni.mac, self.bridge(subnet.subnet_id))
                if targets.setdefault(str(destination), target) != target:
                    raise ValueError(f"{destination}: routed to two ENIs (one router table)")
        ip("-n", VPC_NAMESPACE, "route", "flush", "proto", ENI_ROUTE_PROTOCOL)
        for cidr, (address, mac, bridge) in sorted(targets.items()):
            ip("-n", VPC_NAMESPACE, "neigh", "replace", address, "lladdr", mac, "dev", bridge,
               "nud", "permanent")  # fmt: skip
            ip("-n", VPC_NAMESPACE, "route", "replace", cidr, "via", address, "dev",
               bridge, "onlink", "proto", ENI_ROUTE_PROTOCOL)  # fmt: skip

    def bridge(self, subnet_id: str) -> str:
        return f"br-{subnet_id[-8:]}"

    def _build(self) -> None:
        for subnet in self._subnets.values():
            bridge = self.bridge(subnet.subnet_id)
            ip(
                "-n",
                VPC_NAMESPACE,
                "link",
                "add",
                bridge,
                "address",
                subnet.router_mac,
                "type",
                "bridge",
            )
            address = f"{subnet.gateway}/{subnet.cidr.prefixlen}"
            ip("-n", VPC_NAMESPACE, "address", "add", address, "dev", bridge)
            ip("-n", VPC_NAMESPACE, "link", "set", bridge, "up")
        self.sync()

    def add_node(self, name: str, instance_id: str, root: Path) -> KernelNode:
        """The node's namespace with eth0 on its primary ENI's subnet, routed via the VPC
        router, before its bootstrap runs (which reaches IMDS and EC2 over it)."""
        primary = self._eni_at(instance_id, 0)
        address = primary["PrivateIpAddress"]
        subnet = self._subnets[primary["SubnetId"]]
        ip("netns", "add", name)
        ip("-n", name, "link", "set", "lo", "up")
        self._plug(name, primary, "eth0", 1500)
        ip("-n", name, "address", "add", f"{address}/{subnet.cidr.prefixlen}", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "route", "add", "default", "via", str(subnet.gateway))
        node = KernelNode(name, instance_id, root, primary["NetworkInterfaceId"], address)
        node.plugged[primary["NetworkInterfaceId"]] = "eth0"
        self.nodes[instance_id] = node
        self.sync()
        return node

    def plug_attached_enis(self) -> None:
        """Makes each newly attached ENI of a node appear in its namespace, as the kernel and
        udev would: named and sized by the node's .link file for its MAC, else ethN."""
        for node in list(self.nodes.values()):
            for eni in self._attached(node.instance_id):
                eni_id = eni["NetworkInterfaceId"]
                if eni_id in node.plugged or eni["SubnetId"] not in self._subnets:
                    continue
                link = link_files(node.link_dir).get(eni["MacAddress"].lower())
                index = eni["Attachment"]["DeviceIndex"]
                name, mtu = (link.name, link.mtu) if link else (f"eth{index}", 1500)
                self._plug(node.name, eni, name, mtu)
                node.plugged[eni_id] = name
                self.sync()

    def _plug(self, namespace: str, eni: Mapping[str, Any], name: str, mtu: int) -> None:
        port = f"e-{eni['NetworkInterfaceId'][-10:]}"
        ip(
            "link",
            "add",
            port,
            "netns",
            VPC_NAMESPACE,
            "mtu",
            str(mtu),
            "type",
            "veth",
            "peer",
            "name",
            name,
            "netns",
            namespace,
            "mtu",
            str(mtu),
        )
        ip("-n", namespace, "link", "set", name, "address", eni["MacAddress"].lower())
        ip("-n", VPC_NAMESPACE, "link", "set", port, "master", self.bridge(eni["SubnetId"]), "up")

    def _attached(self, instance_id: str) -> list[dict[str, Any]]:
        answer = self.emulator.ec2.describe_network_interfaces(
            Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}]
        )
        return list(answer["NetworkInterfaces"])

    def _eni_at(self, instance_id: str, device_index: int) -> dict[str, Any]:
        return next(
            eni
            for eni in self._attached(instance_id)
            if eni["Attachment"]["DeviceIndex"] == device_index
        )


class EniHotplug:
    """Plugs attached ENIs into their nodes while the bootstraps run: a thread that looks at
    the nodes' attachments each time EC2 (the emulator's proxy) carried out an attach, as the
    kernel sees a NIC arrive when EC2 attaches it. (It polled every 0.1 s before: under the
    VM's emulated CPU, those DescribeNetworkInterfaces calls took CPU from the bootstraps.)"""

    def __init__(self, vpc: KernelVpc) -> None:
        self._vpc = vpc
        self._stop = False
        self._attached = threading.Event()
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EniHotplug:
        self._vpc.emulator.proxy.on_attached = self._on_attached
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._vpc.emulator.proxy.on_attached = None
        self._stop = True
        self._attached.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise RuntimeError(f"ENI hotplug failed: {self.error}") from self.error

    def _on_attached(self, _eni_id: str) -> None:
        self._attached.set()

    def _run(self) -> None:
        while True:
            self._attached.wait()
            if self._stop:
                return
            self._attached.clear()
            try:
                self._vpc.plug_attached_enis()
            except Exception as error:  # reported on exit: the bootstrap then times out
                self.error = error
                return


def _prefixes_of(emulator: Ec2Emulator, enis: Mapping[str, Any]) -> dict[str, list[str]]:
    """The prefixes the emulator delegated to these ENIs (moto does not keep them)."""
    delegation = emulator.proxy.prefixes
    listed = (item["NetworkInterfaceId"] for item in enis["NetworkInterfaces"])
    return {eni: list(delegation.of(eni)) for eni in listed}
