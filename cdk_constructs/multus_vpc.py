"""The VPC: public subnets, node subnets and one Multus subnet per (network, AZ)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Acknowledgment, CfnResource, Tags, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk_constructs.fixed_subnet_cidrs import FixedSubnetCidrs

PUBLIC_GROUP = "Public"
NODE_GROUP = "Nodes"
KARPENTER_DISCOVERY_TAG = "karpenter.sh/discovery"
# ec2.Vpc tags each subnet with the name of its subnet group.
SUBNET_GROUP_TAG = "aws-cdk:subnet-name"


@dataclass(frozen=True)
class MultusNetworkLayout:
    """One Multus network: its name, a subnet CIDR per AZ (VPC AZ order), NAT egress or not."""

    name: str
    subnet_cidrs: Sequence[str]  # one per AZ, in the VPC's AZ order
    nat_egress: bool


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
                        logs.LogGroup(self, "FlowLogs", retention=props.flow_log_retention)
                    ),
                )
            },
        )
        Tags.of(self.vpc).add("Name", props.name_prefix)
        self._tag_subnets()
        self._accept_literal_availability_zones()

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
