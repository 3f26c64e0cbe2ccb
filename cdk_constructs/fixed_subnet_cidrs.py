"""IIpAddresses that hands ec2.Vpc the exact subnet CIDRs from the config.

ec2.Vpc normally carves subnets sequentially by mask; operators need the CIDRs they planned
(they match the Multus reservations and NAD ranges), so each (subnet group, AZ) pair is looked up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import aws_ec2 as ec2


@jsii.implements(ec2.IIpAddresses)
class FixedSubnetCidrs:
    """IIpAddresses that gives every subnet the CIDR the config states instead of carving them."""

    def __init__(self, vpc_cidr: str, cidrs: Mapping[tuple[str, str], str]) -> None:
        """`cidrs` maps (subnet group name, availability zone) to that subnet's CIDR."""
        self._vpc_cidr = vpc_cidr
        self._cidrs = dict(cidrs)

    def allocate_vpc_cidr(self) -> ec2.VpcIpamOptions:
        return ec2.VpcIpamOptions(cidr_block=self._vpc_cidr)

    def allocate_subnets_cidr(
        self,
        *,
        requested_subnets: Sequence[ec2.RequestedSubnet | dict[str, Any]],
        vpc_cidr: str,
    ) -> ec2.SubnetIpamOptions:
        allocated = []
        for request in requested_subnets:
            assert isinstance(request, ec2.RequestedSubnet)  # jsii always passes the struct
            key = (request.configuration.name, request.availability_zone)
            if key not in self._cidrs:
                raise ValueError(f"no CIDR planned for subnet group {key[0]!r} in {key[1]}")
            allocated.append(ec2.AllocatedSubnet(cidr=self._cidrs[key]))
        return ec2.SubnetIpamOptions(allocated_subnets=allocated)
