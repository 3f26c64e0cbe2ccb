"""How large a packet each path of a Multus network carries: the MTU its ENI and NADs get.

Inside a VPC (and through an ENI of an appliance in it) EC2 carries jumbo frames of 9001
bytes; beyond it, less (EC2 User Guide, "Network maximum transmission unit (MTU) for your EC2
instance"). A packet over a path's MTU is fragmented, or dropped when it may not be (IPv6, or
IPv4 with Don't Fragment: what TCP sends); path MTU discovery needs the ICMP "too big" answers
that security groups and firewalls often drop. So a network's interfaces get the MTU of the
narrowest path its routes take, unless the config sets one (multus.networks[].mtu).

Per route target (config.network_plan.RouteTarget):
- transit_gateway: 8500 (Transit Gateway User Guide, "Quotas": MTU 8500 bytes between VPCs,
  Direct Connect and peering attachments; a VPN attachment carries 1500);
- vpn_gateway: 1446, the largest packet an AWS Site-to-Site VPN tunnel takes (Site-to-Site
  VPN User Guide, "Quotas": MTU 1446 bytes, MSS 1406). A Direct Connect private virtual
  interface on the same gateway may carry 9001: set the network's mtu then;
- nat_gateway: 1500, the internet's (EC2 User Guide: traffic over an internet gateway);
- network_interface: 9001, an appliance's ENI inside the VPC.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Jumbo frames inside a VPC, the largest MTU EC2 carries.
VPC_MTU = 9001
#: IPv6 needs links of at least 1280 bytes (RFC 8200, section 5); below 1280 IPv4 paths are
#: rare enough that the config refuses them too.
MIN_MTU = 1280

ROUTE_TARGET_MTU: dict[str, int] = {
    "transit_gateway": 8500,
    "vpn_gateway": 1446,
    "nat_gateway": 1500,
    "network_interface": VPC_MTU,
}


def path_mtu(route_targets: Iterable[str]) -> int:
    """The MTU a network's packets fit on every path it has: the VPC, then each route's."""
    return min([VPC_MTU, *(ROUTE_TARGET_MTU[target] for target in route_targets)])
