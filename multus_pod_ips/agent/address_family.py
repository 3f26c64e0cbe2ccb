"""What differs between a pod's IPv4 and IPv6 address on its node's Multus ENI.

EC2 API reference: AssignPrivateIpAddresses / UnassignPrivateIpAddresses take the addresses as
PrivateIpAddress.N, AssignIpv6Addresses / UnassignIpv6Addresses as Ipv6Addresses.N; only the
IPv4 call has AllowReassignment (an IPv6 address another ENI holds is refused, never moved).
AssignIpv6Addresses: "You can assign as many IPv6 addresses to a network interface as you can
assign private IPv4 addresses, and the limit varies by instance type" (DescribeInstanceTypes
gives both: ipv4AddressesPerInterface, ipv6AddressesPerInterface). IMDS lists an ENI's
addresses under network/interfaces/macs/<mac>/local-ipv4s and .../ipv6s (EC2 User Guide,
"Instance metadata categories").
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class AddressFamily:
    """One family's EC2 actions and their address parameter, its per-ENI limit in
    DescribeInstanceTypes' answer and its IMDS key. reassignable: the assign call can take an
    address from another ENI (AllowReassignment)."""

    name: str
    version: int
    assign_action: str
    unassign_action: str
    address_parameter: str
    per_eni_limit_field: str
    imds_key: str
    reassignable: bool


IPV4 = AddressFamily(
    name="IPv4",
    version=4,
    assign_action="AssignPrivateIpAddresses",
    unassign_action="UnassignPrivateIpAddresses",
    address_parameter="PrivateIpAddress",
    per_eni_limit_field="ipv4AddressesPerInterface",
    imds_key="local-ipv4s",
    reassignable=True,
)
IPV6 = AddressFamily(
    name="IPv6",
    version=6,
    assign_action="AssignIpv6Addresses",
    unassign_action="UnassignIpv6Addresses",
    address_parameter="Ipv6Addresses",
    per_eni_limit_field="ipv6AddressesPerInterface",
    imds_key="ipv6s",
    reassignable=False,
)
FAMILIES = (IPV4, IPV6)


def family_of(ip: str) -> AddressFamily:
    return IPV4 if ipaddress.ip_address(ip).version == 4 else IPV6


def canonical(ip: str) -> str:
    """One text per address: ipaddress's (lowercase, IPv6 compressed as RFC 5952 writes it).
    A pod's address as its IPAM spelled it, EC2's answers and IMDS's lists all pass through it,
    so one address compares equal to itself whichever form each side wrote."""
    return str(ipaddress.ip_address(ip))
