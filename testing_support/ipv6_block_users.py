"""Which resources of a template use a VPC's IPv6 block, and whether each waits for it.

A VPC gets an IPv6 block through a resource of its own, AWS::EC2::VPCCidrBlock (AWS::EC2::VPC has
no IPv6 property): until CloudFormation has created it, the VPC's Ipv6CidrBlocks attribute is
empty (AWS::EC2::VPC return values) and EC2 has no IPv6 range to give a subnet, a route or a
rule in that VPC. So everything that uses IPv6 in the VPC (a property whose name says Ipv6, an
IPv6 CIDR, the VPC's Ipv6CidrBlocks) must depend on the block (cloudformation_order), which also
keeps the block until each of them is gone on delete.

What it does not model: IPv6 through a BYOIP or IPAM pool (a block with Ipv6Pool or
Ipv6IpamPoolId is a block all the same; nothing checks the pool), and several VPCs with blocks
in one template (every IPv6 user must then wait for every block).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from testing_support.cloudformation_order import StackOrder, Template

BLOCK = "AWS::EC2::VPCCidrBlock"


def ipv6_blocks(template: Template) -> list[str]:
    return sorted(
        logical_id
        for logical_id, resource in template.get("Resources", {}).items()
        if resource["Type"] == BLOCK
        and set(resource.get("Properties", {}))
        & {"AmazonProvidedIpv6CidrBlock", "Ipv6Pool", "Ipv6IpamPoolId", "Ipv6CidrBlock"}
    )


def uses_ipv6(properties: Any) -> bool:
    """A property named ...Ipv6... with a value, an IPv6 literal, or a VPC's Ipv6CidrBlocks."""
    if isinstance(properties, dict):
        if properties.get("Fn::GetAtt") is not None:
            target = properties["Fn::GetAtt"]
            attribute = target.split(".", 1)[-1] if isinstance(target, str) else target[1]
            return "Ipv6" in str(attribute)
        return any(
            ("Ipv6" in key and value not in (None, False, 0, [])) or uses_ipv6(value)
            for key, value in properties.items()
        )
    if isinstance(properties, list):
        return any(uses_ipv6(item) for item in properties)
    return isinstance(properties, str) and _is_ipv6_literal(properties)


def _is_ipv6_literal(text: str) -> bool:
    try:
        return ipaddress.ip_network(text, strict=False).version == 6
    except ValueError:
        return False


def users_not_waiting(template: Template) -> dict[str, list[str]]:
    """Per IPv6 block, the resources that use IPv6 but do not depend on it."""
    order = StackOrder(template)
    blocks = ipv6_blocks(template)
    users = [
        logical_id
        for logical_id, resource in template.get("Resources", {}).items()
        if resource["Type"] not in (BLOCK, "AWS::EC2::VPC")
        and uses_ipv6(resource.get("Properties", {}))
    ]
    found = {
        block: sorted(user for user in users if not order.depends_on(user, block))
        for block in blocks
    }
    return {block: users for block, users in found.items() if users}
