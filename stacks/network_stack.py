"""NetworkStack: the VPC, Multus subnets, their security group and CIDR reservations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Fn
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.multus_vpc import MultusNetworkLayout, MultusVpc, MultusVpcProps
from cdk_constructs.subnet_cidr_reservation import ReservationSpec, SubnetCidrReservationProvider
from config import AppConfig
from config.network_plan import SHARED_SECURITY_GROUP, NetworkPlanRow, network_plan
from stacks.base import ConfiguredAzStack


@dataclass(frozen=True)
class MultusAttachment:
    """Where one Multus network lands in one AZ: its plan row, subnet and security group."""

    plan: NetworkPlanRow
    subnet: ec2.ISubnet
    security_group: ec2.ISecurityGroup


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
        security_groups = {SHARED_SECURITY_GROUP: self.multus_security_group}
        subnets = {
            (network.name, az): subnet
            for network in config.multus.networks
            for az, subnet in zip(
                config.availability_zones,
                multus_vpc.multus_subnets(network.name),
                strict=True,
            )
        }
        self.multus_attachments = [
            MultusAttachment(
                plan=row,
                subnet=subnets[row.network, row.availability_zone],
                security_group=security_groups[row.security_group],
            )
            for row in network_plan(config)
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
            row = attachment.plan
            provider.reserve(
                f"{row.network}-{row.availability_zone}",
                ReservationSpec(
                    subnet=attachment.subnet,
                    cidr=row.reservation_cidr,
                    description=f"Multus {row.network} pod addresses "
                    f"({row.ip_management.reservation_purpose})",
                    reservation_type=row.reservation_type,
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
            row = attachment.plan
            CfnOutput(
                self,
                f"MultusSubnet-{row.network}-{row.availability_zone}",
                description=f"Multus subnet of {row.network} in {row.availability_zone}",
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
