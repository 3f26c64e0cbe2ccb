"""Pods of the data-plane tier: a network namespace each, with eth0 as the VPC CNI sets it up
and net1 by the real plugin chain of the NAD our chart renders.

eth0 (amazon-vpc-cni-k8s, docs/cni-proposal.md, "Pod to Pod communication" and cmd/routed-eni-
cni-plugin/driver/driver.go): the pod's address is a secondary IPv4 address of the node's
primary ENI (ipamd assigns its warm pool that way), set as a /32 on eth0, with 169.254.1.1 as
an on-link gateway whose neighbour entry is the host veth's MAC, and a default route via it;
the node routes the address to the host veth.

net1: the NAD's chain (charts/network_attachments.py: ipvlan, sbr, multus-pod-ip) with its
IPAM replaced by `static` at an address of the same Whereabouts range (Whereabouts needs the
Kubernetes API; the range check keeps the address where Whereabouts could have leased it),
run with CNI_COMMAND ADD and DEL as libcni does (no CHECK: the NAD's cniVersion 0.3.1 predates
it, and libcni refuses CHECK for such a config) (testing_support/cni_chain.py).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from testing_support.cni_chain import ChainRun
from testing_support.kernel_vpc import KernelNode, in_netns, ip
from testing_support.pod_ip_node import PodIpNode
from testing_support.vpc_cni_stand_in import set_up_eth0

IDENTITY_PORT = 7007

#: Answers each UDP datagram with "<pod name> <the source address it came from>".
_IDENTITY_SERVER = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    f"s.bind(('0.0.0.0', {IDENTITY_PORT}))\n"
    "print('ready', flush=True)\n"
    "while True:\n"
    "    data, peer = s.recvfrom(64)\n"
    "    s.sendto(f'{sys.argv[1]} {peer[0]}'.encode(), peer)\n"
)
_IDENTITY_CLIENT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "s.settimeout(float(sys.argv[2]))\n"
    f"s.sendto(b'who', (sys.argv[1], {IDENTITY_PORT}))\n"
    "try:\n"
    "    print(s.recvfrom(64)[0].decode())\n"
    "except TimeoutError:\n"
    "    sys.exit(1)\n"
)


def with_static_ipam(
    network: dict[str, Any], address: str, ipv6_address: str | None = None
) -> dict[str, Any]:
    """The NAD's config with its Whereabouts IPAM replaced by static IPAM at `address` (and, on
    a dual-stack NAD, `ipv6_address`), each of which must lie in its Whereabouts range
    (first-last/prefix: `range`, the IPv6 one in `ipRanges`). The gateway and the routes stay
    the NAD's: Whereabouts puts them into its result as given (whereabouts cmd/whereabouts.go,
    cmdAdd), as static IPAM does with its own (plugins/ipam/static)."""
    ipvlan, *rest = network["plugins"]
    ipam = ipvlan["ipam"]
    gateway = {"gateway": ipam["gateway"]} if "gateway" in ipam else {}
    addresses = [{"address": _in_range(ipam["range"], address), **gateway}]
    if ipv6_address is not None:
        (ipv6_range,) = ipam["ipRanges"]
        addresses.append({"address": _in_range(ipv6_range["range"], ipv6_address)})
    static: dict[str, Any] = {"type": "static", "addresses": addresses}
    if "routes" in ipam:
        static["routes"] = ipam["routes"]
    return {**network, "plugins": [{**ipvlan, "ipam": static}, *rest]}


def _in_range(whereabouts_range: str, address: str) -> str:
    """`address` with the range's prefix length, if the range (first-last/prefix) holds it."""
    span, prefix_length = whereabouts_range.rsplit("/", 1)
    first, last = (ipaddress.ip_address(end) for end in span.split("-"))
    candidate = ipaddress.ip_address(address)
    if candidate.version != first.version or not int(first) <= int(candidate) <= int(last):
        raise ValueError(f"{address} is outside the NAD's range {whereabouts_range}")
    return f"{address}/{prefix_length}"


@dataclass
class PodNamespace:
    """A pod's network namespace (named `name`) and what a test does from it."""

    name: str
    server: subprocess.Popen[str] | None = field(default=None, kw_only=True)

    def serve_identity(self) -> None:
        self.server = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.name,
                "python3",
                "-I",
                "-S",
                "-c",
                _IDENTITY_SERVER,
                self.name,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.server.stdout is not None
        if self.server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{self.name}: the identity server did not start")

    def ask(self, address: str, timeout: float = 3) -> tuple[str, str] | None:
        """Which pod answers at `address` over UDP, and the source it saw; None if nobody."""
        asked = in_netns(
            self.name,
            "python3",
            "-I",
            "-S",
            "-c",
            _IDENTITY_CLIENT,
            address,
            str(timeout),
            check=False,
            timeout=timeout + 30,
        )
        if asked.returncode != 0:
            return None
        pod, source = asked.stdout.split()
        return pod, source

    def ping(self, address: str, source: str = "") -> bool:
        return ping_from(self.name, address, source)

    def route_get(self, *args: str) -> str:
        return ip("-n", self.name, "route", "get", *args).stdout.strip()

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server.wait(timeout=10)


@dataclass
class KernelPod(PodNamespace):
    """One pod: its namespace, the node it runs on and net1's chain and result."""

    node: KernelNode
    agent: PodIpNode
    network: dict[str, Any]
    plugins: list[dict[str, Any]]
    eth0_address: str
    result: dict[str, Any] | None = None

    @property
    def netns_path(self) -> str:
        return f"/var/run/netns/{self.name}"

    @property
    def chain(self) -> ChainRun:
        return ChainRun(
            netns=self.netns_path,
            ifname="net1",
            agent_socket=self.agent.socket_path,
            node_netns=self.node.name,
            container_id=self.name,
            pod_name=self.name,
        )

    @property
    def net1_address(self) -> str:
        assert self.result is not None, "net1 is not set up"
        return str(self.result["ips"][0]["address"]).split("/")[0]

    def add(self, plugins: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """ADD through `plugins` (default: the whole chain), continuing from any earlier
        partial ADD's result."""
        self.result = self.chain.add(self.network, plugins or self.plugins, self.result)
        return self.result

    def delete(self, plugins: Sequence[dict[str, Any]] | None = None) -> None:
        assert self.result is not None
        self.chain.delete(self.network, plugins or self.plugins, self.result)

    def remove(self) -> None:
        self.stop_server()
        ip("netns", "del", self.name, check=False)


def ping_from(namespace: str, address: str, source: str = "", count: int = 2) -> bool:
    """Whether `count` echo requests got replies (from `source`, when given: a bound socket)."""
    bound = ["-I", source] if source else []
    ping = ["ping", "-c", str(count), "-W", "2", "-i", "0.3", *bound, address]
    return in_netns(namespace, *ping, check=False).returncode == 0


def start_pod(
    name: str,
    node: KernelNode,
    agent: PodIpNode,
    network: dict[str, Any],
    eth0_address: str,
) -> KernelPod:
    """The pod's namespace with eth0 as the VPC CNI sets it up (its address assigned to the
    node's primary ENI first); net1 comes with `KernelPod.add`."""
    agent.emulator.ec2.assign_private_ip_addresses(
        NetworkInterfaceId=node.primary_eni_id, PrivateIpAddresses=[eth0_address]
    )
    vpc_cni_eth0(name, node.name, eth0_address)
    plugins = list(network["plugins"])
    return KernelPod(name, node, agent, network, plugins, eth0_address)


def vpc_cni_eth0(pod: str, node_namespace: str, eth0_address: str) -> None:
    """The namespace `pod` with eth0 as the VPC CNI sets it up (testing_support/
    vpc_cni_stand_in.py)."""
    ip("netns", "add", pod)
    set_up_eth0(pod, node_namespace, eth0_address)
