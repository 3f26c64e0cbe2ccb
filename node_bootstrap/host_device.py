"""What the node bootstrap needs for the ENIs of a host-device network.

See docs/network.md, Whole-ENI networks. Each ENI gets a node-local CNI config that Multus reads
for the ENI's NetworkAttachmentDefinition (a NAD without spec.config): the host-device plugin
over the ENI's Linux name with static IPAM (node_bootstrap/host_device.sh writes it once the ENI
is up, with its primary address from IMDS).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence

from config.node_bootstrap_plan import HostDeviceEni
from node_bootstrap.node_prefix import gateway

#: The CNI plugins the node-local config names; the VPC CNI add-on installs both from v1.20.4
#: on (every upstream plugin: docs/cluster-and-karpenter.md, the vpc-cni floor).
HOST_DEVICE_CNI_PLUGINS = ("host-device", "static")

_IPV4_CIDR = re.compile(r"\d{1,3}(\.\d{1,3}){3}/\d{1,2}")


def host_device_config_file_name(device_index: int, network_card: int = 0) -> str:
    """The node's CNI config file of the host-device ENI at this device index (of this card).

    Named after the device index, never the network or interface (cleartaints treats any
    "*multus*" file as Multus' own config, and the seed's names are multus1, multus2). "90-"
    sorts after Multus' 00- and the VPC CNI's 10- files, so the container runtime, which uses
    the first file, never takes it as the pod network while those exist.
    """
    card = f"-card{network_card}" if network_card else ""
    return f"90-host-device-eni{device_index}{card}.conf"


def render_host_device_lines(enis: Sequence[HostDeviceEni]) -> str:
    """MULTUS_HOST_DEVICE's value: one line per (AZ, ENI), fields as host_device.sh reads them."""
    for eni in enis:
        _validate(eni)
    return "\n".join(
        " ".join(
            (
                eni.availability_zone,
                eni.interface_name,
                eni.cni_network_name,
                str(ipaddress.IPv4Network(eni.subnet_cidr).prefixlen),
                gateway(eni.subnet_cidr),
                host_device_config_file_name(eni.device_index, eni.network_card),
                ",".join(eni.routes) or "-",
            )
        )
        for eni in enis
    )


def _validate(eni: HostDeviceEni) -> None:
    label = f"host_device[{eni.availability_zone}/{eni.interface_name}]"
    for cidr in (eni.subnet_cidr, *eni.routes):
        if not _IPV4_CIDR.fullmatch(cidr):
            raise ValueError(f"{label}: {cidr!r} must be a literal IPv4 CIDR")
