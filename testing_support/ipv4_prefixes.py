"""IPv4 prefix delegation on CreateNetworkInterface, which moto does not model.

EC2's documented behaviour (docs/node-prefix-mode.md): automatically assigned /28 prefixes come
from the subnet's prefix-type CIDR reservation when it has one, otherwise from the subnet's
range; explicit prefixes are accepted when they are free /28s of the subnet; primary addresses
never come from a reservation; an ENI's prefixes are released when it is deleted. What EC2
does once a prefix reservation is exhausted is not documented: `fallback_to_subnet` chooses
between taking the rest of the subnet (the default, the case the node bootstrap must catch)
and refusing with InsufficientCidrBlocks.
"""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PREFIX_LENGTH = 28
_EXPLICIT_PREFIX = re.compile(r"Ipv4Prefix\.\d+\.Ipv4Prefix")


class PrefixRequestError(Exception):
    """An EC2 error answer: code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PlannedInterface:
    """What a CreateNetworkInterface gets: its primary address and its prefixes."""

    private_ip: str
    prefixes: tuple[str, ...]


class Ipv4PrefixDelegation:
    """Prefixes of every ENI created through the proxy, kept beside moto's state."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2
        self._lock = threading.Lock()
        self._by_eni: dict[str, tuple[str, ...]] = {}
        self.fallback_to_subnet = True

    @staticmethod
    def split_request(params: dict[str, str]) -> tuple[dict[str, str], int, list[str]]:
        """The request without its prefix parameters (moto refuses none but ignores them),
        the requested count and the explicit prefixes."""
        count = int(params.get("Ipv4PrefixCount", "0"))
        explicit = [value for name, value in params.items() if _EXPLICIT_PREFIX.fullmatch(name)]
        rest = {
            name: value
            for name, value in params.items()
            if name != "Ipv4PrefixCount" and not _EXPLICIT_PREFIX.fullmatch(name)
        }
        return rest, count, explicit

    def plan(self, subnet_id: str, count: int, explicit: list[str]) -> PlannedInterface:
        """Chooses a new ENI's primary address and prefixes, as EC2 would (lock held by caller
        through `locked`)."""
        subnet = ipaddress.IPv4Network(
            self._ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["CidrBlock"]
        )
        reservations = self._ec2.get_subnet_cidr_reservations(SubnetId=subnet_id)[
            "SubnetIpv4CidrReservations"
        ]
        reserved = [ipaddress.IPv4Network(r["Cidr"]) for r in reservations]
        prefix_reservations = [
            ipaddress.IPv4Network(r["Cidr"])
            for r in reservations
            if r["ReservationType"] == "prefix"
        ]
        taken = self._taken(subnet_id, subnet)
        if explicit:
            prefixes = [self._explicit(cidr, subnet, taken) for cidr in explicit]
        else:
            prefixes = self._automatic(count, subnet, prefix_reservations, reserved, taken)
        taken.extend(prefixes)
        return PlannedInterface(
            private_ip=self._primary_address(subnet, reserved, taken),
            prefixes=tuple(str(prefix) for prefix in prefixes),
        )

    @property
    def locked(self) -> threading.Lock:
        """Held from plan() until record() so that concurrent creates never share a prefix."""
        return self._lock

    def record(self, eni_id: str, prefixes: tuple[str, ...]) -> None:
        if prefixes:
            self._by_eni[eni_id] = prefixes

    def release(self, eni_id: str) -> None:
        with self._lock:
            self._by_eni.pop(eni_id, None)

    def of(self, eni_id: str) -> tuple[str, ...]:
        with self._lock:
            return self._by_eni.get(eni_id, ())

    def _taken(self, subnet_id: str, subnet: ipaddress.IPv4Network) -> list[ipaddress.IPv4Network]:
        """Blocks no prefix may overlap: AWS's own addresses, every ENI address in the subnet
        and every delegated prefix."""
        head = ipaddress.IPv4Network(f"{subnet.network_address}/30")
        taken = [head, ipaddress.IPv4Network(f"{subnet.broadcast_address}/32")]
        enis = self._ec2.describe_network_interfaces(
            Filters=[{"Name": "subnet-id", "Values": [subnet_id]}]
        )["NetworkInterfaces"]
        for eni in enis:
            for address in eni.get("PrivateIpAddresses", []):
                taken.append(ipaddress.IPv4Network(f"{address['PrivateIpAddress']}/32"))
            taken.extend(
                ipaddress.IPv4Network(prefix)
                for prefix in self._by_eni.get(eni["NetworkInterfaceId"], ())
            )
        return taken

    def _automatic(
        self,
        count: int,
        subnet: ipaddress.IPv4Network,
        prefix_reservations: list[ipaddress.IPv4Network],
        reserved: list[ipaddress.IPv4Network],
        taken: list[ipaddress.IPv4Network],
    ) -> list[ipaddress.IPv4Network]:
        chosen: list[ipaddress.IPv4Network] = []
        for block in self._candidates(subnet, prefix_reservations, reserved):
            if len(chosen) == count:
                break
            if not any(block.overlaps(other) for other in taken + chosen):
                chosen.append(block)
        if len(chosen) < count:
            raise PrefixRequestError(
                "InsufficientCidrBlocks",
                f"There are not enough free cidr blocks in the specified subnet to satisfy "
                f"the request ({count} /{PREFIX_LENGTH} prefixes).",
            )
        return chosen

    def _candidates(
        self,
        subnet: ipaddress.IPv4Network,
        prefix_reservations: list[ipaddress.IPv4Network],
        reserved: list[ipaddress.IPv4Network],
    ) -> Iterator[ipaddress.IPv4Network]:
        for reservation in prefix_reservations:
            yield from reservation.subnets(new_prefix=PREFIX_LENGTH)
        if prefix_reservations and not self.fallback_to_subnet:
            return
        for block in subnet.subnets(new_prefix=PREFIX_LENGTH):
            if not any(block.overlaps(reservation) for reservation in reserved):
                yield block

    @staticmethod
    def _explicit(
        cidr: str, subnet: ipaddress.IPv4Network, taken: list[ipaddress.IPv4Network]
    ) -> ipaddress.IPv4Network:
        try:
            block = ipaddress.IPv4Network(cidr)
        except ValueError:
            raise PrefixRequestError(
                "InvalidParameterValue", f"{cidr} is not an aligned IPv4 prefix"
            ) from None
        if block.prefixlen != PREFIX_LENGTH or not block.subnet_of(subnet):
            raise PrefixRequestError(
                "InvalidParameterValue", f"{cidr} is not a /{PREFIX_LENGTH} of {subnet}"
            )
        if any(block.overlaps(other) for other in taken):
            raise PrefixRequestError("InvalidParameterValue", f"{cidr} is already in use")
        return block

    @staticmethod
    def _primary_address(
        subnet: ipaddress.IPv4Network,
        reserved: list[ipaddress.IPv4Network],
        taken: list[ipaddress.IPv4Network],
    ) -> str:
        for address in subnet.hosts():
            block = ipaddress.IPv4Network(f"{address}/32")
            if not any(block.overlaps(other) for other in reserved + taken):
                return str(address)
        raise PrefixRequestError(
            "InsufficientFreeAddressesInSubnet", f"no free address left in {subnet}"
        )
