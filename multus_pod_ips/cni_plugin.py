#!/usr/bin/python3 -I
"""CNI plugin `multus-pod-ip`: chained after ipvlan and sbr in each Multus NAD.

Multus (thick) runs delegate plugins chrooted into the host's root filesystem, so this file is
executed by the host's /usr/bin/python3 (Amazon Linux 2023: Python 3.9, standard library only).
It hands the pod's addresses (IPv4 and, on a dual-stack network, IPv6) to the node agent over
a unix socket and waits for the agent to assign them to the node's Multus ENI, so the pod's
containers start only once the VPC delivers to it. Follows the CNI spec (https://www.cni.dev/docs/spec/):

  ADD    needs prevResult; routes "mainTableSubnet" and "mainTableSubnetIpv6" (when given)
         via the container interface in the pod's main table, then each of "mainTableRoutes",
         then asks the agent; prints prevResult unchanged (with this config's cniVersion) on
         success.
  DEL    best effort and idempotent: an unreachable agent is not an error, the agent's
         reconcile releases the address later.
  CHECK  needs prevResult; fails unless the agent holds the address on the ENI.
  VERSION  prints the supported versions.

Errors go to stdout as {"cniVersion", "code", "msg", "details"} with exit status 1.
Network configuration keys: "master" (the ENI's interface name, as ipvlan's), optional
"agentSocket" (default below), "mainTableSubnet", "mainTableSubnetIpv6" (a dual-stack
network's IPv6 /64) and "fixedAddresses" (true in the NAD of a
subnet's static_range: the agent then refuses an address outside it, or one that another pod
holds, instead of moving it).

"mainTableSubnet": sbr (containernetworking/plugins plugins/meta/sbr, doRoutes) moves every
route of the container interface out of the pod's main table into a table that only packets
from the interface's own address look up. A socket that does not bind its source then routes
by the main table, which holds only the pod network's default route (eth0), so it would reach
another Multus address over eth0. The plugin, which runs after sbr, puts the subnet back into
the main table as an on-link route of the container interface with the interface's address as
its preferred source: such a connection leaves over the Multus interface, from the Multus
address, and its replies match sbr's rule. sbr does the same to IPv6 routes, so
"mainTableSubnetIpv6" puts the subnet's /64 back as `<subnet> dev <interface>`, without a
preferred source: the kernel refuses one that is still tentative ("Invalid source address";
the reference plugins' IPAM setup waits for duplicate address detection only when the result
has an IPv6 gateway: containernetworking/plugins pkg/ipam/ipam_linux.go, ConfigureIface), and
source address selection picks the interface's own address anyway (RFC 6724, rule 5: prefer
the outgoing interface; the pod's only global IPv6 address on it).

"mainTableRoutes" (optional, needs "mainTableSubnet"): [{"dst": <CIDR>, "gw": <VPC router>}],
the network's routes beyond the VPC (the RAN, a data network). sbr moved them out of the main
table with the rest; each goes back as `<dst> via <gw> dev <ifname> src <address>`, so the pod
also initiates towards them over the Multus interface (the subnet's route makes gw on-link).
An IPv6 entry (a dual-stack network's) has the subnet's IPv6 router as gw, needs
"mainTableSubnetIpv6" and goes back without a preferred source, like its subnet.

"podRoutedRanges" (optional, from the NAD): IPv4 ranges of the network that a pod answers for
without holding them, such as a UPF's UE pool. A pod asks for some of them in its network
selection annotation's cni-args ({"name": <NAD>, "cni-args": {"podRoutedRanges": [...]}}),
which Multus merges into each plugin's configuration as args.cni (multus-cni pkg/types/conf.go,
LoadDelegateNetConf: addCNIArgsInConfList, injectCNIArgs). The plugin refuses a range the NAD
does not offer and hands the rest to the agent with the ADD, which points each range's route
in the network's route tables at this node's ENI.

On the node, such a range reaches the pod over its pod network interface, not over its Multus
one: ipvlan hands a packet arriving on the ENI to the slave that holds its exact destination
address, every other packet to the host (Linux drivers/net/ipvlan/ipvlan_core.c,
ipvlan_handle_mode_l2 -> ipvlan_addr_lookup), and the host cannot send into an ipvlan slave
over the master. So with "podNetworkInterface" (the chart's NADs give "eth0": containerd names
the pod network's interface so, internal/cri/server/helpers.go, defaultIfName) the ADD also
routes each range, in the node's namespace, via that interface's IPv4 address, which the VPC
CNI's /32 host route makes on-link through the pod's host veth, and has the pod's ARP requests
on the container interface name its own address (arp_announce 2) rather than one of a range.
The kernel drops the node's route with the veth when the pod's namespace goes, and a DEL
deletes it while the namespace is still there (Multus deletes the NADs' networks before the
pod network's: pkg/multus/multus.go, delPlugins in reverse order).
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
from typing import Any

DEFAULT_AGENT_SOCKET = "/run/multus-pod-ips/agent.sock"
#: Results from 0.3.0 on index addresses to interfaces (what _addresses reads). Not 1.1.0:
#: a plugin of that version must also answer GC and STATUS.
SUPPORTED_VERSIONS = ["0.3.0", "0.3.1", "0.4.0", "1.0.0"]
#: Well-known CNI error codes (CNI spec, "Error" section).
INCOMPATIBLE_VERSION = 1
INVALID_ENVIRONMENT = 4
IO_FAILURE = 5
DECODING_FAILURE = 6
INVALID_CONFIG = 7
TRY_AGAIN_LATER = 11
#: This plugin's own codes (100+). The agent answers with all but ROUTE_FAILURE and the plugin
#: relays them: the ENI has no room for another address, CHECK found the address not assigned,
#: EC2 refused the change, a fixed address is held by another pod. ROUTE_FAILURE is the
#: plugin's: the route could not be set in the pod's network namespace.
ENI_FULL = 101
NOT_ASSIGNED = 102
EC2_REFUSED = 103
ROUTE_FAILURE = 104
ADDRESS_IN_USE = 105
#: Seconds to wait for the agent; its own deadline for an ADD is shorter.
ADD_TIMEOUT = 60.0
OTHER_TIMEOUT = 30.0
#: Where hosts keep `ip` (Amazon Linux 2023: /usr/sbin; Debian: /usr/bin, /sbin): Multus runs
#: delegates with its own environment, whose PATH says nothing about the host.
IP_COMMAND_DIRS = "/usr/sbin:/usr/bin:/sbin:/bin"
CLONE_NEWNET = 0x40000000  # <linux/sched.h>
#: The network configuration keys of the subnets put back into the pod's main table, with the
#: IP version each must be.
MAIN_TABLE_SUBNET_KEYS = (("mainTableSubnet", 4), ("mainTableSubnetIpv6", 6))


class CniError(Exception):
    """A CNI error result (code, msg, details) as the CNI spec defines it."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code = code
        self.msg = msg
        self.details = details


def main(stdin: str, environ: dict[str, str]) -> tuple[int, str]:
    """Runs one CNI command; returns (exit status, stdout text)."""
    command = environ.get("CNI_COMMAND", "")
    version = "1.0.0"
    try:
        if command == "VERSION":
            return 0, json.dumps({"cniVersion": version, "supportedVersions": SUPPORTED_VERSIONS})
        try:
            config = json.loads(stdin)
        except ValueError as error:
            raise CniError(
                DECODING_FAILURE, "cannot decode the network configuration", str(error)
            ) from None
        version = str(config.get("cniVersion", version))
        if version not in SUPPORTED_VERSIONS:
            raise CniError(INCOMPATIBLE_VERSION, f"cniVersion {version} is not supported")
        return 0, _run(command, config, environ)
    except CniError as error:
        failure = {"cniVersion": version, "code": error.code, "msg": error.msg}
        if error.details:
            failure["details"] = error.details
        return 1, json.dumps(failure)


def _run(command: str, config: dict[str, Any], environ: dict[str, str]) -> str:
    if command not in ("ADD", "DEL", "CHECK"):
        raise CniError(INVALID_ENVIRONMENT, f"CNI_COMMAND {command!r} is not supported")
    for variable in ("CNI_CONTAINERID", "CNI_IFNAME"):
        if not environ.get(variable):
            raise CniError(INVALID_ENVIRONMENT, f"{variable} is not set")
    master = config.get("master")
    if not isinstance(master, str) or not master:
        raise CniError(INVALID_CONFIG, 'the plugin configuration needs "master" (ENI interface)')
    request = {
        "command": command,
        "container_id": environ["CNI_CONTAINERID"],
        "ifname": environ["CNI_IFNAME"],
        "netns": environ.get("CNI_NETNS", ""),
        "interface": master,
        "pod": _pod_name(environ.get("CNI_ARGS", "")),
        "ips": [],
        "fixed": config.get("fixedAddresses") is True,
    }
    socket_path = str(config.get("agentSocket", DEFAULT_AGENT_SOCKET))
    netns = environ.get("CNI_NETNS", "")
    if command == "DEL":
        _forget_node_routes(config, netns)
        try:
            _ask_agent(socket_path, request, OTHER_TIMEOUT)
        except CniError as error:  # released by the agent's reconcile instead
            print(f"multus-pod-ip: DEL left to the reconcile: {error.msg}", file=sys.stderr)
        return ""
    previous = config.get("prevResult")
    if not isinstance(previous, dict):
        raise CniError(INVALID_CONFIG, "no prevResult: multus-pod-ip must be chained after ipvlan")
    addresses = _addresses(previous, environ["CNI_IFNAME"])
    request["ips"] = addresses
    if command == "CHECK":
        _ask_agent(socket_path, request, OTHER_TIMEOUT)
        return ""
    routed_ranges = _routed_ranges(config)
    if routed_ranges:
        request["routed_ranges"] = routed_ranges
    if "mainTableRoutes" in config and "mainTableSubnet" not in config:
        raise CniError(
            INVALID_CONFIG, 'mainTableRoutes needs "mainTableSubnet" (its gateways are on it)'
        )
    ifname = environ["CNI_IFNAME"]
    for route in _main_table(config, addresses, ifname):
        _ip(["route", "replace", *route], netns)
    pod_interface = _pod_network_interface(config)
    if routed_ranges and pod_interface:
        # The pod answers from addresses of its ranges over this interface, so its ARP requests
        # must not name them as their sender: ipvlan hands an ARP reply to the slave that holds
        # its target address (ipvlan_addr_lookup with use_dest), else to the host, and the pod
        # would never learn its router. 2: "always use the best local address for this target"
        # (Linux Documentation/networking/ip-sysctl.rst, arp_announce), the interface's own.
        _run_tool("sysctl", "procps", ["-qw", f"net.ipv4.conf.{ifname}.arp_announce=2"], netns)
        pod_address = _pod_network_address(pod_interface, netns)
        for cidr in routed_ranges:
            _ip(["route", "replace", cidr, "via", pod_address])
    if addresses:
        _ask_agent(socket_path, request, ADD_TIMEOUT)
    return json.dumps({**previous, "cniVersion": config["cniVersion"]})


def _pod_name(cni_args: str) -> str:
    args = dict(part.split("=", 1) for part in cni_args.split(";") if "=" in part)
    return f"{args.get('K8S_POD_NAMESPACE', '')}/{args.get('K8S_POD_NAME', '')}"


def _routed_ranges(config: dict[str, Any]) -> list[str]:
    """The ranges the pod asks for (cni-args podRoutedRanges), each one the NAD offers."""
    arguments = config.get("args")
    cni_args = arguments.get("cni") if isinstance(arguments, dict) else None
    asked = cni_args.get("podRoutedRanges", []) if isinstance(cni_args, dict) else []
    offered = config.get("podRoutedRanges", [])
    if not isinstance(asked, list) or not isinstance(offered, list):
        raise CniError(INVALID_CONFIG, "podRoutedRanges must be a list of IPv4 CIDRs")
    ranges = []
    for cidr in asked:
        try:
            network = ipaddress.IPv4Network(cidr)
        except (ValueError, TypeError):
            raise CniError(
                INVALID_CONFIG, f"cni-args podRoutedRanges entry {cidr!r} is not an IPv4 CIDR"
            ) from None
        if str(network) not in {_offered(cidr) for cidr in offered}:
            raise CniError(
                INVALID_CONFIG,
                f"cni-args podRoutedRanges asks for {network}, which this network does not "
                f"route to pods (its pod_routed_ranges: {', '.join(offered) or 'none'})",
            )
        ranges.append(str(network))
    return ranges


def _offered(cidr: Any) -> str:
    try:
        return str(ipaddress.IPv4Network(cidr))
    except (ValueError, TypeError):
        raise CniError(
            INVALID_CONFIG, f"podRoutedRanges entry {cidr!r} is not an IPv4 CIDR"
        ) from None


def _addresses(previous: dict[str, Any], ifname: str) -> list[str]:
    """IPv4 and IPv6 addresses of the container interface `ifname` in a 0.3+ result."""
    interfaces = previous.get("interfaces") or []
    addresses = []
    for ip in previous.get("ips") or []:
        address = str(ip.get("address", ""))
        index = ip.get("interface")
        on_other_interface = (
            isinstance(index, int)
            and 0 <= index < len(interfaces)
            and interfaces[index].get("name") != ifname
        )
        if not on_other_interface and address:
            addresses.append(address.split("/", 1)[0])
    return addresses


def _network(key: str, subnet: Any, version: int) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        network = ipaddress.ip_network(subnet)
    except (ValueError, TypeError):
        network = None
    if network is None or network.version != version:
        raise CniError(INVALID_CONFIG, f"{key} {subnet!r} is not an IPv{version} CIDR")
    return network


def _main_table(config: dict[str, Any], addresses: list[str], ifname: str) -> list[list[str]]:
    """The routes to put into the pod's main table, every entry checked before any is set: each
    family's subnet on the interface, then that family's routes beyond the VPC."""
    subnets: dict[int, tuple[Any, str]] = {}
    for key, version in MAIN_TABLE_SUBNET_KEYS:
        if key in config:
            network = _network(key, config[key], version)
            subnets[version] = (network, _source(key, network, addresses, ifname))
    beyond = _main_table_routes(config.get("mainTableRoutes", []), subnets)
    routes: list[list[str]] = []
    for version, (network, source) in subnets.items():
        if version == 6:
            routes.append([str(network), "dev", ifname])
            routes += [[dst, "via", gw, "dev", ifname] for dst, gw, v in beyond if v == 6]
            continue
        routes.append([str(network), "dev", ifname, "src", source, "scope", "link"])
        routes += [
            [dst, "via", gw, "dev", ifname, "src", source] for dst, gw, v in beyond if v == 4
        ]
    return routes


def _source(
    key: str,
    network: ipaddress.IPv4Network | ipaddress.IPv6Network,
    addresses: list[str],
    ifname: str,
) -> str:
    """The interface's address in the subnet (the IPv4 routes' preferred source)."""
    source = next((a for a in addresses if ipaddress.ip_address(a) in network), None)
    if source is None:
        raise CniError(
            INVALID_CONFIG,
            f"{ifname} has no address in {key} {network} (addresses: "
            f"{', '.join(addresses) or 'none'}): the NAD's IPAM range is outside its subnet",
        )
    return source


def _main_table_routes(
    routes: Any, subnets: dict[int, tuple[Any, str]]
) -> list[tuple[str, str, int]]:
    """(destination, gateway, IP version) of each mainTableRoutes entry, checked before any is
    set: an IPv6 entry needs "mainTableSubnetIpv6", and each gateway is on its family's subnet."""
    if not isinstance(routes, list):
        raise CniError(INVALID_CONFIG, "mainTableRoutes must be a list of {dst, gw}")
    checked: list[tuple[str, str, int]] = []
    for route in routes:
        try:
            destination = ipaddress.ip_network(route["dst"])
            gateway = ipaddress.ip_address(route["gw"])
        except (ValueError, TypeError, KeyError):
            raise CniError(
                INVALID_CONFIG, f"mainTableRoutes entry {route!r} needs a dst CIDR and a gw"
            ) from None
        version = destination.version
        if gateway.version != version or version not in subnets:
            key = dict((v, k) for k, v in MAIN_TABLE_SUBNET_KEYS)[version]
            raise CniError(
                INVALID_CONFIG,
                f"mainTableRoutes entry {route!r} needs an IPv{version} gw on {key}",
            )
        subnet = subnets[version][0]
        if gateway not in subnet:
            raise CniError(
                INVALID_CONFIG,
                f"mainTableRoutes gateway {gateway} is outside its subnet {subnet}",
            )
        checked.append((str(destination), str(gateway), version))
    return checked


def _pod_network_interface(config: dict[str, Any]) -> str:
    interface = config.get("podNetworkInterface", "")
    if not isinstance(interface, str):
        raise CniError(INVALID_CONFIG, "podNetworkInterface must be an interface name")
    return interface


def _pod_network_address(interface: str, netns: str) -> str:
    """The IPv4 address of the pod's `interface`, which the node's routes to its ranges go via."""
    shown = _ip(["-4", "-o", "address", "show", "dev", interface, "scope", "global"], netns)
    for line in shown.splitlines():
        fields = line.split()
        if "inet" in fields[:-1]:
            return fields[fields.index("inet") + 1].split("/", 1)[0]
    raise CniError(
        ROUTE_FAILURE,
        f"the pod's {interface} has no IPv4 address: its podRoutedRanges reach it over the pod "
        "network, so the pod network's plugin must have run before Multus' networks",
    )


def _forget_node_routes(config: dict[str, Any], netns: str) -> None:
    """DEL, best effort: the node's routes of the pod's ranges that still go via its pod
    network address (a range that another pod of the node has taken since is left alone)."""
    try:
        ranges, interface = _routed_ranges(config), _pod_network_interface(config)
        present = ranges and interface and os.path.exists(netns)
        pod_address = _pod_network_address(interface, netns) if present else ""
    except CniError as error:  # the kernel drops the routes with the pod's veth anyway
        print(f"multus-pod-ip: DEL keeps no routed range: {error.msg}", file=sys.stderr)
        return
    for cidr in ranges if pod_address else []:
        try:
            _ip(["route", "delete", cidr, "via", pod_address])
        except CniError as error:
            print(f"multus-pod-ip: DEL: {error.msg}: {error.details}", file=sys.stderr)


def _ip(arguments: list[str], netns: str | None = None) -> str:
    """`ip <arguments>` in the pod's network namespace `netns` (None: in the node's, where the
    plugin runs); its output."""
    return _run_tool("ip", "iproute2", arguments, netns)


def _run_tool(tool: str, package: str, arguments: list[str], netns: str | None) -> str:
    """`<tool> <arguments>` (a host command from `package`) as _ip runs `ip`; its output."""
    command = shutil.which(tool, path=IP_COMMAND_DIRS)
    if command is None:
        raise CniError(ROUTE_FAILURE, f"no `{tool}` command ({package}) in {IP_COMMAND_DIRS}")
    argv = [command, *arguments]
    where = "in the node's network namespace" if netns is None else f"in {netns}"
    namespace = -1
    if netns is not None:
        try:
            namespace = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            raise CniError(
                ROUTE_FAILURE, f"cannot open the pod's network namespace {netns!r}", str(error)
            ) from None
    libc = ctypes.CDLL(None)

    def enter_namespace() -> None:  # subprocess reports only that it failed, not why
        if libc.setns(namespace, CLONE_NEWNET) != 0:
            raise OSError("setns")

    try:
        done = subprocess.run(
            argv,
            # safe: the plugin process runs no other thread
            preexec_fn=None if netns is None else enter_namespace,
            capture_output=True,
            text=True,
            timeout=OTHER_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise CniError(ROUTE_FAILURE, f"cannot run `{tool}` {where}", str(error)) from None
    finally:
        if netns is not None:
            os.close(namespace)
    if done.returncode != 0:
        raise CniError(ROUTE_FAILURE, f"{' '.join(arguments)} failed {where}", done.stderr.strip())
    return done.stdout


def _ask_agent(socket_path: str, request: dict[str, Any], timeout: float) -> None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(socket_path)
            connection.sendall(json.dumps(request).encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    break
                answer += chunk
    except OSError as error:
        raise CniError(
            TRY_AGAIN_LATER,
            f"the multus-pod-ips agent at {socket_path} did not answer; is its DaemonSet "
            "pod running on this node?",
            str(error),
        ) from None
    try:
        reply = json.loads(answer)
    except ValueError:
        raise CniError(IO_FAILURE, "unreadable answer from the multus-pod-ips agent") from None
    if not reply.get("ok"):
        raise CniError(int(reply.get("code", IO_FAILURE)), str(reply.get("msg", "failed")))


if __name__ == "__main__":
    status, output = main(sys.stdin.read(), dict(os.environ))
    if output:
        print(output)
    sys.exit(status)
