"""The default (seed) network: subnets, tags, route tables, reservations, outputs."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from config import parse_config
from tests.conftest import APPLIANCE, TRANSIT_GATEWAY, VPN_GATEWAY, SynthesizedApp
from tests.helpers import resources

SEED = parse_config({})


@pytest.fixture(scope="module")
def network(default_app: SynthesizedApp) -> dict[str, Any]:
    return default_app.template_json(default_app.stage.network)


def tags(resource: dict[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in resource["Properties"].get("Tags", [])}


def subnets_by_group(template: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    grouped: dict[str, list[tuple[str, str]]] = {}
    for subnet in resources(template, "AWS::EC2::Subnet").values():
        group = tags(subnet)["aws-cdk:subnet-name"]
        props = subnet["Properties"]
        grouped.setdefault(group, []).append((props["AvailabilityZone"], props["CidrBlock"]))
    return {group: sorted(entries) for group, entries in grouped.items()}


def test_seed_subnets_have_exactly_the_seed_cidrs(network: dict[str, Any]) -> None:
    assert subnets_by_group(network) == {
        "Public": [("us-west-2a", "10.0.0.0/24"), ("us-west-2b", "10.0.1.0/24")],
        "Nodes": [("us-west-2a", "10.0.2.0/24"), ("us-west-2b", "10.0.3.0/24")],
        "multus1": [("us-west-2a", "10.0.4.0/24"), ("us-west-2b", "10.0.5.0/24")],
        "multus2": [("us-west-2a", "10.0.6.0/24"), ("us-west-2b", "10.0.7.0/24")],
    }


def test_subnet_roles_are_tagged_for_eks_and_karpenter(network: dict[str, Any]) -> None:
    for subnet in resources(network, "AWS::EC2::Subnet").values():
        subnet_tags = tags(subnet)
        group = subnet_tags["aws-cdk:subnet-name"]
        az = subnet["Properties"]["AvailabilityZone"]
        assert subnet_tags["Name"] == f"karpenterwithmultus-{group.lower()}-{az}"
        assert ("kubernetes.io/role/elb" in subnet_tags) == (group == "Public")
        assert ("kubernetes.io/role/internal-elb" in subnet_tags) == (group == "Nodes")
        if group == "Nodes":
            assert subnet_tags["karpenter.sh/discovery"] == SEED.cluster_name
        else:
            assert "karpenter.sh/discovery" not in subnet_tags


def test_every_subnet_has_its_own_route_table(network: dict[str, Any]) -> None:
    associations = resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    route_tables = [a["Properties"]["RouteTableId"]["Ref"] for a in associations]
    subnets = [a["Properties"]["SubnetId"]["Ref"] for a in associations]
    assert len(set(subnets)) == 8
    assert len(set(route_tables)) == 8


def test_nat_gateway_per_az_and_private_routes_stay_in_their_az(network: dict[str, Any]) -> None:
    nat_gateways = resources(network, "AWS::EC2::NatGateway")
    assert len(nat_gateways) == 2
    subnet_az = {
        key: r["Properties"]["AvailabilityZone"]
        for key, r in resources(network, "AWS::EC2::Subnet").items()
    }
    nat_az = {key: subnet_az[r["Properties"]["SubnetId"]["Ref"]] for key, r in nat_gateways.items()}
    table_az = {
        a["Properties"]["RouteTableId"]["Ref"]: subnet_az[a["Properties"]["SubnetId"]["Ref"]]
        for a in resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    nat_routes = [
        r["Properties"]
        for r in resources(network, "AWS::EC2::Route").values()
        if "NatGatewayId" in r["Properties"]
    ]
    assert len(nat_routes) == 6  # 2 node subnets + 4 Multus subnets (seed: Multus egress via NAT)
    for route in nat_routes:
        assert table_az[route["RouteTableId"]["Ref"]] == nat_az[route["NatGatewayId"]["Ref"]]


def test_reservations_equal_the_config(
    default_app: SynthesizedApp, network: dict[str, Any]
) -> None:
    subnet_cidr = {
        key: r["Properties"]["CidrBlock"]
        for key, r in resources(network, "AWS::EC2::Subnet").items()
    }
    reserved = sorted(
        (subnet_cidr[r["Properties"]["SubnetId"]["Ref"]], r["Properties"]["Cidr"])
        for r in resources(network, "Custom::SubnetCidrReservation").values()
    )
    assert reserved == [
        ("10.0.4.0/24", "10.0.4.32/27"),
        ("10.0.5.0/24", "10.0.5.32/27"),
        ("10.0.6.0/24", "10.0.6.32/27"),
        ("10.0.7.0/24", "10.0.7.32/27"),
    ]
    for reservation in resources(network, "Custom::SubnetCidrReservation").values():
        assert reservation["Properties"]["ReservationType"] == "explicit"


def test_reservation_handler_may_create_only_in_multus_subnets(
    default_app: SynthesizedApp, network: dict[str, Any]
) -> None:
    template = default_app.template(default_app.stage.network)
    multus_subnets = {
        key
        for key, r in resources(network, "AWS::EC2::Subnet").items()
        if tags(r)["aws-cdk:subnet-name"].startswith("multus")
    }
    policies = [
        statement
        for policy in resources(network, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ec2:CreateSubnetCidrReservation" in statement["Action"]
    ]
    assert len(policies) == 1
    referenced = {
        part["Ref"]
        for arn in policies[0]["Resource"]
        for part in arn["Fn::Join"][1]
        if isinstance(part, dict) and "Ref" in part and part["Ref"].startswith("Network")
    }
    assert referenced == multus_subnets
    assert policies[0]["Action"] == "ec2:CreateSubnetCidrReservation"
    template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "index.on_event", "Runtime": "python3.14"}
    )


def test_reservation_reads_and_releases_are_on_every_resource_of_the_region_only(
    network: dict[str, Any],
) -> None:
    # IAM has no resource-level permissions for these two: scoped to subnets, AWS denies them.
    (statement,) = [
        statement
        for policy in resources(network, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ec2:GetSubnetCidrReservations" in statement["Action"]
    ]
    assert sorted(statement["Action"]) == [
        "ec2:DeleteSubnetCidrReservation",
        "ec2:GetSubnetCidrReservations",
    ]
    assert statement["Resource"] == "*"
    assert statement["Condition"] == {
        "StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}
    }


def test_every_reservation_waits_for_the_handler_policy(network: dict[str, Any]) -> None:
    (policy_id,) = [
        key
        for key, policy in resources(network, "AWS::IAM::Policy").items()
        if "ec2:CreateSubnetCidrReservation" in str(policy["Properties"]["PolicyDocument"])
    ]
    reservations = resources(network, "Custom::SubnetCidrReservation").values()
    assert len(reservations) == 4
    assert all(policy_id in r.get("DependsOn", []) for r in reservations)


def multus_groups(template: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Network name (the group's Name tag, <app>-<network>) -> (logical ID, properties)."""
    return {
        tags(group)["Name"].removeprefix(f"{SEED.name}-"): (logical_id, group["Properties"])
        for logical_id, group in resources(template, "AWS::EC2::SecurityGroup").items()
        if group["Properties"]["GroupDescription"].startswith("Multus ENIs")
    }


# The seed's one rule pair: all traffic from the VPC CIDR, all traffic out (aws-cdk's own
# description for allowAllOutbound).
SEED_INGRESS = [{"CidrIp": "10.0.0.0/16", "Description": "from 10.0.0.0/16", "IpProtocol": "-1"}]
SEED_EGRESS = [
    {
        "CidrIp": "0.0.0.0/0",
        "Description": "Allow all outbound traffic by default",
        "IpProtocol": "-1",
    }
]


def test_each_network_has_its_own_group_with_the_seeds_rules(network: dict[str, Any]) -> None:
    groups = multus_groups(network)
    assert sorted(groups) == ["multus1", "multus2"]
    for _, properties in groups.values():
        assert properties["SecurityGroupIngress"] == SEED_INGRESS
        assert properties["SecurityGroupEgress"] == SEED_EGRESS
    # No rule outside the groups' own lists in the seed layout.
    assert not resources(network, "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")


def test_the_first_networks_group_is_the_shared_group_of_before(network: dict[str, Any]) -> None:
    """Upgrade safety. GroupDescription (and VpcId) changes replace an AWS::EC2::SecurityGroup
    (CloudFormation template reference, AWS::EC2::SecurityGroup, "Update requires:
    Replacement"), as does a new logical ID; EC2 refuses to delete a group that network
    interfaces still use (EC2 user guide, "Delete a security group"), and the running nodes'
    Multus ENIs keep the old group until Karpenter replaces them. The shared group's logical ID
    and description stay, on the first network's group."""
    logical_id, properties = multus_groups(network)["multus1"]
    assert logical_id == "MultusSecurityGroup0FEC33EF"
    assert properties["GroupDescription"] == "Multus ENIs: traffic from the configured sources"
    assert properties["VpcId"] == {"Ref": "NetworkVpc7FB7348F"}
    other_id, _ = multus_groups(network)["multus2"]
    assert other_id != logical_id


def test_outputs_for_operators_and_later_stacks(network: dict[str, Any]) -> None:
    outputs = network["Outputs"]
    assert {"VpcId", "NodeSubnetIds", "PublicSubnetIds"} <= set(outputs)
    multus_outputs = [name for name in outputs if name.startswith("MultusSubnet")]
    assert len(multus_outputs) == 4
    groups = multus_groups(network)
    assert {
        name: outputs[f"MultusSecurityGroupId{name}"]["Value"]["Fn::GetAtt"][0] for name in groups
    } == {name: logical_id for name, (logical_id, _) in groups.items()}


def test_vpc_flow_logs_enabled(default_app: SynthesizedApp) -> None:
    default_app.template(default_app.stage.network).resource_count_is("AWS::EC2::FlowLog", 1)


@pytest.fixture(scope="module")
def routed_network(routes_app: SynthesizedApp) -> dict[str, Any]:
    return routes_app.template_json(routes_app.stage.network)


def routes_by_table(template: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(subnet group, AZ) of the table -> {destination: the route's target properties}."""
    subnets = resources(template, "AWS::EC2::Subnet")
    table_subnet = {
        a["Properties"]["RouteTableId"]["Ref"]: subnets[a["Properties"]["SubnetId"]["Ref"]]
        for a in resources(template, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    tables: dict[tuple[str, str], dict[str, Any]] = {}
    for route in resources(template, "AWS::EC2::Route").values():
        props = dict(route["Properties"])
        subnet = table_subnet[props.pop("RouteTableId")["Ref"]]
        key = (tags(subnet)["aws-cdk:subnet-name"], subnet["Properties"]["AvailabilityZone"])
        tables.setdefault(key, {})[props.pop("DestinationCidrBlock")] = props
    return tables


def nat_gateway_of_az(template: dict[str, Any], az: str) -> str:
    subnets = resources(template, "AWS::EC2::Subnet")
    (gateway,) = [
        key
        for key, nat in resources(template, "AWS::EC2::NatGateway").items()
        if subnets[nat["Properties"]["SubnetId"]["Ref"]]["Properties"]["AvailabilityZone"] == az
    ]
    return gateway


@pytest.mark.parametrize("az", ["us-west-2a", "us-west-2b"])
def test_each_subnet_of_a_routed_network_routes_its_destinations_to_their_targets(
    routed_network: dict[str, Any], az: str
) -> None:
    """AWS::EC2::Route (CloudFormation template reference): exactly one target property per
    route; a transit gateway is TransitGatewayId, a virtual private gateway GatewayId ("an
    internet gateway or virtual private gateway attached to your VPC"), a network interface
    NetworkInterfaceId, a NAT gateway NatGatewayId (this AZ's: traffic stays in its AZ)."""
    assert routes_by_table(routed_network)[("multus1", az)] == {
        "0.0.0.0/0": {"NatGatewayId": {"Ref": nat_gateway_of_az(routed_network, az)}},
        "10.200.0.0/16": {"TransitGatewayId": TRANSIT_GATEWAY},
        "10.201.0.0/16": {"GatewayId": VPN_GATEWAY},
        "10.202.0.0/24": {"NetworkInterfaceId": APPLIANCE},
        "198.51.100.0/24": {"NatGatewayId": {"Ref": nat_gateway_of_az(routed_network, az)}},
    }


def test_networks_without_routes_keep_only_their_default_route(
    routed_network: dict[str, Any], network: dict[str, Any]
) -> None:
    routed = routes_by_table(routed_network)
    for key, table in routes_by_table(network).items():
        if key[0] != "multus1":
            assert routed[key] == table, key
        assert list(table) == ["0.0.0.0/0"], key


def test_deploy_shows_what_gateway_routes_need_attached_first(routes_app: SynthesizedApp) -> None:
    # config.route_preconditions (tests/unit/config/test_valid_edges.py names the source):
    # the transit gateway's and the virtual private gateway's routes, not the others.
    warnings = Annotations.from_stack(routes_app.stage.network).find_warning(
        "*", Match.string_like_regexp(r"multus\.networks\[0\] \(multus1\)\.routes\[\d\]: ")
    )
    texts = [str(warning.entry.data) for warning in warnings]
    assert len(texts) == 2, texts
    assert any(TRANSIT_GATEWAY in text for text in texts)
    assert any(VPN_GATEWAY in text for text in texts)


def test_the_default_network_is_ipv4_only(network: dict[str, Any]) -> None:
    """vpc.ipv6 is off by default: no IPv6 block, egress-only gateway, subnet /64, IPv6 rule or
    IPv6 reservation (the dual-stack example adds them: test_dual_stack_example.py)."""
    assert not resources(network, "AWS::EC2::VPCCidrBlock", "AWS::EC2::EgressOnlyInternetGateway")
    text = str(network["Resources"])
    for ipv6_key in ("Ipv6CidrBlock", "CidrIpv6", "DestinationIpv6CidrBlock", "Ipv6PodRange"):
        assert ipv6_key not in text
