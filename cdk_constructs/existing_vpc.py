"""A VPC the network team owns: imported by attributes, only the Multus subnets are ours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Annotations, Tags
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk_constructs.multus_vpc import (
    SUBNET_GROUP_TAG,
    MultusNetworkLayout,
    accept_literal_availability_zones,
    name_subnet,
)


@dataclass(frozen=True)
class GivenSubnet:
    """A subnet of the existing VPC: its ID and IPv4 CIDR, as EC2 shows them."""

    subnet_id: str
    cidr: str


@dataclass(frozen=True)
class ExistingVpcProps:
    """The existing VPC as values (nothing is looked up at synth): its ID and CIDR blocks, its
    node and (optional) public subnets and NAT gateways per AZ, and the Multus networks to add.

    nat_gateway_ids: one per AZ in availability_zones order, or empty (no network then has
    nat_egress)."""

    name_prefix: str
    availability_zones: Sequence[str]
    vpc_id: str
    cidrs: Sequence[str]
    node_subnets: Sequence[GivenSubnet]
    public_subnets: Sequence[GivenSubnet]
    nat_gateway_ids: Sequence[str]
    multus_networks: Sequence[MultusNetworkLayout]


class ExistingVpc(Construct):
    """The same surface as MultusVpc (vpc, node_subnets, public_subnets, multus_subnets) on a
    VPC the app does not own: the VPC and its subnets are imported, never tagged or changed;
    each Multus subnet is created with its own route table and, for nat_egress networks, a
    default route to its AZ's given NAT gateway. No flow logs: the VPC's logging is its
    owner's (docs/network.md, Your own VPC)."""

    def __init__(self, scope: Construct, construct_id: str, props: ExistingVpcProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        zones = list(props.availability_zones)
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=props.vpc_id,
            vpc_cidr_block=props.cidrs[0],
            availability_zones=zones,
            private_subnet_ids=[subnet.subnet_id for subnet in props.node_subnets],
            private_subnet_ipv4_cidr_blocks=[subnet.cidr for subnet in props.node_subnets],
            public_subnet_ids=[subnet.subnet_id for subnet in props.public_subnets],
            public_subnet_ipv4_cidr_blocks=[subnet.cidr for subnet in props.public_subnets],
        )
        for subnet in self.node_subnets + self.public_subnets:
            Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "The network team owns these subnets' route tables; the app never reads or "
                "changes them.",
            )
        self._multus_subnets = {
            network.name: self._create_multus_subnets(props, network)
            for network in props.multus_networks
        }
        accept_literal_availability_zones(
            [subnet for subnets in self._multus_subnets.values() for subnet in subnets]
        )
        #: No IPv6 block: the app adds none to a VPC it does not own (vpc.ipv6 needs a VPC the
        #: app creates).
        self.ipv6_block: ec2.CfnVPCCidrBlock | None = None

    @property
    def node_subnets(self) -> list[ec2.ISubnet]:
        return self.vpc.private_subnets

    @property
    def public_subnets(self) -> list[ec2.ISubnet]:
        return self.vpc.public_subnets

    def multus_subnets(self, network: str) -> list[ec2.Subnet]:
        """The network's subnets in AZ order."""
        return self._multus_subnets[network]

    def nat_gateway_id(self, availability_zone: str) -> str:
        """The given NAT gateway of the AZ (the config has one per AZ whenever a route or a
        nat_egress network needs it)."""
        zones = list(self._props.availability_zones)
        return self._props.nat_gateway_ids[zones.index(availability_zone)]

    def _create_multus_subnets(
        self, props: ExistingVpcProps, network: MultusNetworkLayout
    ) -> list[ec2.Subnet]:
        subnets: list[ec2.Subnet] = []
        for index, (az, cidr) in enumerate(
            zip(props.availability_zones, network.subnet_cidrs, strict=True)
        ):
            subnet = ec2.PrivateSubnet(
                self,
                f"{network.name}Subnet{index + 1}",
                vpc_id=props.vpc_id,
                availability_zone=az,
                cidr_block=cidr,
                map_public_ip_on_launch=False,
            )
            if network.nat_egress:
                subnet.add_default_nat_route(props.nat_gateway_ids[index])
            name_subnet(subnet, props.name_prefix, network.name)
            # The tag ec2.Vpc puts on the subnets of a group: a network's subnets carry the
            # same tags in both modes, so whatever finds them by tag (tests, operators) works.
            Tags.of(subnet).add(SUBNET_GROUP_TAG, network.name)
            subnets.append(subnet)
        return subnets
