"""Other layouts synthesize from config alone: 3 AZs x 3 networks, single NAT, isolated Multus."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest

from config import load_config
from stacks.network_stack import NetworkStack
from tests.conftest import REPO, cdk_json_context
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


def test_custom_multus_ingress_sources() -> None:
    template = network_template(
        {"config.multus.security_group_ingress_cidrs": '["10.0.4.0/22", "192.168.0.0/16"]'}
    )
    (group,) = [
        g
        for g in resources(template, "AWS::EC2::SecurityGroup").values()
        if "Multus" in g["Properties"]["GroupDescription"]
    ]
    assert sorted(rule["CidrIp"] for rule in group["Properties"]["SecurityGroupIngress"]) == [
        "10.0.4.0/22",
        "192.168.0.0/16",
    ]
