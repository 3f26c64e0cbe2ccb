"""What EC2 does with secondary private IPv4 addresses and IPv6 addresses and moto does not, for
the emulator.

moto's AssignPrivateIpAddresses appends any address to the ENI: it ignores AllowReassignment
(an address may end up on two ENIs), the subnet's range and the instance type's limit of
addresses per ENI; its UnassignPrivateIpAddresses accepts addresses the ENI does not hold.
Its AssignIpv6Addresses and UnassignIpv6Addresses have the same gaps: any address (outside
the subnet's /64, held by another ENI) is appended, no limit is applied, and unassigning an
address the ENI does not hold succeeds. EniAddressModel, plugged into the emulator's proxy
(Ec2Proxy.model), refuses what EC2 refuses and moves a reassigned IPv4 address off its previous
ENI, so moto's ENIs hold what the VPC would deliver to: each address on exactly one ENI.

IPv6 (EC2 API reference, AssignIpv6Addresses): the addresses come from the subnet's IPv6 CIDR
block, "you can assign as many IPv6 addresses to a network interface as you can assign private
IPv4 addresses, and the limit varies by instance type" (DescribeInstanceTypes:
Ipv6AddressesPerInterface), and there is no AllowReassignment: an address another ENI holds is
refused, never moved. The error code list names no IPv6-specific code for these refusals; the
model answers with the IPv4 ones.

Error codes as in the EC2 API reference ("Error codes for the Amazon EC2 API"):
PrivateIpAddressLimitExceeded, InvalidIPAddress.InUse, InvalidParameterValue.

A move is asynchronous (EC2 API reference, AssignPrivateIpAddresses: "Remapping an IP address is
an asynchronous operation ... check network/interfaces/macs/mac/local-ipv4s in the instance
metadata to confirm that the remapping is complete"): EC2's API shows the address on its new
ENI at once, but for `remap_seconds` after the call IMDS (`imds_addresses`, which the fake
IMDS serves as local-ipv4s) still lists it on the old ENI and not yet on the new one.
math.inf models a move that never completes.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class _Family:
    """One address family's actions, query parameter and fields in EC2's answers."""

    assign: str
    unassign: str
    parameter: str  # query parameter prefix of the addresses
    limit_field: str  # DescribeInstanceTypes NetworkInfo field
    can_reassign: bool

    def held(self, eni: dict[str, Any]) -> set[str]:
        """The ENI's addresses of this family that may be assigned and unassigned."""
        if self.can_reassign:
            return _secondary(eni)
        return {item["Ipv6Address"] for item in eni.get("Ipv6Addresses", [])}

    def counted(self, eni: dict[str, Any]) -> set[str]:
        """The ENI's addresses of this family that count against the limit."""
        if self.can_reassign:
            return {item["PrivateIpAddress"] for item in eni["PrivateIpAddresses"]}
        return self.held(eni)

    def subnet_blocks(self, subnet: dict[str, Any]) -> list[str]:
        if self.can_reassign:
            return [subnet["CidrBlock"]]
        return [a["Ipv6CidrBlock"] for a in subnet.get("Ipv6CidrBlockAssociationSet", [])]


_IPV4 = _Family(
    "AssignPrivateIpAddresses",
    "UnassignPrivateIpAddresses",
    "PrivateIpAddress.",
    "Ipv4AddressesPerInterface",
    can_reassign=True,
)
_IPV6 = _Family(
    "AssignIpv6Addresses",
    "UnassignIpv6Addresses",
    "Ipv6Addresses.",
    "Ipv6AddressesPerInterface",
    can_reassign=False,
)
_FAMILIES = {action: f for f in (_IPV4, _IPV6) for action in (f.assign, f.unassign)}


@dataclass(frozen=True)
class _Move:
    source_eni: str
    target_eni: str
    completes_at: float  # time.monotonic()


class EniAddressModel:
    """Checks Assign/UnassignPrivateIpAddresses and Assign/UnassignIpv6Addresses against moto's
    state before moto applies them."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2  # boto3 client talking to moto directly (unsigned by the proxy)
        self._lock = threading.Lock()
        #: How long a moved address takes to show on its new ENI in IMDS.
        self.remap_seconds = 0.0
        self._moves: dict[str, _Move] = {}  # address -> its latest move

    def __call__(self, action: str, params: dict[str, str]) -> tuple[int, str, str] | None:
        family = _FAMILIES.get(action)
        if family is None:
            return None
        addresses = [value for key, value in params.items() if key.startswith(family.parameter)]
        with self._lock:
            eni = self._eni(params.get("NetworkInterfaceId", ""))
            if eni is None or not addresses:
                return None  # moto answers the missing ENI / parameter itself
            if action == family.unassign:
                refusal = self._check_unassign(family, eni, addresses)
                if refusal is None:
                    for address in addresses:  # nothing left to remap to this ENI
                        self._moves.pop(address, None)
                return refusal
            allow_reassignment = family.can_reassign and params.get("AllowReassignment") == "true"
            return self._assign(family, eni, addresses, allow_reassignment)

    def imds_addresses(self, eni_id: str, addresses: list[str]) -> list[str]:
        """What IMDS lists for the ENI, given what EC2's API says it holds: moves to it that
        have not completed left out, moves away from it that have not completed kept."""
        now = time.monotonic()
        with self._lock:
            pending = {a: m for a, m in self._moves.items() if now < m.completes_at}
        arriving = {a for a, m in pending.items() if m.target_eni == eni_id}
        leaving = [a for a, m in pending.items() if m.source_eni == eni_id]
        return [a for a in addresses if a not in arriving] + sorted(leaving)

    def addresses(self, eni_id: str) -> set[str]:
        """Secondary private IPv4 addresses the ENI holds."""
        eni = self._eni(eni_id)
        return set() if eni is None else _secondary(eni)

    def ipv6_addresses(self, eni_id: str) -> set[str]:
        """IPv6 addresses the ENI holds."""
        eni = self._eni(eni_id)
        return set() if eni is None else _IPV6.held(eni)

    def _eni(self, eni_id: str) -> dict[str, Any] | None:
        found = self._ec2.describe_network_interfaces(
            Filters=[{"Name": "network-interface-id", "Values": [eni_id]}]
        )["NetworkInterfaces"]
        return found[0] if found else None

    def _check_unassign(
        self, family: _Family, eni: dict[str, Any], addresses: list[str]
    ) -> tuple[int, str, str] | None:
        held = family.held(eni)
        if any(address not in held for address in addresses):
            return (
                400,
                "InvalidParameterValue",
                "Some of the specified addresses are not assigned to interface "
                f"{eni['NetworkInterfaceId']}",
            )
        return None

    def _assign(
        self, family: _Family, eni: dict[str, Any], addresses: list[str], allow_reassignment: bool
    ) -> tuple[int, str, str] | None:
        eni_id = eni["NetworkInterfaceId"]
        subnet = self._ec2.describe_subnets(SubnetIds=[eni["SubnetId"]])["Subnets"][0]
        blocks = [ipaddress.ip_network(block) for block in family.subnet_blocks(subnet)]
        outside = [
            a for a in addresses if not any(ipaddress.ip_address(a) in block for block in blocks)
        ]
        if outside:
            ranges = ", ".join(map(str, blocks)) or "no block of this family"
            message = f"Address {outside[0]} is not in subnet {subnet['SubnetId']} ({ranges})"
            return 400, "InvalidParameterValue", message
        current = family.counted(eni)
        limit = self._limit(family, eni)
        if limit is not None and len(current | set(addresses)) > limit:
            return (
                400,
                "PrivateIpAddressLimitExceeded",
                f"Number of private addresses will exceed limit ({limit}) for {eni_id}",
            )
        holders = self._holders(family, eni["SubnetId"], eni_id, addresses)
        if holders and not allow_reassignment:
            address = next(iter(holders))
            return 400, "InvalidIPAddress.InUse", f"Address {address} is in use"
        for address, holder in holders.items():
            self._ec2.unassign_private_ip_addresses(
                NetworkInterfaceId=holder, PrivateIpAddresses=[address]
            )
            self._moves[address] = _Move(holder, eni_id, time.monotonic() + self.remap_seconds)
        return None

    def _limit(self, family: _Family, eni: dict[str, Any]) -> int | None:
        instance_id = eni.get("Attachment", {}).get("InstanceId")
        if not instance_id:
            return None
        reservations = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        instance_type = reservations[0]["Instances"][0]["InstanceType"]
        types = self._ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
        return int(types[0]["NetworkInfo"][family.limit_field])

    def _holders(
        self, family: _Family, subnet_id: str, eni_id: str, addresses: list[str]
    ) -> dict[str, str]:
        """address -> the other ENI in the subnet that holds it (as a secondary address)."""
        wanted = set(addresses)
        holders = {}
        for other in self._ec2.describe_network_interfaces(
            Filters=[{"Name": "subnet-id", "Values": [subnet_id]}]
        )["NetworkInterfaces"]:
            if other["NetworkInterfaceId"] != eni_id:
                for address in family.held(other) & wanted:
                    holders[address] = other["NetworkInterfaceId"]
        return holders


def _secondary(eni: dict[str, Any]) -> set[str]:
    return {
        item["PrivateIpAddress"] for item in eni["PrivateIpAddresses"] if not item.get("Primary")
    }
