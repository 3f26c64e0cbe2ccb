"""examples/existing-vpc.json synthesized: the app adds only the Multus subnets, their route
tables, security groups and reservations to a VPC the network team owns, and selects that VPC's
node subnets by ID."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from config import parse_config
from testing_support.crd_rules import rule_violations
from tests.conftest import EXISTING_VPC, REPO, SynthesizedApp
from tests.helpers import only, resources
from tests.unit.stacks.test_cluster_workloads import by_kind, nad_routes, upstream_schemas

DOCUMENT = json.loads((REPO / EXISTING_VPC).read_text())
EXAMPLE = DOCUMENT["vpc"]["existing"]
NODE_SUBNET_IDS = [subnet["id"] for subnet in EXAMPLE["node_subnets"]]
MULTUS_CIDRS = {
    subnet.cidr: network.name
    for network in parse_config(DOCUMENT).multus.networks
    for subnet in network.subnets
}


@pytest.fixture(scope="module")
def network(existing_vpc_app: SynthesizedApp) -> dict[str, Any]:
    return existing_vpc_app.template_json(existing_vpc_app.stage.network)


@pytest.fixture(scope="module")
def cluster(existing_vpc_app: SynthesizedApp) -> dict[str, Any]:
    return existing_vpc_app.template_json(existing_vpc_app.stage.cluster)


AZS = ("us-west-2a", "us-west-2b")


def test_example_synthesizes_without_nag_findings(existing_vpc_app: SynthesizedApp) -> None:
    assert existing_vpc_app.synth_error is None


def test_nothing_the_network_team_owns_is_created(existing_vpc_app: SynthesizedApp) -> None:
    owned_by_the_network_team = {
        "AWS::EC2::VPC",
        "AWS::EC2::NatGateway",
        "AWS::EC2::EIP",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::FlowLog",
    }
    for path in existing_vpc_app.template_paths():
        template = json.loads(path.read_text())
        assert resources(template, *owned_by_the_network_team) == {}, path.name


def test_the_only_subnets_are_the_multus_subnets_in_the_given_vpc(
    network: dict[str, Any],
) -> None:
    subnets = resources(network, "AWS::EC2::Subnet").values()
    assert sorted(s["Properties"]["CidrBlock"] for s in subnets) == sorted(MULTUS_CIDRS)
    assert {s["Properties"]["VpcId"] for s in subnets} == {EXAMPLE["vpc_id"]}
    for subnet in subnets:
        props = subnet["Properties"]
        name = MULTUS_CIDRS[props["CidrBlock"]]
        assert sorted(props["Tags"], key=lambda tag: tag["Key"]) == [
            {"Key": "Name", "Value": f"karpenterwithmultus-{name}-{props['AvailabilityZone']}"},
            {"Key": "aws-cdk:subnet-name", "Value": name},
        ]


def test_each_multus_subnet_has_its_own_route_table_and_no_user_subnet_is_associated(
    network: dict[str, Any],
) -> None:
    associations = resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    # Refs only: a literal subnet ID would re-associate a subnet the network team owns.
    subnets = [a["Properties"]["SubnetId"]["Ref"] for a in associations]
    tables = [a["Properties"]["RouteTableId"]["Ref"] for a in associations]
    assert sorted(subnets) == sorted(resources(network, "AWS::EC2::Subnet"))
    assert len(set(tables)) == len(tables) == len(MULTUS_CIDRS)
    for table in resources(network, "AWS::EC2::RouteTable").values():
        assert table["Properties"]["VpcId"] == EXAMPLE["vpc_id"]


def test_multus_route_tables_lead_to_the_given_nat_gateways_and_the_ran_transit_gateway(
    network: dict[str, Any],
) -> None:
    """Only nat_egress networks (n6) get a default route, to their AZ's given NAT gateway; n2's
    and n3's route tables lead the RAN range to the team's transit gateway (the control pool
    reaches it over N2, the UPF pool over N3: no pool attaches both)."""
    subnet_of_table = {
        a["Properties"]["RouteTableId"]["Ref"]: network["Resources"][
            a["Properties"]["SubnetId"]["Ref"]
        ]
        for a in resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    routes = {}
    for route in (r["Properties"] for r in resources(network, "AWS::EC2::Route").values()):
        subnet = subnet_of_table[route["RouteTableId"]["Ref"]]["Properties"]
        target = {k: v for k, v in route.items() if k.endswith("Id") and k != "RouteTableId"}
        key = (MULTUS_CIDRS[subnet["CidrBlock"]], subnet["AvailabilityZone"])
        routes[(*key, route["DestinationCidrBlock"])] = target
    nat_a, nat_b = EXAMPLE["nat_gateway_ids"]
    (ran,) = next(n for n in DOCUMENT["multus"]["networks"] if n["name"] == "n3")["routes"]
    to_the_ran = {"TransitGatewayId": ran["transit_gateway_id"]}
    # n2 and n3 have nat_egress false; n6 the default (true).
    assert routes == {
        ("n6", "us-west-2a", "0.0.0.0/0"): {"NatGatewayId": nat_a},
        ("n6", "us-west-2b", "0.0.0.0/0"): {"NatGatewayId": nat_b},
        **{(name, az, ran["destination"]): to_the_ran for name in ("n2", "n3") for az in AZS},
    }


def test_n2_and_n3_pods_route_the_ran_range_over_net1(cluster: dict[str, Any]) -> None:
    """The RAN range in n2's and n3's NADs (IPAM routes, and the pod IP plugin's main-table
    routes), via each subnet's VPC router (base address + 1); n6's NADs do not route it."""
    ran = "10.100.0.0/16"
    routed = {
        name: ipam_routes
        for name, (ipam_routes, _) in nad_routes(cluster).items()
        if ipam_routes is not None
    }
    assert routed == {
        "n2-us-west-2a": [{"dst": ran, "gw": "10.0.64.1"}],
        "n2-us-west-2b": [{"dst": ran, "gw": "10.0.65.1"}],
        "n3-us-west-2a": [{"dst": ran, "gw": "10.0.66.1"}],
        "n3-us-west-2b": [{"dst": ran, "gw": "10.0.67.1"}],
    }
    assert {name: main for name, (_, main) in nad_routes(cluster).items() if main} == routed


def test_security_groups_are_in_the_given_vpc_and_default_to_its_cidr(
    network: dict[str, Any],
) -> None:
    groups = resources(network, "AWS::EC2::SecurityGroup").values()
    assert {g["Properties"]["VpcId"] for g in groups} == {EXAMPLE["vpc_id"]}
    (n6,) = [
        g
        for g in groups
        if {"Key": "Name", "Value": "karpenterwithmultus-n6"} in g["Properties"]["Tags"]
    ]
    assert [rule["CidrIp"] for rule in n6["Properties"]["SecurityGroupIngress"]] == EXAMPLE["cidrs"]


def test_cluster_and_teardown_use_the_given_node_subnets(cluster: dict[str, Any]) -> None:
    vpc_config = only(cluster, "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["SubnetIds"] == NODE_SUBNET_IDS
    in_vpc = [
        f["Properties"]["VpcConfig"]["SubnetIds"]
        for f in resources(cluster, "AWS::Lambda::Function").values()
        if "VpcConfig" in f["Properties"]
    ]
    assert in_vpc and all(ids == NODE_SUBNET_IDS for ids in in_vpc)


def test_node_classes_select_the_node_subnets_by_id(cluster: dict[str, Any]) -> None:
    """EC2NodeClass CRD (shared/reference/karpenter-v1.14.1/crds/
    karpenter.k8s.aws_ec2nodeclasses.yaml, spec.subnetSelectorTerms): a term selects a subnet by
    `id` (mutually exclusive with tags), so the network team's subnets need no discovery tag;
    the schema and its CEL rules accept the terms."""
    schema = upstream_schemas()["EC2NodeClass"]
    node_classes = by_kind(cluster, "EC2NodeClass")
    assert sorted(nc["metadata"]["name"] for nc in node_classes) == ["control", "upf"]
    for node_class in node_classes:
        assert node_class["spec"]["subnetSelectorTerms"] == [{"id": i} for i in NODE_SUBNET_IDS]
        assert list(Draft202012Validator(schema).iter_errors(node_class)) == []
        assert list(rule_violations(node_class, schema)) == []


def test_the_given_vpc_is_checked_for_the_private_endpoints_dns_before_the_cluster(
    existing_vpc_app: SynthesizedApp,
) -> None:
    """EKS user guide, "Cluster API server endpoint": the private endpoint's hosted zone
    resolves only in a VPC with enableDnsSupport and enableDnsHostnames on. The check is in the
    network stack, which the cluster stack depends on (deployed after it)."""
    network = existing_vpc_app.template_json(existing_vpc_app.stage.network)
    (check,) = resources(network, "Custom::VpcDnsCheck").values()
    config = json.loads((REPO / EXISTING_VPC).read_text())
    assert check["Properties"]["VpcId"] == config["vpc"]["existing"]["vpc_id"]
    assert check["Properties"]["ConfigField"] == "vpc.existing.vpc_id"
    assert existing_vpc_app.stage.network in existing_vpc_app.stage.cluster.dependencies


def test_a_vpc_the_app_creates_resolves_the_endpoint_and_needs_no_check(
    default_app: SynthesizedApp,
) -> None:
    network = default_app.template_json(default_app.stage.network)
    assert resources(network, "Custom::VpcDnsCheck") == {}
    (vpc,) = resources(network, "AWS::EC2::VPC").values()
    assert vpc["Properties"]["EnableDnsHostnames"] is True
    assert vpc["Properties"]["EnableDnsSupport"] is True
