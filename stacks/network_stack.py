"""NetworkStack: the VPC, Multus subnets, a security group per Multus network and the CIDR
reservations."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Annotations, CfnOutput, Fn, Tags, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.existing_vpc import ExistingVpc, ExistingVpcProps, GivenSubnet
from cdk_constructs.multus_vpc import (
    MultusNetworkLayout,
    MultusVpc,
    MultusVpcProps,
    ipv6_subnet_cidr,
)
from cdk_constructs.subnet_cidr_reservation import (
    Ipv6PodRangeSpec,
    ReservationSpec,
    ReservedIpv6PodRange,
    SubnetCidrReservationProvider,
)
from cdk_constructs.vpc_dns_check import VpcDnsCheck
from config import AppConfig
from config.model import ExistingSubnetConfig, ExistingVpcConfig, SecurityGroupRuleConfig
from config.model.route_rules import route_precondition_warnings
from config.network_plan import NetworkPlanRow, RouteTarget, network_plan
from stacks.base import ConfiguredAzStack

#: Construct ID and description of the group every Multus ENI shared before each network had
#: its own. The first network's group keeps both: a new description or logical ID would make
#: CloudFormation replace the group, and EC2 refuses to delete a group that the running nodes'
#: ENIs still carry.
LEGACY_SECURITY_GROUP_ID = "MultusSecurityGroup"
# The config key a VPC DNS check failure names.
EXISTING_VPC_ID = "vpc.existing.vpc_id"
SECURITY_GROUP_DESCRIPTION = "Multus ENIs: traffic from the configured sources"
# What EC2 needs for "every port" of the protocols with ports or ICMP types (IpPermission).
_ALL_PORTS = {"tcp": (0, 65535), "udp": (0, 65535), "icmp": (-1, -1), "icmpv6": (-1, -1)}
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
    """Where one Multus network lands in one AZ: its plan row, subnet and security group; on a
    dual-stack network the reservation of its IPv6 pod range (deploy-time values), else None."""

    plan: NetworkPlanRow
    subnet: ec2.ISubnet
    security_group: ec2.ISecurityGroup
    ipv6_reservation: ReservedIpv6PodRange | None = None

    @property
    def ipv6_subnet_cidr(self) -> str | None:
        """The subnet's IPv6 /64 (a deploy-time value), None on an IPv4-only network."""
        return self.ipv6_reservation.subnet_cidr if self.ipv6_reservation else None

    @property
    def ipv6_pod_range(self) -> str | None:
        """The reserved IPv6 pod range (a deploy-time value), None on an IPv4-only network."""
        return self.ipv6_reservation.cidr if self.ipv6_reservation else None


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
        self._multus_vpc = multus_vpc
        if existing is not None:
            VpcDnsCheck(self, "VpcDnsCheck", vpc_id=existing.vpc_id, config_field=EXISTING_VPC_ID)
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
        provider = SubnetCidrReservationProvider(
            self, "CidrReservations", subnets=list(subnets.values())
        )
        self.multus_attachments = [
            self._attachment(
                provider,
                row,
                subnets[row.network, row.availability_zone],
                self.multus_security_groups[row.security_group],
            )
            for row in network_plan(config)
        ]
        self._reserve_multus_ranges(provider)
        self._route_beyond_the_vpc(multus_vpc)
        for warning in route_precondition_warnings(config.multus.networks):
            if not config.acknowledges(warning.id):
                Annotations.of(self).add_warning_v2(ROUTE_PRECONDITION_WARNING_ID, warning.text)
        self._outputs()

    def _attachment(
        self,
        provider: SubnetCidrReservationProvider,
        row: NetworkPlanRow,
        subnet: ec2.ISubnet,
        group: ec2.ISecurityGroup,
    ) -> MultusAttachment:
        if row.ipv6 is None:
            return MultusAttachment(plan=row, subnet=subnet, security_group=group)
        reservation = provider.reserve_ipv6_pod_range(
            f"{row.network}-{row.availability_zone}-ipv6",
            Ipv6PodRangeSpec(
                subnet=subnet,
                subnet_cidr=ipv6_subnet_cidr(subnet),
                prefix_length=row.ipv6.pod_range_prefix_length,
                offset=row.ipv6.pod_range_offset,
                description=_reservation_description(row) + ", IPv6",
            ),
        )
        return MultusAttachment(
            plan=row, subnet=subnet, security_group=group, ipv6_reservation=reservation
        )

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
                allow_all_outbound=_allows_all_egress(network.egress_rules),
                allow_all_ipv6_outbound=_allows_all_ipv6_egress(network.egress_rules),
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
            if config.ingress_from_vpc_ipv6(network):
                self._admit_vpc_ipv6_block(group)
            for rule in network.egress_rules:
                if not _covered_by_all_outbound(rule, group):
                    group.add_egress_rule(
                        _peer(rule, groups), _port(rule), rule.rule_description("to")
                    )
        return groups

    def _admit_vpc_ipv6_block(self, group: ec2.SecurityGroup) -> None:
        block = self._multus_vpc.ipv6_block
        # The config has vpc.ipv6 for every dual-stack network, and vpc.ipv6 a VPC the app
        # creates.
        assert block is not None and isinstance(self.vpc, ec2.Vpc)
        # The VPC's Ipv6CidrBlocks is empty until the block is associated.
        group.node.add_dependency(block)
        group.add_ingress_rule(
            ec2.Peer.ipv6(Fn.select(0, self.vpc.vpc_ipv6_cidr_blocks)),
            ec2.Port.all_traffic(),
            "from the VPC's IPv6 block",
        )
        Validations.of(group).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-EC23",
                reason="The IPv6 source is the VPC's own Amazon-provided /56 (Fn::Select of "
                "the VPC's Ipv6CidrBlocks), known only at deploy time, so cdk-nag cannot tell "
                "it from ::/0; the IPv4 rule next to it is the VPC CIDR.",
            )
        )

    def _reserve_multus_ranges(self, provider: SubnetCidrReservationProvider) -> None:
        for attachment in self.multus_attachments:
            row = attachment.plan
            provider.reserve(
                f"{row.network}-{row.availability_zone}",
                ReservationSpec(
                    subnet=attachment.subnet,
                    cidr=row.reservation_cidr,
                    description=_reservation_description(row),
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
                destination = (
                    {"destination_ipv6_cidr_block": route.destination}
                    if route.is_ipv6
                    else {"destination_cidr_block": route.destination}
                )
                cfn_route = ec2.CfnRoute(
                    self,
                    f"MultusRoute-{row.network}-{row.availability_zone}-"
                    f"{route.destination.replace('/', '-').replace(':', '.')}",
                    route_table_id=attachment.subnet.route_table.route_table_id,
                    **destination,
                    **{ROUTE_TARGET_PROPERTIES[route.target]: target_id},
                )
                if route.is_ipv6 and multus_vpc.ipv6_block is not None:
                    # An IPv6 route needs the VPC's IPv6 block, which it names nowhere; and it
                    # must go before the block on delete.
                    cfn_route.node.add_dependency(multus_vpc.ipv6_block)

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


def _reservation_description(row: NetworkPlanRow) -> str:
    return f"Multus {row.network} pod addresses ({row.ip_management.reservation_purpose})"


def multus_security_group_name(app_name: str, network: str) -> str:
    """The Name tag of a network's group: its groups share one description (see above)."""
    return f"{app_name}-{network}"


def _allows_all_egress(rules: list[SecurityGroupRuleConfig]) -> bool:
    return any(rule.allows_everything_anywhere for rule in rules)


def _allows_all_ipv6_egress(rules: list[SecurityGroupRuleConfig]) -> bool:
    return any(rule.allows_everything_anywhere_ipv6 for rule in rules)


def _covered_by_all_outbound(rule: SecurityGroupRuleConfig, group: ec2.SecurityGroup) -> bool:
    # aws-cdk drops every other egress rule of a family whose all-traffic rule it renders.
    return group.allow_all_ipv6_outbound if rule.is_ipv6 else group.allow_all_outbound


def _peer(rule: SecurityGroupRuleConfig, groups: dict[str, ec2.SecurityGroup]) -> ec2.IPeer:
    if rule.network is not None:
        return groups[rule.network]
    assert rule.cidr is not None  # the config gives each rule exactly one of the two
    return ec2.Peer.ipv6(rule.cidr) if rule.is_ipv6 else ec2.Peer.ipv4(rule.cidr)


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
        keep_flow_logs=config.logs.keep_audit_logs_on_destroy,
        ipv6=config.vpc.ipv6,
    )


def _multus_layouts(config: AppConfig) -> list[MultusNetworkLayout]:
    plan = network_plan(config)
    return [
        MultusNetworkLayout(
            name=network.name,
            subnet_cidrs=[subnet.cidr for subnet in network.subnets],
            nat_egress=network.nat_egress,
            ipv6_subnet_indexes=[
                row.ipv6.subnet_index
                for row in plan
                if row.network == network.name and row.ipv6 is not None
            ],
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
