"""The CNI configuration of the NetworkAttachmentDefinitions (charts/network_attachments.py):
one per (Multus network, availability zone), with no cdk8s in it, so the data-plane tier's VM
reads the chains the chart ships without starting jsii.

Each attaches an ipvlan interface on the node's ENI of that network, with addresses from
Whereabouts taken only out of the subnet's explicit CIDR reservation, so EC2 never hands the
same addresses to an ENI. Pods reach other subnets through the VPC router via source-based
routing (sbr), so replies leave on the interface they came in on; the last plugin puts the
subnet back into the pod's main table, which sbr empties of the interface's routes, so a
connection to another address of the subnet leaves over the Multus interface even when the
pod does not bind its source; a network's routes beyond the VPC (the RAN, a data network) go
into the IPAM config via the VPC router and, past sbr, back into the main table the same way
(docs/network.md, Routes to the RAN and data networks). Networks in node_prefix mode get a NAD
without config instead (docs/node-prefix-mode.md).

On a dual-stack network the IPAM takes an IPv6 address too, from the subnet's reserved IPv6
pod range (Whereabouts ipRanges, whereabouts pkg/config LoadIPAMConfig); the range and the /64
are deploy-time values. Whereabouts gives every address of a pod its one `gateway`
(cmd/whereabouts.go, cmdAdd), and sbr would route the IPv6 address via the IPv4 gateway
(containernetworking/plugins plugins/meta/sbr, doRoutes), so these NADs give each family's
VPC router as a route instead, which sbr moves into the table of the address it belongs to.

A subnet with a static_range gets a second NAD, <network>-<az>-static: the same chain with
static IPAM, which takes the pod's fixed address from the `ips` of its network selection
annotation; Whereabouts excludes that range (docs/multus-pod-ips.md, fixed addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from config.path_mtu import VPC_MTU
from multus_pod_ips import CNI_PLUGIN_TYPE

#: The pod network's interface in every pod: containerd names it so (internal/cri/server/
#: helpers.go, defaultIfName), and Multus gives the cluster network's delegate that name.
POD_NETWORK_INTERFACE = "eth0"

WHEREABOUTS_KUBECONFIG = "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"
CNI_VERSION = "0.3.1"

IpvlanMode = Literal["l2", "l3", "l3s"]


def whereabouts_range_and_gateway(subnet_cidr: str, reservation_cidr: str) -> tuple[str, str]:
    """Whereabouts range covering exactly the reservation, and the subnet's VPC router.

    Subnet 10.0.4.0/24 with reservation 10.0.4.32/27 gives ("10.0.4.32-10.0.4.63/24",
    "10.0.4.1"): the prefix stays the subnet's, because that is the interface's on-link network.
    """
    subnet = ipaddress.IPv4Network(subnet_cidr)
    reservation = ipaddress.IPv4Network(reservation_cidr)
    if not reservation.subnet_of(subnet):
        raise ValueError(f"reservation {reservation_cidr} is not inside subnet {subnet_cidr}")
    first, last = reservation.network_address, reservation.broadcast_address
    vpc_router = subnet.network_address + 1
    return f"{first}-{last}/{subnet.prefixlen}", str(vpc_router)


@dataclass(frozen=True)
class Ipv6Range:
    """A dual-stack attachment's IPv6 side (deploy-time values): the subnet's /64, the first
    and last address of its reserved pod range, and the subnet's VPC router."""

    subnet_cidr: str
    first_address: str
    last_address: str
    gateway: str

    @property
    def whereabouts_range(self) -> str:
        """first-last/64: the pod's address keeps the subnet's prefix, its on-link network."""
        return f"{self.first_address}-{self.last_address}/64"


@dataclass(frozen=True)
class NetworkAttachment:
    """name: NAD name (config.network_plan.network_attachment_name).
    master_interface: the stable Linux name the node bootstrap gives this network's ENI.
    ipvlan_mode: l2, l3 or l3s.
    whereabouts_range / gateway: see whereabouts_range_and_gateway.
    static_range / static_name: the block of fixed addresses inside the range and the name of
    the NAD that hands them out (config.network_plan.static_attachment_name), or None.
    routes: destinations beyond the VPC the pod reaches via the VPC router over this interface
    (IPv6 ones via the IPv6 router, on a dual-stack attachment).
    pod_routes: what of them the pod's main table takes (a summary route around the VPC as its
    parts beyond the VPC, so an unbound socket reaches the VPC over eth0); None: the routes.
    ipv6: the IPv6 side of a dual-stack network, or None.
    mtu: the pod interface's MTU, the network's (config/path_mtu.py; the node's ENI has the
    same). ipvlan would take the master's anyway; the NAD states it where operators read it.
    pod_routed_ranges: the network's ranges a pod of this NAD may ask to have routed to its
    node (the pod IP plugin's "podRoutedRanges")."""

    name: str
    master_interface: str
    ipvlan_mode: IpvlanMode
    whereabouts_range: str
    gateway: str
    static_range: str | None = None
    static_name: str | None = None
    routes: Sequence[str] = ()
    ipv6: Ipv6Range | None = None
    mtu: int = VPC_MTU
    pod_routed_ranges: Sequence[str] = ()
    pod_routes: Sequence[str] | None = None

    @property
    def ipam_routes(self) -> list[dict[str, str]]:
        """The routes as CNI routes (IPAM config and result): each via the VPC router of its
        family (an IPv6 destination, on a dual-stack network only, via the subnet's IPv6 one).
        sbr moves them into the table of the pod's Multus address, where a summary route may
        keep the VPC: a packet from that address leaves over this interface anyway."""
        return self._cni_routes(self.routes)

    @property
    def main_table_routes(self) -> list[dict[str, str]]:
        """The routes the pod IP plugin puts back into the pod's main table (pod_routes)."""
        return self._cni_routes(self.routes if self.pod_routes is None else self.pod_routes)

    def _cni_routes(self, destinations: Sequence[str]) -> list[dict[str, str]]:
        return [
            {"dst": destination, "gw": self._router_for(destination)}
            for destination in destinations
        ]

    def _router_for(self, destination: str) -> str:
        if ":" not in destination:
            return self.gateway
        if self.ipv6 is None:
            raise ValueError(f"{self.name}: the IPv6 route {destination} needs a dual-stack NAD")
        return self.ipv6.gateway

    @property
    def subnet_cidr(self) -> str:
        """The interface's on-link network: the prefix the Whereabouts range carries."""
        first_address = self.whereabouts_range.split("-", 1)[0]
        prefix_length = self.whereabouts_range.rsplit("/", 1)[1]
        return str(ipaddress.IPv4Interface(f"{first_address}/{prefix_length}").network)


def cni_config(attachment: NetworkAttachment) -> dict[str, Any]:
    ipam: dict[str, Any] = {
        "type": "whereabouts",
        "datastore": "kubernetes",
        "kubernetes": {"kubeconfig": WHEREABOUTS_KUBECONFIG},
        "range": attachment.whereabouts_range,
        "gateway": attachment.gateway,
    }
    if attachment.ipv6 is not None:
        del ipam["gateway"]
        ipam["ipRanges"] = [{"range": attachment.ipv6.whereabouts_range}]
        ipam["routes"] = [
            {"dst": "0.0.0.0/0", "gw": attachment.gateway},
            {"dst": "::/0", "gw": attachment.ipv6.gateway},
        ]
    if attachment.static_range:
        # Whereabouts skips every address of an excluded block, network and broadcast address
        # included (whereabouts pkg/allocate/allocate.go, IterateForAssignment).
        ipam["exclude"] = [attachment.static_range]
    if attachment.routes:
        # Whereabouts hands its config's routes to ipvlan in the result (whereabouts
        # cmd/whereabouts.go, cmdAdd: result.Routes = Config.Routes).
        ipam["routes"] = [*ipam.get("routes", []), *attachment.ipam_routes]
    return _chain(attachment, attachment.name, ipam, pod_ip_assignment(attachment))


def static_cni_config(attachment: NetworkAttachment) -> dict[str, Any]:
    """The chain of the attachment's fixed addresses: static IPAM takes the address (with the
    subnet's prefix length) from runtimeConfig.ips, which Multus fills from the `ips` of the
    pod's network selection annotation for a plugin with the ips capability. Those addresses
    carry no gateway (containernetworking/plugins plugins/ipam/static, LoadIPAMConfig), so the
    VPC router comes as a default route on net1, which ipvlan adds without replacing eth0's
    and sbr moves into the table of the pod's address, as it does with Whereabouts' gateway."""
    if attachment.static_name is None or attachment.static_range is None:
        raise ValueError(f"{attachment.name} has no static_range")
    ipam = {
        "type": "static",
        "routes": [{"dst": "0.0.0.0/0", "gw": attachment.gateway}, *attachment.ipam_routes],
    }
    pod_ip = {**pod_ip_assignment(attachment), "fixedAddresses": True}
    return _chain(attachment, attachment.static_name, ipam, pod_ip, capabilities={"ips": True})


def cni_configs(attachment: NetworkAttachment) -> list[dict[str, Any]]:
    """Every NAD config of the attachment: Whereabouts', then its fixed addresses' if any."""
    if attachment.static_name is None:
        return [cni_config(attachment)]
    return [cni_config(attachment), static_cni_config(attachment)]


def _chain(
    attachment: NetworkAttachment,
    name: str,
    ipam: dict[str, Any],
    pod_ip: dict[str, Any],
    capabilities: dict[str, bool] | None = None,
) -> dict[str, Any]:
    ipvlan: dict[str, Any] = {
        "type": "ipvlan",
        "master": attachment.master_interface,
        "mode": attachment.ipvlan_mode,
        "mtu": attachment.mtu,
        "ipam": ipam,
    }
    if capabilities:
        ipvlan["capabilities"] = capabilities
    return {
        "cniVersion": CNI_VERSION,
        "name": name,
        "plugins": [ipvlan, {"type": "sbr"}, pod_ip],
    }


def pod_ip_assignment(attachment: NetworkAttachment) -> dict[str, Any]:
    """Last in the chain: makes the pod's address a secondary IP of the node's ENI of this
    network (multus-pod-ips agent) before the pod's containers start, so the VPC delivers
    to it from other nodes and subnets, and routes the subnet via the pod's interface in its
    main table (after sbr, which moves every route of the interface out of it: see
    multus_pod_ips/cni_plugin.py), and the routes beyond the VPC via the VPC router there too,
    so the pod also initiates towards them over this interface; on a network with
    pod_routed_ranges, the ranges a pod may ask for in its network annotation's cni-args
    (the agent then points their routes at this node, and the plugin routes them on the node
    via the pod's eth0, since ipvlan delivers only the addresses a pod holds).
    Whereabouts-mode networks only."""
    plugin: dict[str, Any] = {
        "type": CNI_PLUGIN_TYPE,
        "master": attachment.master_interface,
        "mainTableSubnet": attachment.subnet_cidr,
    }
    if attachment.routes:
        plugin["mainTableRoutes"] = attachment.main_table_routes
    if attachment.ipv6 is not None:
        plugin["mainTableSubnetIpv6"] = attachment.ipv6.subnet_cidr
    if attachment.pod_routed_ranges:
        plugin["podRoutedRanges"] = list(attachment.pod_routed_ranges)
        plugin["podNetworkInterface"] = POD_NETWORK_INTERFACE
    return plugin


def cni_binaries(attachments: Sequence[NetworkAttachment]) -> list[str]:
    """The CNI plugins (binaries in the node's CNI bin directory) the NADs call, IPAM included."""
    names: set[str] = set()
    for attachment in attachments:
        for plugin in (p for config in cni_configs(attachment) for p in config["plugins"]):
            names.add(plugin["type"])
            if "ipam" in plugin:
                names.add(plugin["ipam"]["type"])
    return sorted(names)


def cni_host_files(attachments: Sequence[NetworkAttachment]) -> list[str]:
    """Host files the NADs' plugins read (Whereabouts' kubeconfig)."""
    return sorted(
        {
            plugin["ipam"]["kubernetes"]["kubeconfig"]
            for attachment in attachments
            for config in cni_configs(attachment)
            for plugin in config["plugins"]
            if "kubernetes" in plugin.get("ipam", {})
        }
    )
