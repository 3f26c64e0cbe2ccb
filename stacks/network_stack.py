"""NetworkStack: the VPC, Multus subnets, a security group per Multus network and the CIDR
reservations."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from aws_cdk import Annotations, CfnOutput, Fn, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.existing_vpc import ExistingVpc, ExistingVpcProps, GivenSubnet
from cdk_constructs.multus_vpc import MultusNetworkLayout, MultusVpc, MultusVpcProps
from cdk_constructs.subnet_cidr_reservation import ReservationSpec, SubnetCidrReservationProvider
from config import AppConfig
from config.model import ExistingSubnetConfig, ExistingVpcConfig, SecurityGroupRuleConfig
from config.network_plan import NetworkPlanRow, RouteTarget, network_plan
from stacks.base import ConfiguredAzStack

#: Construct ID and description of the group every Multus ENI shared before each network had
#: its own. The first network's group keeps both: a new description or logical ID would make
#: CloudFormation replace the group, and EC2 refuses to delete a group that the running nodes'
#: ENIs still carry.
LEGACY_SECURITY_GROUP_ID = "MultusSecurityGroup"
SECURITY_GROUP_DESCRIPTION = "Multus ENIs: traffic from the configured sources"
# What EC2 needs for "every port" of the protocols with ports or ICMP types (IpPermission).
_ALL_PORTS = {"tcp": (0, 65535), "udp": (0, 65535), "icmp": (-1, -1)}
#: The AWS::EC2::Route property of each route target (a virtual private gateway is a GatewayId).
ROUTE_TARGET_PROPERTIES: dict[RouteTarget, str] = {
    "transit_gateway": "transit_gateway_id",
    "vpn_gateway": "gateway_id",
    "network_interface": "network_interface_id",
    "nat_gateway": "nat_gateway_id",
}
ROUTE_PRECONDITION_WARNING_ID = "karpenter-multus:routeNeedsGatewayAttachment"


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
        existing = config.vpc.existing
        multus_vpc = (
            MultusVpc(self, "Network", _vpc_props(config))
            if existing is None
            else ExistingVpc(self, "Network", _existing_vpc_props(config, existing))
        )
        self.vpc = multus_vpc.vpc
        self.node_subnets = multus_vpc.node_subnets
        self.public_subnets = multus_vpc.public_subnets
        #: network name (a plan row's security_group) -> that network's group
        self.multus_security_groups = self._multus_security_groups(config)
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
                security_group=self.multus_security_groups[row.security_group],
            )
            for row in network_plan(config)
        ]
        self._reserve_multus_ranges()
        self._route_beyond_the_vpc(multus_vpc)
        for warning in config.route_preconditions:
            Annotations.of(self).add_warning_v2(ROUTE_PRECONDITION_WARNING_ID, warning)
        self._outputs()

    def _multus_security_groups(self, config: AppConfig) -> dict[str, ec2.SecurityGroup]:
        networks = config.multus.networks
        groups = {
            network.name: ec2.SecurityGroup(
                self,
                LEGACY_SECURITY_GROUP_ID if index == 0 else f"MultusSecurityGroup-{network.name}",
                vpc=self.vpc,
                description=SECURITY_GROUP_DESCRIPTION,
                # aws-cdk refuses an all-traffic egress rule and wants this instead (it then
                # renders the seed's rule, with its own description, and no other).
                allow_all_outbound=_allows_all_egress(network.security_group.egress),
            )
            for index, network in enumerate(networks)
        }
        for network in networks:
            group = groups[network.name]
            Tags.of(group).add("Name", multus_security_group_name(config.name, network.name))
            for rule in config.multus_ingress_rules(network):
                group.add_ingress_rule(
                    _peer(rule, groups), _port(rule), rule.rule_description("from")
                )
            if not group.allow_all_outbound:
                for rule in network.security_group.egress:
                    group.add_egress_rule(
                        _peer(rule, groups), _port(rule), rule.rule_description("to")
                    )
        return groups

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

    def _route_beyond_the_vpc(self, multus_vpc: MultusVpc | ExistingVpc) -> None:
        # Construct IDs from the destination: adding or removing a route keeps the others'
        # logical IDs (no replacement, no moment without the route).
        for attachment in self.multus_attachments:
            row = attachment.plan
            for route in row.routes:
                target_id = route.target_id or multus_vpc.nat_gateway_id(row.availability_zone)
                ec2.CfnRoute(
                    self,
                    f"MultusRoute-{row.network}-{row.availability_zone}-"
                    f"{route.destination.replace('/', '-')}",
                    route_table_id=attachment.subnet.route_table.route_table_id,
                    destination_cidr_block=route.destination,
                    **{ROUTE_TARGET_PROPERTIES[route.target]: target_id},
                )

    def _outputs(self) -> None:
        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(
            self,
            "NodeSubnetIds",
            value=Fn.join(",", [s.subnet_id for s in self.node_subnets]),
        )
        if self.public_subnets:  # an existing VPC may have none
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
        for network, group in self.multus_security_groups.items():
            CfnOutput(
                self,
                f"MultusSecurityGroupId-{network}",
                description=f"Security group of the {network} ENIs",
                value=group.security_group_id,
            )


def multus_security_group_name(app_name: str, network: str) -> str:
    """The Name tag of a network's group: its groups share one description (see above)."""
    return f"{app_name}-{network}"


def _allows_all_egress(rules: list[SecurityGroupRuleConfig]) -> bool:
    return any(rule.allows_everything_anywhere for rule in rules)


def _peer(rule: SecurityGroupRuleConfig, groups: dict[str, ec2.SecurityGroup]) -> ec2.IPeer:
    if rule.network is not None:
        return groups[rule.network]
    assert rule.cidr is not None  # the config gives each rule exactly one of the two
    return ec2.Peer.ipv4(rule.cidr)


def _port(rule: SecurityGroupRuleConfig) -> ec2.Port:
    protocol = rule.ip_protocol
    ports = rule.port_range
    from_port, to_port = (
        (ports.from_port, ports.to_port) if ports else _ALL_PORTS.get(protocol, (None, None))
    )
    return ec2.Port(
        protocol=_cdk_protocols()[protocol],
        from_port=from_port,
        to_port=to_port,
        # Part of the construct ID of a rule between groups: unique per protocol and ports.
        string_representation=f"{protocol} {from_port}-{to_port}" if ports else f"{protocol} ALL",
    )


@functools.cache
def _cdk_protocols() -> dict[str, ec2.Protocol]:
    """EC2's IpProtocol -> the ec2.Protocol member aws-cdk renders it from (the enum's Python
    members carry names only; the IpProtocol is what each renders to)."""
    return {
        ec2.Port(protocol=member, string_representation=member.name).to_rule_json()[
            "ipProtocol"
        ]: member
        for member in ec2.Protocol
    }


def _vpc_props(config: AppConfig) -> MultusVpcProps:
    return MultusVpcProps(
        name_prefix=config.name,
        cluster_name=config.cluster_name,
        availability_zones=config.availability_zones,
        cidr=config.vpc.cidr,
        public_subnet_cidrs=config.vpc.public_subnet_cidrs,
        node_subnet_cidrs=config.vpc.node_subnet_cidrs,
        multus_networks=_multus_layouts(config),
        single_nat_gateway=config.vpc.nat_gateways == "single",
        flow_log_retention=logs.RetentionDays[config.vpc.flow_log_retention],
    )


def _multus_layouts(config: AppConfig) -> list[MultusNetworkLayout]:
    return [
        MultusNetworkLayout(
            name=network.name,
            subnet_cidrs=[subnet.cidr for subnet in network.subnets],
            nat_egress=network.nat_egress,
        )
        for network in config.multus.networks
    ]


def _existing_vpc_props(config: AppConfig, existing: ExistingVpcConfig) -> ExistingVpcProps:
    def given(subnets: list[ExistingSubnetConfig]) -> list[GivenSubnet]:
        return [GivenSubnet(subnet_id=subnet.id, cidr=subnet.cidr) for subnet in subnets]

    return ExistingVpcProps(
        name_prefix=config.name,
        availability_zones=config.availability_zones,
        vpc_id=existing.vpc_id,
        cidrs=existing.cidrs,
        node_subnets=given(existing.node_subnets),
        public_subnets=given(existing.public_subnets),
        nat_gateway_ids=existing.nat_gateway_ids,
        multus_networks=_multus_layouts(config),
    )
