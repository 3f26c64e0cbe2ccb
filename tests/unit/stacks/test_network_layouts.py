"""Other layouts synthesize from config alone: 3 AZs x 3 networks, single NAT, isolated Multus."""

from __future__ import annotations

import copy
import json
from typing import Any

import aws_cdk as cdk
import pytest

from config import load_config
from stacks.network_stack import NetworkStack
from tests.conftest import (
    PER_NETWORK_RULES,
    RAN,
    REPO,
    ROUTED_NETWORK_ROUTES,
    ROUTES,
    cdk_json_context,
)
from tests.helpers import resources


def network_template(config_context: dict[str, Any]) -> dict[str, Any]:
    config = load_config(config_context, REPO).base
    app = cdk.App(context=cdk_json_context())
    stack = NetworkStack(app, "Network", config=config, env=cdk.Environment(region=config.region))
    return dict(cdk.assertions.Template.from_stack(stack).to_json())


@pytest.fixture(scope="module")
def three_by_three() -> dict[str, Any]:
    return network_template({"config_file": "examples/three-az-three-networks.json"})


def test_three_azs_three_networks_gives_nine_multus_subnets(three_by_three: dict[str, Any]) -> None:
    multus = [
        s["Properties"]
        for s in resources(three_by_three, "AWS::EC2::Subnet").values()
        if any(
            t["Key"] == "aws-cdk:subnet-name" and t["Value"] in {"signaling", "userplane", "oam"}
            for t in s["Properties"]["Tags"]
        )
    ]
    assert len(multus) == 9
    assert {s["AvailabilityZone"] for s in multus} == {"us-west-2a", "us-west-2b", "us-west-2c"}
    assert len(resources(three_by_three, "AWS::EC2::Subnet")) == 15
    assert len(resources(three_by_three, "AWS::EC2::NatGateway")) == 3


def test_three_azs_three_networks_gives_nine_reservations(three_by_three: dict[str, Any]) -> None:
    reserved = sorted(
        r["Properties"]["Cidr"]
        for r in resources(three_by_three, "Custom::SubnetCidrReservation").values()
    )
    assert reserved == sorted(
        [
            "10.1.20.32/27",
            "10.1.21.32/27",
            "10.1.22.32/27",
            "10.1.30.64/26",
            "10.1.31.64/26",
            "10.1.32.64/26",
            "10.1.40.16/28",
            "10.1.40.144/28",
            "10.1.41.16/28",
        ]
    )


def test_network_without_nat_egress_has_no_default_route(three_by_three: dict[str, Any]) -> None:
    nat_routes = [
        r
        for r in resources(three_by_three, "AWS::EC2::Route").values()
        if "NatGatewayId" in r["Properties"]
    ]
    # 3 node subnets + 2 networks x 3 AZs with NAT egress; the "oam" network has none.
    assert len(nat_routes) == 9


def test_single_nat_gateway_option() -> None:
    template = network_template({"config.vpc.nat_gateways": "single"})
    assert len(resources(template, "AWS::EC2::NatGateway")) == 1


@pytest.fixture(scope="module")
def per_network_rules() -> dict[str, Any]:
    return network_template({"config": PER_NETWORK_RULES})


def group_ids(template: dict[str, Any]) -> dict[str, str]:
    """Network -> logical ID of its group (by the group's Name tag, <app>-<network>)."""
    return {
        tag["Value"].removeprefix("karpenterwithmultus-"): logical_id
        for logical_id, group in resources(template, "AWS::EC2::SecurityGroup").items()
        for tag in group["Properties"].get("Tags", [])
        if tag["Key"] == "Name"
    }


def group_ref(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "GroupId"]}


def test_each_network_group_has_exactly_its_cidr_rules(per_network_rules: dict[str, Any]) -> None:
    """EC2 API Reference, IpPermission: a protocol other than tcp, udp, icmp or icmpv6 (here
    SCTP, 132) allows every port, so its rule carries none; tcp and udp carry FromPort/ToPort."""
    ids = group_ids(per_network_rules)
    groups = resources(per_network_rules, "AWS::EC2::SecurityGroup")
    n2, n3 = (groups[ids[network]]["Properties"] for network in ("n2", "n3"))
    assert n2["SecurityGroupIngress"] == [
        {"CidrIp": RAN, "Description": "N2 from the RAN", "IpProtocol": "132"}
    ]
    assert n2["SecurityGroupEgress"] == [
        {"CidrIp": RAN, "Description": f"to {RAN}", "IpProtocol": "132"}
    ]
    assert n3["SecurityGroupIngress"] == [
        {
            "CidrIp": RAN,
            "Description": f"from {RAN}",
            "FromPort": 2152,
            "ToPort": 2152,
            "IpProtocol": "udp",
        }
    ]
    assert n3["SecurityGroupEgress"] == [
        {
            "CidrIp": RAN,
            "Description": f"to {RAN}",
            "FromPort": 2152,
            "ToPort": 2152,
            "IpProtocol": "udp",
        }
    ]


def test_a_network_as_source_or_destination_is_its_group(per_network_rules: dict[str, Any]) -> None:
    ids = group_ids(per_network_rules)
    ingress = [
        r["Properties"]
        for r in resources(per_network_rules, "AWS::EC2::SecurityGroupIngress").values()
    ]
    egress = [
        r["Properties"]
        for r in resources(per_network_rules, "AWS::EC2::SecurityGroupEgress").values()
    ]
    n2, n3 = group_ref(ids["n2"]), group_ref(ids["n3"])
    assert sorted(ingress, key=str) == sorted(
        [
            {  # a network naming itself: its ENIs reach each other
                "GroupId": n3,
                "SourceSecurityGroupId": n3,
                "IpProtocol": "udp",
                "FromPort": 2152,
                "ToPort": 2152,
                "Description": "from n3 ENIs",
            },
            {
                "GroupId": n3,
                "SourceSecurityGroupId": n2,
                "IpProtocol": "tcp",
                "FromPort": 30000,
                "ToPort": 32767,
                "Description": "from n2 ENIs",
            },
        ],
        key=str,
    )
    assert egress == [
        {
            "GroupId": n3,
            "DestinationSecurityGroupId": n3,
            "IpProtocol": "udp",
            "FromPort": 2152,
            "ToPort": 2152,
            "Description": "to n3 ENIs",
        }
    ]


def test_an_all_traffic_egress_rule_allows_everything_as_the_seed() -> None:
    """aws-cdk refuses an all-traffic egress rule through addEgressRule and renders
    allowAllOutbound instead (aws-cdk-lib aws-ec2/lib/security-group.ts): the rule given in
    the config and the default render the same, and any other egress rule is redundant."""
    rules = [
        {"protocol": -1, "cidr": "0.0.0.0/0"},
        {"protocol": "udp", "ports": 2152, "cidr": RAN},
    ]
    document = {"multus": {"networks": [{**PER_NETWORK_RULES["multus"]["networks"][0]}]}}
    document["multus"]["networks"][0]["security_group"] = {"egress": rules}
    template = network_template({"config": document})
    assert [
        g["Properties"]["SecurityGroupEgress"]
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if "Multus" in g["Properties"]["GroupDescription"]
    ] == [
        [
            {
                "CidrIp": "0.0.0.0/0",
                "Description": "Allow all outbound traffic by default",
                "IpProtocol": "-1",
            }
        ]
    ]


def test_an_empty_ingress_list_admits_nothing() -> None:
    document = {"multus": {"networks": [{**PER_NETWORK_RULES["multus"]["networks"][0]}]}}
    document["multus"]["networks"][0]["security_group"] = {"ingress": []}
    template = network_template({"config": document})
    (group,) = [
        g["Properties"]
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if "Multus" in g["Properties"]["GroupDescription"]
    ]
    assert "SecurityGroupIngress" not in group
    assert not resources(template, "AWS::EC2::SecurityGroupIngress")


def with_routes(routes: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    """The network template of ROUTES with multus1's routes replaced by `routes`."""
    routed = copy.deepcopy(ROUTES)
    routed["multus"]["networks"][0]["routes"] = routes
    return network_template({"config": routed, **settings})


def beyond_the_vpc(template: dict[str, Any]) -> dict[str, str]:
    """Logical ID -> destination of every route that is not a default route."""
    return {
        logical_id: route["Properties"]["DestinationCidrBlock"]
        for logical_id, route in resources(template, "AWS::EC2::Route").items()
        if route["Properties"]["DestinationCidrBlock"] != "0.0.0.0/0"
    }


def test_adding_a_route_keeps_the_logical_ids_of_the_others() -> None:
    # A changed logical ID is a new AWS::EC2::Route and the old one's deletion: CloudFormation
    # creates the new one first, which EC2 refuses (RouteAlreadyExists for that destination).
    before = beyond_the_vpc(with_routes(ROUTED_NETWORK_ROUTES[1:]))
    after = beyond_the_vpc(with_routes(ROUTED_NETWORK_ROUTES))

    assert set(before) < set(after)
    assert sorted(set(after.values()) - set(before.values())) == ["10.200.0.0/16"]
    assert {logical_id: after[logical_id] for logical_id in before} == before


def test_with_a_single_nat_gateway_every_az_routes_to_it() -> None:
    template = with_routes(
        [{"destination": "198.51.100.0/24", "nat_gateway": True}],
        **{"config.vpc.nat_gateways": "single"},
    )
    (gateway,) = resources(template, "AWS::EC2::NatGateway")
    routes = list(resources(template, "AWS::EC2::Route").values())
    nat_routes = [r for r in routes if r["Properties"]["DestinationCidrBlock"] != "0.0.0.0/0"]
    assert len(nat_routes) == 2  # one per AZ
    assert {json.dumps(r["Properties"]["NatGatewayId"]) for r in nat_routes} == {
        json.dumps({"Ref": gateway})
    }


def test_a_network_without_nat_egress_still_routes_its_destinations() -> None:
    routed = copy.deepcopy(ROUTES)
    routed["multus"]["networks"][0]["nat_egress"] = False
    destinations = sorted(beyond_the_vpc(network_template({"config": routed})).values())
    assert destinations == sorted(2 * [r["destination"] for r in ROUTED_NETWORK_ROUTES])


RAN_IPV6 = "2001:db8:100::/48"


def dual_stack_layout(n3: dict[str, Any]) -> dict[str, Any]:
    return {
        "config": {
            "vpc": {"ipv6": True},
            "multus": {
                "networks": [
                    {
                        "name": "n3",
                        "ipv6": {},
                        "subnets": [
                            {"cidr": "10.0.4.0/24", "reservation": "10.0.4.32/27"},
                            {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"},
                        ],
                        **n3,
                    }
                ]
            },
        }
    }


def ipv6_rules(group: dict[str, Any], direction: str) -> list[tuple[Any, str, Any, Any]]:
    return [
        (r["CidrIpv6"], r["IpProtocol"], r.get("FromPort"), r.get("ToPort"))
        for r in group["Properties"].get(f"SecurityGroup{direction}", [])
        if "CidrIpv6" in r
    ]


def test_ipv6_rules_of_a_dual_stack_network_render_as_cidr_ipv6() -> None:
    """EC2 takes an IPv6 peer as CidrIpv6 (EC2 API reference, IpPermission Ipv6Ranges; ICMP
    for IPv6 is icmpv6, types and codes -1 for all); given
    ingress replaces the default (no rule from the VPC's block), given egress is kept as is and
    isolated networks get no egress-only gateway route."""
    template = network_template(
        dual_stack_layout(
            {
                "nat_egress": False,
                "security_group": {
                    "ingress": [
                        {"protocol": "udp", "ports": 2152, "cidr": RAN_IPV6},
                        {"protocol": 58, "cidr": RAN_IPV6},
                    ],
                    "egress": [
                        {"protocol": "udp", "ports": 2152, "cidr": RAN_IPV6},
                        {"protocol": "udp", "ports": 2152, "cidr": RAN},
                    ],
                },
            }
        )
    )
    (group,) = [
        g
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if g["Properties"]["GroupDescription"].startswith("Multus ENIs")
    ]
    # ICMPv6 as a whole: every type and code is -1 (IpPermission, FromPort and ToPort).
    assert ipv6_rules(group, "Ingress") == [
        (RAN_IPV6, "udp", 2152, 2152),
        (RAN_IPV6, "icmpv6", -1, -1),
    ]
    assert ipv6_rules(group, "Egress") == [(RAN_IPV6, "udp", 2152, 2152)]
    ipv4_egress = [r["CidrIp"] for r in group["Properties"]["SecurityGroupEgress"] if "CidrIp" in r]
    assert ipv4_egress == [RAN]
    assert not resources(template, "AWS::EC2::EgressOnlyInternetGateway")
    assert len(resources(template, "AWS::EC2::VPCCidrBlock")) == 1


def test_ipv6_all_traffic_egress_next_to_narrower_ipv4_egress() -> None:
    """Each family's all-traffic rule stands for its family only: aws-cdk's
    allowAllIpv6Outbound, with the IPv4 rules still listed."""
    template = network_template(
        dual_stack_layout(
            {
                "security_group": {
                    "egress": [
                        {"protocol": "all", "cidr": "::/0"},
                        {"protocol": "udp", "ports": 2152, "cidr": RAN},
                    ]
                }
            }
        )
    )
    (group,) = [
        g
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if g["Properties"]["GroupDescription"].startswith("Multus ENIs")
    ]
    assert ipv6_rules(group, "Egress") == [("::/0", "-1", None, None)]
    ipv4 = [r["CidrIp"] for r in group["Properties"]["SecurityGroupEgress"] if "CidrIp" in r]
    assert ipv4 == [RAN]
    assert len(resources(template, "AWS::EC2::EgressOnlyInternetGateway")) == 1
