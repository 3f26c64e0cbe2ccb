from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from node_bootstrap.iam import read_statement
from node_bootstrap.pod_ip_iam import (
    POD_IP_ACTIONS,
    POD_IP_READ_ACTIONS,
    POD_IPV6_ACTIONS,
    POD_ROUTE_ACTIONS,
    multus_pod_ip_policy_statements,
)
from node_bootstrap.renderer import INSTANCE_TAG_KEY, OWNER_TAG_KEY

SUBNET_ARNS = [
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus1a",
    "arn:aws:ec2:us-west-2:111122223333:subnet/subnet-multus2a",
]


@pytest.fixture(scope="module")
def statements() -> dict[str, dict[str, Any]]:
    """The statements as they appear in the template (resolved), without synthesizing a stack."""
    stack = cdk.Stack(cdk.App(), "NodeRole", env=cdk.Environment(region="us-west-2"))
    resolved = [
        stack.resolve(statement.to_statement_json())
        for statement in multus_pod_ip_policy_statements(
            cluster_name="telco-cluster", multus_subnet_arns=SUBNET_ARNS
        )
    ]
    return {s["Sid"]: s for s in resolved}


def test_addresses_change_only_on_this_clusters_enis_in_multus_subnets(
    statements: dict[str, dict[str, Any]],
) -> None:
    manage = statements["ManageMultusPodIpsOnClusterEnis"]
    assert sorted(manage["Action"]) == [
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    ]
    assert manage["Effect"] == "Allow"
    assert str(manage["Resource"]["Fn::Join"][1][-1]).endswith(":network-interface/*")
    assert manage["Condition"]["StringEquals"][f"ec2:ResourceTag/{OWNER_TAG_KEY}"] == (
        "telco-cluster"
    )
    assert manage["Condition"]["ArnEquals"]["ec2:Subnet"] == SUBNET_ARNS
    assert owner_instance_required(manage)


def owner_instance_required(statement: dict[str, Any]) -> bool:
    """Only the instance the ENI's instance tag names may call (ec2:SourceInstanceARN)."""
    arn = statement["Condition"]["StringEquals"]["ec2:SourceInstanceARN"]
    tail = str(arn["Fn::Join"][1][-1])
    return tail == f":instance/${{aws:ResourceTag/{INSTANCE_TAG_KEY}}}"


def test_reads_only_instance_type_limits_in_the_region(
    statements: dict[str, dict[str, Any]],
) -> None:
    # DescribeNetworkInterfaces comes from the bootstrap's read statement in the same policy.
    read = statements["ReadInstanceTypeLimitsInRegion"]
    assert read["Action"] == "ec2:DescribeInstanceTypes"
    assert read["Resource"] == "*"
    assert read["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}
    assert set(statements) == {"ManageMultusPodIpsOnClusterEnis", "ReadInstanceTypeLimitsInRegion"}


def test_no_multus_subnets_is_an_error() -> None:
    with pytest.raises(ValueError, match="multus_subnet_arns"):
        multus_pod_ip_policy_statements(cluster_name="c", multus_subnet_arns=[])


def test_the_action_lists_are_the_ec2_calls_in_the_agent() -> None:
    # The integration test compares these lists with the calls of a running agent.
    agent = Path(__file__).parents[3] / "multus_pod_ips" / "agent"
    source = "".join(path.read_text() for path in agent.glob("*.py"))
    called = {f"ec2:{a}" for a in re.findall(r'\.call\(\s*"(\w+)"', source)}
    # Address changes name their action by family (multus_pod_ips/agent/address_family.py).
    called |= {f"ec2:{a}" for a in re.findall(r'_action="(\w+)"', source)}
    assert called == (
        set(POD_IP_ACTIONS)
        | set(POD_IPV6_ACTIONS)
        | set(POD_ROUTE_ACTIONS)
        | set(POD_IP_READ_ACTIONS)
    )
    assert not set(POD_IP_ACTIONS) & set(POD_IP_READ_ACTIONS)


def test_every_read_the_agent_makes_is_granted_to_the_node_role(
    statements: dict[str, dict[str, Any]],
) -> None:
    # DescribeNetworkInterfaces through the bootstrap's read statement, in the same policy.
    bootstrap_read = cdk.Stack().resolve(read_statement().to_statement_json())
    granted: set[str] = set()
    for statement in (statements["ReadInstanceTypeLimitsInRegion"], bootstrap_read):
        actions = statement["Action"]  # one action: a string, several: a list
        granted |= {actions} if isinstance(actions, str) else set(actions)
    assert set(POD_IP_READ_ACTIONS) <= granted


def test_ipv6_addresses_change_only_on_this_clusters_enis_in_dual_stack_subnets() -> None:
    """Service Authorization Reference, EC2: AssignIpv6Addresses and UnassignIpv6Addresses take
    network-interface/* with ec2:ResourceTag/${TagKey} and ec2:Subnet, like the IPv4 calls."""
    stack = cdk.Stack(cdk.App(), "NodeRole", env=cdk.Environment(region="us-west-2"))
    dual_stack = [SUBNET_ARNS[1]]
    resolved = {
        s["Sid"]: s
        for s in (
            stack.resolve(statement.to_statement_json())
            for statement in multus_pod_ip_policy_statements(
                cluster_name="telco-cluster",
                multus_subnet_arns=SUBNET_ARNS,
                dual_stack_subnet_arns=dual_stack,
            )
        )
    }
    ipv6 = resolved["ManageMultusPodIpv6OnClusterEnis"]
    assert sorted(ipv6["Action"]) == sorted(POD_IPV6_ACTIONS)
    assert ipv6["Resource"] == resolved["ManageMultusPodIpsOnClusterEnis"]["Resource"]
    assert ipv6["Condition"]["StringEquals"][f"ec2:ResourceTag/{OWNER_TAG_KEY}"] == (
        "telco-cluster"
    )
    assert ipv6["Condition"]["ArnEquals"]["ec2:Subnet"] == dual_stack
    assert owner_instance_required(ipv6)
    # The IPv4 statement is the same as without a dual-stack subnet.
    assert resolved["ManageMultusPodIpsOnClusterEnis"]["Condition"]["ArnEquals"] == {
        "ec2:Subnet": SUBNET_ARNS
    }


def test_routes_change_only_in_the_route_tables_of_networks_with_pod_routed_ranges(
    statements: dict[str, dict[str, Any]],
) -> None:
    """Service Authorization Reference, EC2: CreateRoute and ReplaceRoute take only the
    route-table resource (keys: its tags, ec2:RouteTableID, ec2:Vpc); none names the
    destination or the target, so the grant is those route tables by ARN and nothing wider."""
    assert not any(set(POD_ROUTE_ACTIONS) & set(_actions(s)) for s in statements.values())
    tables = ["arn:aws:ec2:us-west-2:111122223333:route-table/rtb-n6a"]
    stack = cdk.Stack(cdk.App(), "NodeRole", env=cdk.Environment(region="us-west-2"))
    resolved = [
        stack.resolve(statement.to_statement_json())
        for statement in multus_pod_ip_policy_statements(
            cluster_name="telco-cluster",
            multus_subnet_arns=SUBNET_ARNS,
            pod_route_table_arns=tables,
        )
    ]
    (routes,) = [s for s in resolved if set(POD_ROUTE_ACTIONS) & set(_actions(s))]
    assert sorted(_actions(routes)) == sorted(POD_ROUTE_ACTIONS)
    assert routes["Resource"] in (tables, tables[0])


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]  # one action: a string, several: a list
    return [actions] if isinstance(actions, str) else list(actions)
