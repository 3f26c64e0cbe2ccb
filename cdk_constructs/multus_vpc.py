"""The VPC: public subnets, node subnets and one Multus subnet per (network, AZ)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Acknowledgment, CfnResource, Fn, Tags, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.fixed_subnet_cidrs import FixedSubnetCidrs
from cdk_constructs.removed_with_stack import AuditLogGroup
from config.network_plan import IPV6_SUBNET_PREFIX_LENGTH, IPV6_SUBNETS_PER_VPC_BLOCK

PUBLIC_GROUP = "Public"
NODE_GROUP = "Nodes"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
# ec2.Vpc tags each subnet with the name of its subnet group.
SUBNET_GROUP_TAG = "aws-cdk:subnet-name"
IPV6_ANYWHERE = "::/0"


@dataclass(frozen=True)
class MultusNetworkLayout:
    """One Multus network: its name, a subnet CIDR per AZ (VPC AZ order), NAT egress or not;
    on a dual-stack network, which /64 of the VPC's IPv6 block each subnet gets (AZ order)."""

    name: str
    subnet_cidrs: Sequence[str]  # one per AZ, in the VPC's AZ order
    nat_egress: bool
    ipv6_subnet_indexes: Sequence[int] = ()


@dataclass(frozen=True)
class MultusVpcProps:
    """The VPC layout: AZs, public/node subnet CIDRs, Multus networks, NAT and flow-log settings."""

    name_prefix: str
    cluster_name: str
    availability_zones: Sequence[str]
    cidr: str
    public_subnet_cidrs: Sequence[str]
    node_subnet_cidrs: Sequence[str]
    multus_networks: Sequence[MultusNetworkLayout]
    single_nat_gateway: bool
    flow_log_retention: logs.RetentionDays
    keep_flow_logs: bool
    ipv6: bool = False


class MultusVpc(Construct):
    """ec2.Vpc with the exact CIDRs from the config and the tags EKS and Karpenter look for.

    Multus subnets are a subnet group per network, each subnet with its own route table; they
    never carry the Karpenter discovery tag, so Karpenter never places node primary ENIs there.
    """

    def __init__(self, scope: Construct, construct_id: str, props: MultusVpcProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        # ec2.Vpc's own default provider, kept to look up which gateway an AZ routes to.
        self._nat_gateways = ec2.NatProvider.gateway()
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=FixedSubnetCidrs(props.cidr, _planned_cidrs(props)),
            availability_zones=list(props.availability_zones),
            nat_gateways=1 if props.single_nat_gateway else len(props.availability_zones),
            nat_gateway_provider=self._nat_gateways,
            nat_gateway_subnets=ec2.SubnetSelection(subnet_group_name=PUBLIC_GROUP),
            subnet_configuration=_subnet_groups(props),
            restrict_default_security_group=True,
            flow_logs={
                "all-traffic": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                        AuditLogGroup(
                            self,
                            "FlowLogs",
                            retention=props.flow_log_retention,
                            keep_on_destroy=props.keep_flow_logs,
                        )
                    ),
                )
            },
        )
        Tags.of(self.vpc).add("Name", props.name_prefix)
        self._tag_subnets()
        self._accept_literal_availability_zones()
        #: The VPC's Amazon-provided IPv6 block (None without vpc.ipv6): what reads the VPC's
        #: Ipv6CidrBlocks depends on it, as they are empty until it is associated.
        self.ipv6_block = self._dual_stack_multus_subnets() if props.ipv6 else None

    @property
    def public_subnets(self) -> list[ec2.ISubnet]:
        return self.vpc.select_subnets(subnet_group_name=PUBLIC_GROUP).subnets

    @property
    def node_subnets(self) -> list[ec2.ISubnet]:
        return self.vpc.select_subnets(subnet_group_name=NODE_GROUP).subnets

    def multus_subnets(self, network: str) -> list[ec2.ISubnet]:
        """The network's subnets in AZ order."""
        return self.vpc.select_subnets(subnet_group_name=network).subnets

    def nat_gateway_id(self, availability_zone: str) -> str:
        """The NAT gateway a subnet of the AZ routes to: the AZ's own, else the first (a single
        NAT gateway serves every AZ), as ec2.Vpc routes its private subnets."""
        gateways = self._nat_gateways.configured_gateways
        in_zone = [gateway for gateway in gateways if gateway.az == availability_zone]
        return (in_zone or gateways)[0].gateway_id

    def _dual_stack_multus_subnets(self) -> ec2.CfnVPCCidrBlock:
        # ec2.Vpc's DUAL_STACK would give every subnet a /64 and the node subnets IPv6 too;
        # only the dual-stack Multus subnets get one, each its fixed /64 of the block (the
        # aws-cdk-lib CfnSubnet example: Fn::Select over Fn::Cidr of the VPC's Ipv6CidrBlocks).
        # Never replaced (a test pins its logical ID): the subnets below read their /64 from
        # the VPC's Ipv6CidrBlocks, which would not follow a new block.
        block = ec2.CfnVPCCidrBlock(
            self, "Ipv6Block", vpc_id=self.vpc.vpc_id, amazon_provided_ipv6_cidr_block=True
        )
        # Fn::Cidr's cidrBits are the host bits of each block it cuts.
        subnet_cidrs = Fn.cidr(
            Fn.select(0, self.vpc.vpc_ipv6_cidr_blocks),
            IPV6_SUBNETS_PER_VPC_BLOCK,
            str(ipaddress.IPV6LENGTH - IPV6_SUBNET_PREFIX_LENGTH),
        )
        dual_stack = [n for n in self._props.multus_networks if n.ipv6_subnet_indexes]
        egress_only = (
            ec2.CfnEgressOnlyInternetGateway(
                self, "EgressOnlyInternetGateway", vpc_id=self.vpc.vpc_id
            )
            if any(network.nat_egress for network in dual_stack)
            else None
        )
        for network in dual_stack:
            for subnet, index in zip(
                self.multus_subnets(network.name), network.ipv6_subnet_indexes, strict=True
            ):
                assert isinstance(subnet, ec2.Subnet)
                cfn_subnet = subnet.node.default_child
                assert isinstance(cfn_subnet, ec2.CfnSubnet)
                cfn_subnet.ipv6_cidr_block = Fn.select(index, subnet_cidrs)
                cfn_subnet.node.add_dependency(block)
                if egress_only is not None and network.nat_egress:
                    # IPv6 has no NAT: the egress-only gateway lets out what the subnet opens.
                    subnet.add_route(
                        "Ipv6Egress",
                        router_id=egress_only.ref,
                        router_type=ec2.RouterType.EGRESS_ONLY_INTERNET_GATEWAY,
                        destination_ipv6_cidr_block=IPV6_ANYWHERE,
                        enables_internet_connectivity=True,
                    )
                    # An IPv6 route needs the VPC's IPv6 block, which names neither it nor
                    # the gateway; and it must go before the block on delete.
                    subnet.node.find_child("Ipv6Egress").node.add_dependency(block)
        return block

    def _tag_subnets(self) -> None:
        props = self._props
        for subnet in self.public_subnets:
            Tags.of(subnet).add("kubernetes.io/role/elb", "1")
            self._name(subnet, "public")
        for subnet in self.node_subnets:
            Tags.of(subnet).add("kubernetes.io/role/internal-elb", "1")
            Tags.of(subnet).add(KARPENTER_DISCOVERY_TAG, props.cluster_name)
            self._name(subnet, "nodes")
        for network in props.multus_networks:
            for subnet in self.multus_subnets(network.name):
                self._name(subnet, network.name)

    def _name(self, subnet: ec2.ISubnet, group: str) -> None:
        name_subnet(subnet, self._props.name_prefix, group)

    def _accept_literal_availability_zones(self) -> None:
        accept_literal_availability_zones(
            self.vpc.public_subnets + self.vpc.private_subnets + self.vpc.isolated_subnets
        )


def name_subnet(subnet: ec2.ISubnet, name_prefix: str, group: str) -> None:
    """The Name tag of a subnet the app creates: <app>-<group>-<az>."""
    Tags.of(subnet).add("Name", f"{name_prefix}-{group}-{subnet.availability_zone}")


def accept_literal_availability_zones(subnets: Sequence[ec2.ISubnet]) -> None:
    """Acknowledge cfn-lint's W3010 (hardcoded AZ) on subnets the app creates."""
    # Subnets, CIDR reservations, NAD ranges and NodePool zones must line up AZ by AZ, so
    # the AZ names are fixed in the config (validated against the region), not looked up.
    reason = (
        "AZ names come from the validated config so that subnets, reservations, NADs and "
        "NodePool zones stay aligned; Fn::GetAZs would pick AZs we don't control."
    )
    for subnet in subnets:
        cfn_subnet = subnet.node.default_child
        assert isinstance(cfn_subnet, CfnResource)
        cfn_subnet.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3010"]}})
        Validations.of(cfn_subnet).acknowledge(
            Acknowledgment(id="CloudFormation-Validate::W3010", reason=reason)
        )


def ipv6_subnet_cidr(subnet: ec2.ISubnet) -> str:
    """A dual-stack subnet's /64 (deploy time: the subnet's own attribute)."""
    assert isinstance(subnet, ec2.Subnet)
    return Fn.select(0, subnet.subnet_ipv6_cidr_blocks)


def _planned_cidrs(props: MultusVpcProps) -> dict[tuple[str, str], str]:
    groups: list[tuple[str, Sequence[str]]] = [
        (PUBLIC_GROUP, props.public_subnet_cidrs),
        (NODE_GROUP, props.node_subnet_cidrs),
    ]
    groups += [(network.name, network.subnet_cidrs) for network in props.multus_networks]
    return {
        (group, az): cidr
        for group, cidrs in groups
        for az, cidr in zip(props.availability_zones, cidrs, strict=True)
    }


def _subnet_groups(props: MultusVpcProps) -> list[ec2.SubnetConfiguration]:
    # cidr_mask only satisfies ec2.Vpc's bookkeeping: FixedSubnetCidrs decides the real CIDRs.
    groups = [
        ec2.SubnetConfiguration(
            name=PUBLIC_GROUP,
            subnet_type=ec2.SubnetType.PUBLIC,
            cidr_mask=24,
            map_public_ip_on_launch=False,
        ),
        ec2.SubnetConfiguration(
            name=NODE_GROUP, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=24
        ),
    ]
    groups += [
        ec2.SubnetConfiguration(
            name=network.name,
            subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS
            if network.nat_egress
            else ec2.SubnetType.PRIVATE_ISOLATED,
            cidr_mask=24,
        )
        for network in props.multus_networks
    ]
    return groups
