"""A Multus network's subnet in one AZ (its CIDR reservation, static range and floating
addresses) and its IPv6 settings: the parts of config/model/networks.py that a network holds
per subnet."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from config.messages import refuse_surrounding_whitespace
from config.model.base import (
    AWS_RESERVED_HEAD,
    AWS_RESERVED_TAIL,
    Cidr,
    StrictModel,
    SubnetCidr,
    net,
    unit,
)
from config.network_plan import IPV6_SUBNET_PREFIX_LENGTH


def _ipv4_address(value: str) -> str:
    refuse_surrounding_whitespace(value)
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IPv4 address (write it without a prefix length, for example "
            "10.0.4.60)"
        ) from None
    return value


#: An IPv4 address, written as it is (no prefix length).
FloatingAddress = Annotated[str, AfterValidator(_ipv4_address)]


class MultusSubnetConfig(StrictModel):
    """One Multus subnet (in the AZ at the same position of `availability_zones`)."""

    cidr: SubnetCidr = Field(description="The subnet's IPv4 CIDR (/16 to /28), inside the VPC.")
    reservation: Cidr = Field(
        description="Explicit CIDR reservation kept for Multus pod addresses (Whereabouts range)."
    )
    static_range: Cidr | None = Field(
        default=None,
        description="whereabouts networks only: a CIDR inside the reservation for fixed pod "
        "addresses, which pods ask for in their network annotation (`ips`) through the "
        "<network>-<az>-static NAD; Whereabouts hands out the rest of the reservation "
        "(docs/multus-pod-ips.md, fixed addresses).",
    )
    floating_addresses: list[FloatingAddress] = Field(
        default_factory=list,
        description="Addresses of the static_range that move to the pod announcing them: the "
        "active pod of an active/standby pair (keepalived or any VRRP) puts one on its Multus "
        "interface and sends a gratuitous ARP, and the pod IP agent of its node moves the "
        "address to that node's ENI (docs/multus-pod-ips.md, floating addresses).",
    )

    @model_validator(mode="after")
    def _reservation_inside_usable_range(self) -> MultusSubnetConfig:
        subnet, reserved = net(self.cidr), net(self.reservation)
        first_usable = subnet.network_address + AWS_RESERVED_HEAD
        last_usable = subnet.broadcast_address - AWS_RESERVED_TAIL
        if not reserved.subnet_of(subnet):
            raise ValueError(
                f"reservation: {self.reservation} is not inside subnet {self.cidr}; pick a "
                "range inside it"
            )
        if reserved.network_address < first_usable or reserved.broadcast_address > last_usable:
            raise ValueError(
                f"reservation: {self.reservation} overlaps the addresses AWS keeps in "
                f"{self.cidr} (the first {AWS_RESERVED_HEAD} and the last one); "
                f"keep it within {first_usable}-{last_usable}"
            )
        return self

    @model_validator(mode="after")
    def _static_range_inside_reservation(self) -> MultusSubnetConfig:
        # The dynamic range is the reservation minus the static range (Whereabouts' `exclude`),
        # so a static range inside the reservation can never overlap it.
        if self.static_range is None:
            return self
        static, reserved = net(self.static_range), net(self.reservation)
        if not static.subnet_of(reserved):
            raise ValueError(
                f"static_range: {self.static_range} is not inside reservation "
                f"{self.reservation}: fixed addresses come out of the reservation (EC2 gives "
                "none of its addresses to an ENI by itself), and Whereabouts hands out the rest "
                f"of it; {_smaller_block_hint(reserved)}"
            )
        if static == reserved:
            raise ValueError(
                f"static_range: {self.static_range} is the whole reservation, which would leave "
                f"Whereabouts no dynamic address; {_smaller_block_hint(reserved)}"
            )
        return self

    @model_validator(mode="after")
    def _floating_addresses_inside_static_range(self) -> MultusSubnetConfig:
        # Whereabouts never hands out an address of the static range (its `exclude`), so a
        # floating address there can only be on the pod that announces it.
        if not self.floating_addresses:
            return self
        first = self.floating_addresses[0]
        if self.static_range is None:
            raise ValueError(
                f"floating_addresses: {first} needs a static_range, the block of the "
                "reservation Whereabouts never hands out; set static_range (for example "
                f"{list(net(self.reservation).subnets(prefixlen_diff=1))[-1]}) and pick the "
                "floating addresses inside it"
            )
        static = net(self.static_range)
        for index, address in enumerate(self.floating_addresses):
            if ipaddress.IPv4Address(address) not in static:
                raise ValueError(
                    f"floating_addresses[{index}]: {address} is not inside static_range "
                    f"{self.static_range}: outside it Whereabouts could give the address to "
                    f"another pod; pick one of {static[0]}-{static[-1]}"
                )
            if address in self.floating_addresses[:index]:
                raise ValueError(
                    f"floating_addresses[{index}]: {address} is listed twice; list each "
                    "floating address once"
                )
        return self


def _smaller_block_hint(reservation: ipaddress.IPv4Network) -> str:
    if reservation.prefixlen == ipaddress.IPV4LENGTH:
        return "enlarge the reservation to hold both"
    upper_half = list(reservation.subnets(prefixlen_diff=1))[-1]
    return f"pick a smaller block inside it, for example {upper_half}"


class NetworkIpv6Config(StrictModel):
    """A dual-stack Multus network: each subnet gets a /64 of the VPC's IPv6 block and pods an
    IPv6 address from a range of it, reserved like the IPv4 one (docs/network.md, Dual stack)."""

    pod_range_prefix_length: int = Field(
        default=112,
        ge=IPV6_SUBNET_PREFIX_LENGTH + 1,
        le=ipaddress.IPV6LENGTH,
        json_schema_extra=unit("bits", "bit"),
        description="Size of the pod range inside each subnet's /64 (default /112: 65,536 "
        "addresses, more than any node count can use).",
    )
    pod_range_offset: int = Field(
        default=1,
        ge=1,
        description="Which block of that size in the /64 the pod range is (0 would hold the "
        "four addresses AWS keeps at the start of the /64, the last block its last address; "
        "the reservation's handler cuts the block out of the /64 at deploy time).",
    )

    @model_validator(mode="after")
    def _offset_inside_the_subnet(self) -> NetworkIpv6Config:
        blocks = 2 ** (self.pod_range_prefix_length - IPV6_SUBNET_PREFIX_LENGTH)
        # Block 0 holds the first four addresses AWS keeps, the last block the last one.
        highest = blocks - 2
        if highest < 1:
            raise ValueError(
                f"pod_range_prefix_length: a /{self.pod_range_prefix_length} splits the /64 in "
                f"{blocks} blocks, each holding addresses AWS keeps (the first four and the "
                f"last of the /64); use /{IPV6_SUBNET_PREFIX_LENGTH + 2} or longer, for "
                "example 112"
            )
        if self.pod_range_offset > highest:
            raise ValueError(
                f"pod_range_offset: {self.pod_range_offset} is outside the /64: it holds "
                f"{blocks} blocks of /{self.pod_range_prefix_length}, of which 1-{highest} "
                "are clear of the addresses AWS keeps; pick one of them, for example 1"
            )
        return self
