"""What the node bootstrap needs for a Multus network in node_prefix mode.

See docs/node-prefix-mode.md.

The bootstrap requests the prefixes in the ENI's CreateNetworkInterface call, checks that each
lies inside the network's reservation, and writes a CNI config file that Multus reads for the
NetworkAttachmentDefinition of the same name (a NAD without spec.config).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from config.node_bootstrap_plan import NodePrefixNetwork

#: Host directory of CNI config files: the containerd CNI conf dir, which the Multus thick
#: daemon also reads (its confDir) for NADs without a config.
CNI_CONFIG_DIR = "/etc/cni/net.d"
#: The VPC CNI's config: the node's config is installed only once this exists, so that the
#: container runtime, which takes the first file as the pod network, never finds ours alone.
RUNTIME_CNI_CONFIG = "10-aws.conflist"
#: host-local keeps its leases here; under /run (tmpfs) they do not outlive a reboot, when
#: every pod of the node is gone as well. Multus runs delegates chrooted to the host root.
IPAM_DATA_DIR = "/run/cni/node-prefix-ipam"

#: The CNI plugins the node-local config names (the VPC CNI add-on installs all three).
NODE_PREFIX_CNI_PLUGINS = ("host-local", "ipvlan", "sbr")

_CIDR = re.compile(r"\d{1,3}(\.\d{1,3}){3}/\d{1,2}")


def cni_config_file_name(device_index: int, network_card: int = 0) -> str:
    """The node's CNI config file of the ENI at this device index (of this network card).

    Named after the device index (and a card other than 0), never the network: cleartaints
    treats any "*multus*" file as Multus' own config. "90-" sorts after Multus' 00- and the
    VPC CNI's 10- files, so the container runtime, which uses the first file, never picks it
    as the pod network while those exist.
    """
    card = f"-card{network_card}" if network_card else ""
    return f"90-node-prefix-eni{device_index}{card}.conflist"


def gateway(subnet_cidr: str) -> str:
    """The VPC router of a subnet: its first host address."""
    return str(ipaddress.IPv4Network(subnet_cidr).network_address + 1)


def render_node_prefix_lines(networks: Sequence[NodePrefixNetwork]) -> str:
    """MULTUS_NODE_PREFIX's value: one line per (AZ, network), fields as the script reads them."""
    for network in networks:
        _validate(network)
    return "\n".join(
        " ".join(
            (
                n.availability_zone,
                n.interface_name,
                str(n.prefix_count),
                n.cni_network_name,
                n.subnet_cidr,
                n.reservation_cidr,
                gateway(n.subnet_cidr),
                n.ipvlan_mode,
                cni_config_file_name(n.device_index, n.network_card),
            )
        )
        for n in networks
    )


def _validate(network: NodePrefixNetwork) -> None:
    label = f"node_prefix[{network.availability_zone}/{network.interface_name}]"
    if network.prefix_count < 1:
        raise ValueError(f"{label}: prefix_count must be at least 1")
    for field in ("subnet_cidr", "reservation_cidr"):
        if not _CIDR.fullmatch(getattr(network, field)):
            raise ValueError(f"{label}: {field} must be a literal IPv4 CIDR")
    subnet = ipaddress.IPv4Network(network.subnet_cidr)
    reservation = ipaddress.IPv4Network(network.reservation_cidr)
    if not reservation.subnet_of(subnet) or reservation.prefixlen > 28:
        raise ValueError(
            f"{label}: reservation {reservation} must be a /28 or larger inside {subnet}"
        )
    if network.ipvlan_mode not in ("l2", "l3", "l3s"):
        raise ValueError(f"{label}: ipvlan_mode must be l2, l3 or l3s")
