"""The one rule for the Linux name of a Multus network's ENI on an EKS node.

The config (multus.networks[].interface_name, or the network name) and the renderer both apply
it: a lowercase letter, then up to 14 lowercase letters or digits, and none of the names below.

The node bootstrap renames each Multus ENI by its MAC address; a name the host already uses, or
one another component creates later, would collide with it or be taken over:
- the loopback device `lo`;
- the names the AL2023 EKS AMI gives the instance's own ENIs: predictable names on Nitro
  (ens5 for the primary, ens6, ens7 ... for attached ones; enp<bus>s<slot> on some sizes) and
  the kernel's eth0, eth1 ... before renaming;
- what the Amazon VPC CNI creates: the host side of every pod's veth pair is `eni` + 11 hex
  digits (AWS_VPC_K8S_CNI_VETHPREFIX, default "eni"), and with security groups for pods
  `vlan<id>` and `dummy<id>` devices.
Linux itself allows at most 15 characters (IFNAMSIZ 16 with the terminating NUL) and no "/",
whitespace, "." or ".."; INTERFACE_NAME_PATTERN (lowercase letters and digits) is stricter.
"""

from __future__ import annotations

import re

#: Also the config's pattern (config/patterns.py explains it in words).
INTERFACE_NAME_PATTERN = r"^[a-z][a-z0-9]{0,14}$"

RESERVED_INTERFACE_NAMES: dict[str, str] = {
    r"lo": "the loopback device",
    r"eth[0-9]+": "a kernel name of the node's own ENIs",
    r"ens[0-9]+": "the AL2023 AMI's name for the node's own ENIs (ens5 is the primary)",
    r"enp[0-9]+s[0-9]+": "the AL2023 AMI's name for the node's own ENIs on some sizes",
    r"eni[0-9a-f]*": "the VPC CNI's prefix for pod veth devices (eni + 11 hex digits)",
    r"vlan[0-9]*": "the VPC CNI's prefix for security-group-for-pods VLAN devices",
    r"dummy[0-9]*": "the VPC CNI's prefix for security-group-for-pods dummy devices",
}


def eni_interface_names(base: str, host_device: bool, enis_per_node: int) -> list[str]:
    """The Linux names of a network's ENIs on a node: the base name for an ipvlan network's
    one ENI; <base>0, <base>1, ... for a host-device network's enis_per_node ENIs (each must
    still pass interface_name_problem: the digits count against the 15 characters)."""
    if not host_device:
        return [base]
    return [f"{base}{slot}" for slot in range(enis_per_node)]


def reserved_interface_reason(name: str) -> str | None:
    """Why `name` cannot name a Multus interface on the node, or None if it can."""
    for pattern, owner in RESERVED_INTERFACE_NAMES.items():
        if re.fullmatch(pattern, name):
            return f"{name!r} is {owner}; pick another name, for example multus1"
    return None


def interface_name_problem(name: str) -> str | None:
    """Why `name` cannot name a Multus interface on the node (pattern or reserved), or None."""
    if not re.fullmatch(INTERFACE_NAME_PATTERN, name):
        return (
            f"{name!r} is not a usable interface name: a lowercase letter, then up to 14 "
            "lowercase letters or digits"
        )
    return reserved_interface_reason(name)
