"""NetworkStack: the VPC, Multus subnets, their security group and CIDR reservations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Fn
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.multus_vpc import MultusNetworkLayout, MultusVpc, MultusVpcProps
from cdk_constructs.subnet_cidr_reservation import (
    ReservationSpec,
    ReservationType,
    SubnetCidrReservationProvider,
)
from config import AppConfig
from stacks.base import ConfiguredAzStack

# Whereabouts assigns addresses of an explicit reservation itself; in node_prefix mode EC2 picks
# each node's /28 prefixes out of a prefix reservation.
RESERVATION_TYPES: dict[str, ReservationType] = {
    "whereabouts": "explicit",
    "node_prefix": "prefix",
}
RESERVATION_PURPOSES: dict[ReservationType, str] = {
    "explicit": "Whereabouts",
    "prefix": "node /28 prefixes",
}


@dataclass(frozen=True)
class MultusAttachment:
    """Where one Multus network lands in one AZ: what NADs and node bootstrap need."""

    network: str
    availability_zone: str
    subnet: ec2.ISubnet
    subnet_cidr: str
    reservation_cidr: str
    reservation_type: ReservationType = "explicit"


class NetworkStack(ConfiguredAzStack):
    """The VPC with its public, node and Multus subnets and the Multus CIDR reservations."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: AppConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope, construct_id, availability_zones=config.availability_zones, **kwargs
        )
        multus_vpc = MultusVpc(self, "Network", _vpc_props(config))
        self.vpc = multus_vpc.vpc
        self.node_subnets = multus_vpc.node_subnets
        self.public_subnets = multus_vpc.public_subnets
        self.multus_security_group = self._multus_security_group(config)
        self.multus_attachments = [
            MultusAttachment(
                network=network.name,
                availability_zone=az,
                subnet=subnet,
                subnet_cidr=planned.cidr,
                reservation_cidr=planned.reservation,
                reservation_type=RESERVATION_TYPES[network.ip_management],
            )
            for network in config.multus.networks
            for az, subnet, planned in zip(
                config.availability_zones,
                multus_vpc.multus_subnets(network.name),
                network.subnets,
                strict=True,
            )
        ]
        self._reserve_multus_ranges()
        self._outputs()

    def _multus_security_group(self, config: AppConfig) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self,
            "MultusSecurityGroup",
            vpc=self.vpc,
            description="Multus ENIs: traffic from the configured sources",
            allow_all_outbound=True,
        )
        for cidr in config.multus.security_group_ingress_cidrs or [config.vpc.cidr]:
            group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.all_traffic(), f"from {cidr}")
        return group

    def _reserve_multus_ranges(self) -> None:
        provider = SubnetCidrReservationProvider(
            self,
            "CidrReservations",
            subnets=[attachment.subnet for attachment in self.multus_attachments],
        )
        for attachment in self.multus_attachments:
            provider.reserve(
                f"{attachment.network}-{attachment.availability_zone}",
                ReservationSpec(
                    subnet=attachment.subnet,
                    cidr=attachment.reservation_cidr,
                    description=f"Multus {attachment.network} pod addresses "
                    f"({RESERVATION_PURPOSES[attachment.reservation_type]})",
                    reservation_type=attachment.reservation_type,
                ),
            )

    def _outputs(self) -> None:
        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(
            self,
            "NodeSubnetIds",
            value=Fn.join(",", [s.subnet_id for s in self.node_subnets]),
        )
        CfnOutput(
            self,
            "PublicSubnetIds",
            value=Fn.join(",", [s.subnet_id for s in self.public_subnets]),
        )
        for attachment in self.multus_attachments:
            CfnOutput(
                self,
                f"MultusSubnet-{attachment.network}-{attachment.availability_zone}",
                description=f"Multus subnet of {attachment.network} in "
                f"{attachment.availability_zone}",
                value=attachment.subnet.subnet_id,
            )
        CfnOutput(self, "MultusSecurityGroupId", value=self.multus_security_group.security_group_id)


def _vpc_props(config: AppConfig) -> MultusVpcProps:
    return MultusVpcProps(
        name_prefix=config.name,
        cluster_name=config.cluster_name,
        availability_zones=config.availability_zones,
        cidr=config.vpc.cidr,
        public_subnet_cidrs=config.vpc.public_subnet_cidrs,
        node_subnet_cidrs=config.vpc.node_subnet_cidrs,
        multus_networks=[
            MultusNetworkLayout(
                name=network.name,
                subnet_cidrs=[subnet.cidr for subnet in network.subnets],
                nat_egress=network.nat_egress,
            )
            for network in config.multus.networks
        ],
        single_nat_gateway=config.vpc.nat_gateways == "single",
        flow_log_retention=logs.RetentionDays[config.vpc.flow_log_retention],
    )
