"""The VPC: a new one (CIDR, NAT, flow logs) or an existing one with its subnets."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
    model_validator,
)

from config import patterns
from config.logs import LogRetention
from config.model.base import (
    MAX_PREFIX_LENGTH,
    MIN_PREFIX_LENGTH,
    UNUSABLE_VPC_RANGES,
    Cidr,
    StrictModel,
    SubnetCidr,
    net,
)


def _usable_vpc_cidr(cidr: str) -> str:
    if not MIN_PREFIX_LENGTH <= net(cidr).prefixlen <= MAX_PREFIX_LENGTH:
        raise ValueError(f"{cidr}: a VPC's prefix must be /16 to /28 (for example 10.0.0.0/16)")
    for name, unusable in UNUSABLE_VPC_RANGES.items():
        if net(cidr).overlaps(unusable):
            raise ValueError(
                f"{cidr} overlaps {unusable} ({name}), which a VPC cannot use; take a "
                "private range (RFC 1918: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), "
                "for example 10.0.0.0/16"
            )
    return cidr


VpcCidr = Annotated[Cidr, AfterValidator(_usable_vpc_cidr)]


class ExistingSubnetConfig(StrictModel):
    """A subnet of the existing VPC, by ID, with its CIDR (checked against the Multus subnets;
    synth looks nothing up)."""

    id: str = Field(pattern=patterns.SUBNET_ID.regex, description="The subnet's ID.")
    cidr: SubnetCidr = Field(description="The subnet's IPv4 CIDR, as EC2 shows it.")


class ExistingVpcConfig(StrictModel):
    """A VPC the network team owns: the app only adds the Multus subnets, their route tables,
    security groups and reservations to it (docs/network.md, Your own VPC)."""

    vpc_id: str = Field(pattern=patterns.VPC_ID.regex, description="The VPC's ID.")
    cidrs: list[VpcCidr] = Field(
        min_length=1,
        description="The VPC's IPv4 CIDR blocks (primary and secondary); every subnet, the "
        "Multus subnets too, lies inside one of them.",
    )
    node_subnets: list[ExistingSubnetConfig] = Field(
        description="One node subnet per AZ, in the order of availability_zones: the nodes' "
        "primary ENIs and the cluster's ENIs; Karpenter selects them by ID."
    )
    public_subnets: list[ExistingSubnetConfig] = Field(
        default=[],
        description="Optional: one public subnet per AZ (internet-facing load balancers), in "
        "the order of availability_zones; [] when there are none.",
    )
    nat_gateway_ids: list[Annotated[str, Field(pattern=patterns.NAT_GATEWAY_ID.regex)]] = Field(
        default=[],
        description="The NAT gateway each AZ's Multus subnets route their default route to, "
        "in the order of availability_zones (repeat an ID to share one); []: none, so every "
        "network needs nat_egress false.",
    )

    @field_validator("cidrs")
    @classmethod
    def _distinct_blocks(cls, cidrs: list[str]) -> list[str]:
        for index, cidr in enumerate(cidrs):
            for other in cidrs[:index]:
                if net(cidr).overlaps(net(other)):
                    raise ValueError(
                        f"{cidr} overlaps {other}; a VPC's CIDR blocks never overlap, list "
                        "each block once as EC2 shows it"
                    )
        return cidrs

    @model_validator(mode="after")
    def _subnets_listed_once(self) -> ExistingVpcConfig:
        ids = [subnet.id for subnet in self.node_subnets + self.public_subnets]
        for subnet_id in sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(
                f"node_subnets / public_subnets: {subnet_id} is listed more than once; give "
                "each AZ its own subnet and keep node and public subnets apart"
            )
        return self


class VpcConfig(StrictModel):
    """The VPC, its public and node subnets (Multus subnets are under multus.networks)."""

    renamed_keys: ClassVar[dict[str, str]] = {
        "private_subnet_cidrs": "node_subnet_cidrs (same meaning: one per AZ)"
    }

    cidr: Cidr = Field(default="10.0.0.0/16", description="The VPC's IPv4 CIDR (/16 to /28).")
    public_subnet_cidrs: list[SubnetCidr] = Field(
        default=["10.0.0.0/24", "10.0.1.0/24"],
        description="One public subnet per AZ: NAT gateways, internet-facing load balancers.",
    )
    node_subnet_cidrs: list[SubnetCidr] = Field(
        default=["10.0.2.0/24", "10.0.3.0/24"],
        description="One node subnet per AZ: the nodes' primary ENIs, the cluster's ENIs, "
        "internal load balancers.",
    )
    nat_gateways: Literal["per_az", "single"] = Field(
        default="per_az",
        description="per_az: a NAT gateway in each AZ; single: one, in the first AZ (cheaper, "
        "but egress depends on that AZ).",
    )
    ipv6: bool = Field(
        default=False,
        description="Associate an Amazon-provided IPv6 block (/56) with the VPC, for the "
        "dual-stack Multus networks (multus.networks[].ipv6). Node and public subnets and the "
        "cluster stay IPv4 (docs/network.md, Dual stack).",
    )
    flow_log_retention: LogRetention = Field(
        default="ONE_YEAR",
        description="How long CloudWatch Logs keeps the VPC flow logs (incident evidence). "
        "Below ONE_YEAR the log group fails AWS Control Tower's CT.CLOUDWATCH.PR.2.",
    )

    existing: ExistingVpcConfig | None = Field(
        default=None,
        description="Deploy into a VPC the network team owns instead of creating one (IDs and "
        "CIDRs as values: synth looks nothing up); then cidr, public_subnet_cidrs, "
        "node_subnet_cidrs, nat_gateways and flow_log_retention stay unset.",
    )

    # What only a VPC the app creates has; with an existing VPC each would be silently ignored.
    NEW_VPC_FIELDS: ClassVar[tuple[str, ...]] = (
        "cidr",
        "public_subnet_cidrs",
        "node_subnet_cidrs",
        "nat_gateways",
        "flow_log_retention",
    )

    @field_validator("cidr")
    @classmethod
    def _vpc_size(cls, cidr: str) -> str:
        return _usable_vpc_cidr(cidr)

    @model_validator(mode="after")
    def _existing_alone(self) -> VpcConfig:
        if self.existing is None:
            return self
        if self.ipv6:
            raise ValueError(
                "ipv6: dual-stack Multus networks need a VPC the app creates; the app adds no "
                "IPv6 block to a VPC it does not own (docs/network.md, Dual stack): remove "
                "ipv6, or existing"
            )
        for name in self.NEW_VPC_FIELDS:
            if name in self.model_fields_set:
                raise ValueError(
                    f"{name}: describes a VPC the app creates, but existing names a VPC that "
                    f"exists; remove {name} (the existing VPC's CIDRs and subnets go under "
                    "existing)"
                )
        return self
