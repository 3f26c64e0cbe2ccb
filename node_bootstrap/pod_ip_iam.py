"""IAM statements the node role needs for the multus-pod-ips agent, scoped to one cluster.

Kept apart from the bootstrap's statements (node_bootstrap.iam) so the node role's policy
composes both. Condition keys checked against the Service Authorization Reference for EC2:
Assign/UnassignPrivateIpAddresses take the network-interface resource, whose keys include
ec2:ResourceTag/${TagKey} and ec2:Subnet (the subnet's ARN); so do Assign/UnassignIpv6Addresses,
granted the same way, only where a network is dual-stack and only in its subnets. The ENIs are
those the bootstrap tagged with OWNER_TAG_KEY (only it sets that tag, at creation), and only
the calling node's own: the ENI's INSTANCE_TAG_KEY (written at creation, where the policy
requires the caller's own ID) must name the instance whose credentials sign the request.
DescribeInstanceTypes takes no resource ("*") and only ec2:Region, so aws:RequestedRegion
narrows it; DescribeNetworkInterfaces is granted once, by the bootstrap's read statement in the
same policy.

Routes that follow a pod (pod_routed_ranges): CreateRoute and ReplaceRoute take only the
route-table resource, whose condition keys are its tags, ec2:RouteTableID and ec2:Vpc (plus
ec2:Region); none names the route's destination or its target ENI. So the tightest grant is the
route tables of the networks with such ranges, by ARN; which destinations the node sets there
is the agent's (it routes only the configured ranges, to its own ENI), not IAM's.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

from node_bootstrap.iam import OWNER_INSTANCE_ID, calling_instance_is
from node_bootstrap.renderer import OWNER_TAG_KEY

#: What the agent calls (multus_pod_ips/agent/); tests compare with the emulator's log.
POD_IP_ACTIONS = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
POD_IPV6_ACTIONS = (
    "ec2:AssignIpv6Addresses",
    "ec2:UnassignIpv6Addresses",
)
POD_ROUTE_ACTIONS = (
    "ec2:CreateRoute",
    "ec2:ReplaceRoute",
)
POD_IP_READ_ACTIONS = (
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeInstanceTypes",
)


def multus_pod_ip_policy_statements(
    *,
    cluster_name: str,
    multus_subnet_arns: Sequence[str],
    dual_stack_subnet_arns: Sequence[str] = (),
    pod_route_table_arns: Sequence[str] = (),
) -> list[iam.PolicyStatement]:
    """Secondary addresses only on this cluster's Multus ENIs in a Multus subnet, IPv6 ones only
    in a dual-stack Multus subnet (no statement without one); routes only in the route tables
    of the networks with pod-routed ranges (no statement without one); reading the instance
    type's per-ENI limit."""
    if not multus_subnet_arns:
        raise ValueError("multus_subnet_arns: at least one Multus subnet ARN is required")
    ipv6_statements = (
        [
            _on_cluster_enis(
                "ManageMultusPodIpv6OnClusterEnis",
                POD_IPV6_ACTIONS,
                cluster_name,
                dual_stack_subnet_arns,
            )
        ]
        if dual_stack_subnet_arns
        else []
    )
    route_statements = (
        [
            iam.PolicyStatement(
                sid="RouteMultusPodRangesInTheirRouteTables",
                actions=list(POD_ROUTE_ACTIONS),
                resources=list(pod_route_table_arns),
            )
        ]
        if pod_route_table_arns
        else []
    )
    return [
        _on_cluster_enis(
            "ManageMultusPodIpsOnClusterEnis", POD_IP_ACTIONS, cluster_name, multus_subnet_arns
        ),
        *ipv6_statements,
        *route_statements,
        iam.PolicyStatement(
            sid="ReadInstanceTypeLimitsInRegion",
            actions=["ec2:DescribeInstanceTypes"],
            resources=["*"],
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
    ]


def _on_cluster_enis(
    sid: str, actions: Sequence[str], cluster_name: str, subnet_arns: Sequence[str]
) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid,
        actions=list(actions),
        resources=[f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:network-interface/*"],
        conditions={
            "StringEquals": {
                f"ec2:ResourceTag/{OWNER_TAG_KEY}": cluster_name,
                **calling_instance_is(OWNER_INSTANCE_ID),
            },
            "ArnEquals": {"ec2:Subnet": list(subnet_arns)},
        },
    )
