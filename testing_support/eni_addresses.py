"""What EC2 does with secondary private IPv4 addresses and moto does not, for the emulator.

moto's AssignPrivateIpAddresses appends any address to the ENI: it ignores AllowReassignment
(an address may end up on two ENIs), the subnet's range and the instance type's limit of
addresses per ENI; its UnassignPrivateIpAddresses accepts addresses the ENI does not hold.
EniAddressModel, plugged into the emulator's proxy (Ec2Proxy.model), refuses what EC2 refuses
and moves a reassigned address off its previous ENI, so moto's ENIs hold what the VPC would
deliver to: each address on exactly one ENI.

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
class _Move:
    source_eni: str
    target_eni: str
    completes_at: float  # time.monotonic()


class EniAddressModel:
    """Checks Assign/UnassignPrivateIpAddresses against moto's state before moto applies them."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2  # boto3 client talking to moto directly (unsigned by the proxy)
        self._lock = threading.Lock()
        #: How long a moved address takes to show on its new ENI in IMDS.
        self.remap_seconds = 0.0
        self._moves: dict[str, _Move] = {}  # address -> its latest move

    def __call__(self, action: str, params: dict[str, str]) -> tuple[int, str, str] | None:
        if action not in ("AssignPrivateIpAddresses", "UnassignPrivateIpAddresses"):
            return None
        addresses = [value for key, value in params.items() if key.startswith("PrivateIpAddress.")]
        with self._lock:
            eni = self._eni(params.get("NetworkInterfaceId", ""))
            if eni is None or not addresses:
                return None  # moto answers the missing ENI / parameter itself
            if action == "UnassignPrivateIpAddresses":
                refusal = self._check_unassign(eni, addresses)
                if refusal is None:
                    for address in addresses:  # nothing left to remap to this ENI
                        self._moves.pop(address, None)
                return refusal
            return self._assign(eni, addresses, params.get("AllowReassignment") == "true")

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

    def _eni(self, eni_id: str) -> dict[str, Any] | None:
        found = self._ec2.describe_network_interfaces(
            Filters=[{"Name": "network-interface-id", "Values": [eni_id]}]
        )["NetworkInterfaces"]
        return found[0] if found else None

    def _check_unassign(
        self, eni: dict[str, Any], addresses: list[str]
    ) -> tuple[int, str, str] | None:
        held = _secondary(eni)
        if any(address not in held for address in addresses):
            return (
                400,
                "InvalidParameterValue",
                "Some of the specified addresses are not assigned to interface "
                f"{eni['NetworkInterfaceId']}",
            )
        return None

    def _assign(
        self, eni: dict[str, Any], addresses: list[str], allow_reassignment: bool
    ) -> tuple[int, str, str] | None:
        eni_id = eni["NetworkInterfaceId"]
        subnet = self._ec2.describe_subnets(SubnetIds=[eni["SubnetId"]])["Subnets"][0]
        network = ipaddress.ip_network(subnet["CidrBlock"])
        outside = [a for a in addresses if ipaddress.ip_address(a) not in network]
        if outside:
            message = f"Address {outside[0]} is not in subnet {subnet['CidrBlock']}"
            return 400, "InvalidParameterValue", message
        current = {item["PrivateIpAddress"] for item in eni["PrivateIpAddresses"]}
        limit = self._limit(eni)
        if limit is not None and len(current | set(addresses)) > limit:
            return (
                400,
                "PrivateIpAddressLimitExceeded",
                f"Number of private addresses will exceed limit ({limit}) for {eni_id}",
            )
        holders = self._holders(eni["SubnetId"], eni_id, addresses)
        if holders and not allow_reassignment:
            address = next(iter(holders))
            return 400, "InvalidIPAddress.InUse", f"Address {address} is in use"
        for address, holder in holders.items():
            self._ec2.unassign_private_ip_addresses(
                NetworkInterfaceId=holder, PrivateIpAddresses=[address]
            )
            self._moves[address] = _Move(holder, eni_id, time.monotonic() + self.remap_seconds)
        return None

    def _limit(self, eni: dict[str, Any]) -> int | None:
        instance_id = eni.get("Attachment", {}).get("InstanceId")
        if not instance_id:
            return None
        reservations = self._ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        instance_type = reservations[0]["Instances"][0]["InstanceType"]
        types = self._ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"]
        return int(types[0]["NetworkInfo"]["Ipv4AddressesPerInterface"])

    def _holders(self, subnet_id: str, eni_id: str, addresses: list[str]) -> dict[str, str]:
        """address -> the other ENI in the subnet that holds it as a secondary address."""
        wanted = set(addresses)
        holders = {}
        for other in self._ec2.describe_network_interfaces(
            Filters=[{"Name": "subnet-id", "Values": [subnet_id]}]
        )["NetworkInterfaces"]:
            if other["NetworkInterfaceId"] != eni_id:
                for address in _secondary(other) & wanted:
                    holders[address] = other["NetworkInterfaceId"]
        return holders


def _secondary(eni: dict[str, Any]) -> set[str]:
    return {
        item["PrivateIpAddress"] for item in eni["PrivateIpAddresses"] if not item.get("Primary")
    }
