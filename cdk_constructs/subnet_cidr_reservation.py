"""Subnet CIDR reservations as a custom resource.

AWS::EC2::SubnetCidrReservation exists in only a few regions' CloudFormation registries, so the
reservation is made by a small boto3 handler (subnet_cidr_reservation_handler/index.py) behind
custom_resources.Provider, which works in every region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Acknowledgment, Aws, CustomResource, Duration, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk_constructs import custom_resource_kit as kit
from config.network_plan import ReservationType

HANDLER_DIR = Path(__file__).parent / "subnet_cidr_reservation_handler"
RESOURCE_TYPE = "Custom::SubnetCidrReservation"


@dataclass(frozen=True)
class ReservationSpec:
    """One reservation of `cidr` inside `subnet`: "explicit" (addresses we assign ourselves) or
    "prefix" (EC2 picks automatically assigned /28 prefixes from it)."""

    subnet: ec2.ISubnet
    cidr: str
    description: str
    reservation_type: ReservationType = "explicit"


@dataclass(frozen=True)
class Ipv6PodRangeSpec:
    """An explicit reservation of block `offset` of size /`prefix_length` inside the subnet's
    IPv6 /64 (`subnet_cidr`, a deploy-time value): the handler computes the range."""

    subnet: ec2.ISubnet
    subnet_cidr: str
    prefix_length: int
    offset: int
    description: str


@dataclass(frozen=True)
class ReservedIpv6PodRange:
    """The reserved range, its first and last address, the subnet's /64 and its VPC router, as
    the handler returns them: plain attributes (deploy-time values) that another stack reads
    by weak reference, where the subnet's own Ipv6CidrBlocks would be a list to split."""

    cidr: str
    first_address: str
    last_address: str
    subnet_cidr: str
    router_address: str


def handler_statements(subnet_arns: Sequence[str]) -> list[iam.PolicyStatement]:
    """Create takes the subnet's ARN; Get and Delete have no resource-level permissions in IAM
    (they match only "*"), so they are limited to this region instead."""
    return [
        iam.PolicyStatement(
            sid="ReserveInMultusSubnets",
            actions=["ec2:CreateSubnetCidrReservation"],
            resources=list(subnet_arns),
        ),
        iam.PolicyStatement(
            sid="ReadAndReleaseReservationsInRegion",
            actions=["ec2:GetSubnetCidrReservations", "ec2:DeleteSubnetCidrReservation"],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
    ]


class SubnetCidrReservationProvider(Construct):
    """The handler and provider: reservations are created only in the given subnets."""

    def __init__(
        self, scope: Construct, construct_id: str, *, subnets: Sequence[ec2.ISubnet]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        subnet_arns = [
            stack.format_arn(service="ec2", resource="subnet", resource_name=subnet.subnet_id)
            for subnet in subnets
        ]
        self.handler = kit.handler_function(
            self,
            "Handler",
            code=HANDLER_DIR,
            handler="index.on_event",
            timeout=Duration.minutes(2),
            description="Creates, adopts and deletes subnet CIDR reservations for Multus",
            logs_to=kit.log_group(self, "HandlerLogs"),
        )
        assert self.handler.role is not None
        # A policy of its own that every reservation depends on: a reservation created before
        # IAM attached it would fail the first deploy (and its rollback could not delete).
        self.policy = iam.Policy(
            self,
            "HandlerPolicy",
            roles=[self.handler.role],
            statements=handler_statements(subnet_arns),
        )
        self.provider = kit.provider(
            self, on_event=self.handler, logs_to=kit.log_group(self, "ProviderLogs")
        )
        kit.acknowledge_provider_findings(self, self.provider)
        self._acknowledge_policy_findings()

    def reserve(self, construct_id: str, spec: ReservationSpec) -> CustomResource:
        return self._reservation(
            construct_id,
            {
                "SubnetId": spec.subnet.subnet_id,
                "Cidr": spec.cidr,
                "ReservationType": spec.reservation_type,
                "Description": spec.description,
            },
        )

    def _reservation(self, construct_id: str, properties: dict[str, object]) -> CustomResource:
        reservation = CustomResource(
            self,
            construct_id,
            service_token=self.provider.service_token,
            resource_type=RESOURCE_TYPE,
            service_timeout=kit.synchronous_service_timeout(self.handler),
            properties=properties,
        )
        reservation.node.add_dependency(self.policy)
        kit.hold_provider(reservation, self.provider)
        return reservation

    def reserve_ipv6_pod_range(
        self, construct_id: str, spec: Ipv6PodRangeSpec
    ) -> ReservedIpv6PodRange:
        reservation = self._reservation(
            construct_id,
            {
                "SubnetId": spec.subnet.subnet_id,
                "Ipv6PodRange": {
                    "SubnetCidr": spec.subnet_cidr,
                    "PrefixLength": str(spec.prefix_length),
                    "Offset": str(spec.offset),
                },
                "ReservationType": "explicit",
                "Description": spec.description,
            },
        )
        return ReservedIpv6PodRange(
            cidr=reservation.get_att_string("Cidr"),
            first_address=reservation.get_att_string("FirstAddress"),
            last_address=reservation.get_att_string("LastAddress"),
            subnet_cidr=reservation.get_att_string("SubnetCidr"),
            router_address=reservation.get_att_string("RouterAddress"),
        )

    def _acknowledge_policy_findings(self) -> None:
        Validations.of(self.policy).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="ec2:GetSubnetCidrReservations and ec2:DeleteSubnetCidrReservation have "
                "no resource-level permissions (IAM matches them only on *); both are limited "
                "to this stack's region by aws:RequestedRegion. Create is scoped to the Multus "
                "subnets.",
            )
        )
