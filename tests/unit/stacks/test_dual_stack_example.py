"""examples/dual-stack.json synthesized: multus2 dual-stack in a VPC with an IPv6 block, multus1,
the node and the public subnets IPv4 only (docs/network.md, Dual stack)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from testing_support.cloudformation_changes import create_only_paths
from testing_support.crd_rules import rule_violations
from tests.conftest import SynthesizedApp, open_nag_findings
from tests.helpers import resources
from tests.unit.stacks.test_cluster_workloads import manifests, upstream_schemas
from tests.unit.test_compliance import CFN_LINT

DUAL_STACK_SUBNETS = {"us-west-2a": ("10.0.6.0/24", 6), "us-west-2b": ("10.0.7.0/24", 7)}
# Four regions, two of them without AWS::EC2::SubnetCidrReservation in CloudFormation.
LINT_REGIONS = ["us-west-2", "us-east-1", "ap-northeast-1", "eu-central-1"]


@pytest.fixture(scope="module")
def network(dual_stack_app: SynthesizedApp) -> dict[str, Any]:
    return dual_stack_app.template_json(dual_stack_app.stage.network)


@pytest.fixture(scope="module")
def cluster(dual_stack_app: SynthesizedApp) -> dict[str, Any]:
    return dual_stack_app.template_json(dual_stack_app.stage.cluster)


def by_cidr(template: dict[str, Any], resource_type: str) -> dict[str, tuple[str, Any]]:
    return {
        r["Properties"]["CidrBlock"]: (logical_id, r)
        for logical_id, r in resources(template, resource_type).items()
    }


def only_logical_id(template: dict[str, Any], resource_type: str) -> str:
    (logical_id,) = resources(template, resource_type)
    return logical_id


def vpc_ipv6_block(template: dict[str, Any]) -> dict[str, Any]:
    vpc = only_logical_id(template, "AWS::EC2::VPC")
    return {"Fn::Select": [0, {"Fn::GetAtt": [vpc, "Ipv6CidrBlocks"]}]}


def test_example_synthesizes_without_nag_findings(dual_stack_app: SynthesizedApp) -> None:
    assert open_nag_findings(dual_stack_app.validation_report()) == []
    assert dual_stack_app.synth_error is None


def test_cfn_lint_reports_nothing_in_four_regions(dual_stack_app: SynthesizedApp) -> None:
    """cfn-lint's region schemas (AWS's own): AWS::EC2::VPCCidrBlock, the egress-only gateway
    and the IPv6 subnet properties exist in each region; no resource the app uses is missing."""
    templates = [str(path) for path in dual_stack_app.template_paths()]
    result = subprocess.run(
        [str(CFN_LINT), "--format", "json", "--regions", *LINT_REGIONS, "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    assert [f"{f['Rule']['Id']}: {f['Message']}" for f in findings] == []
    assert result.returncode == 0, result.stderr


def test_the_vpc_gets_one_amazon_provided_ipv6_block(network: dict[str, Any]) -> None:
    (block,) = resources(network, "AWS::EC2::VPCCidrBlock").values()
    assert block["Properties"] == {
        "AmazonProvidedIpv6CidrBlock": True,
        "VpcId": {"Ref": only_logical_id(network, "AWS::EC2::VPC")},
    }


def test_the_ipv6_block_is_never_replaced(network: dict[str, Any]) -> None:
    """Every property of AWS::EC2::VPCCidrBlock is createOnly (its resource schema, cfn-lint's
    copy), and ours are the VPC and a constant: the block is replaced only with the VPC, or when
    its logical ID changes. Such a replacement would break the dual-stack subnets: they take
    Fn::Select over the VPC's Ipv6CidrBlocks, an attribute of a VPC that is not updated, so
    CloudFormation leaves them on the old block, whose disassociation EC2 refuses while subnets
    use it. So the logical ID is pinned: moving the construct is a breaking change."""
    create_only = {
        path.removeprefix("/properties/")
        for path in ("/".join(p) for p in create_only_paths("AWS::EC2::VPCCidrBlock"))
    }
    ((logical_id, block),) = resources(network, "AWS::EC2::VPCCidrBlock").items()
    assert logical_id == "NetworkIpv6Block77E60873"
    assert set(block["Properties"]) <= create_only


def test_only_dual_stack_subnets_get_their_fixed_64(network: dict[str, Any]) -> None:
    """Each dual-stack subnet's /64 is number <third octet of its IPv4 CIDR> of the VPC's /56
    (Fn::Cidr of the block into 256 /64s: the aws-cdk-lib aws_ec2.CfnSubnet example; CFN
    template reference, Fn::Cidr), and waits for the block: the VPC's Ipv6CidrBlocks is empty
    until AWS::EC2::VPCCidrBlock is associated (CFN, AWS::EC2::VPC return values)."""
    block_id = only_logical_id(network, "AWS::EC2::VPCCidrBlock")
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    dual_stack = {cidr: index for cidr, index in DUAL_STACK_SUBNETS.values()}
    for cidr, (_, subnet) in subnets.items():
        if cidr not in dual_stack:
            assert "Ipv6CidrBlock" not in subnet["Properties"], cidr
            continue
        assert subnet["Properties"]["Ipv6CidrBlock"] == {
            "Fn::Select": [dual_stack[cidr], {"Fn::Cidr": [vpc_ipv6_block(network), 256, "64"]}]
        }
        assert block_id in subnet["DependsOn"]
    assert len(subnets) == 8


def test_ipv6_egress_leaves_only_dual_stack_subnets_through_the_egress_only_gateway(
    network: dict[str, Any],
) -> None:
    """IPv6 has no NAT: a ::/0 route to an egress-only internet gateway (VPC user guide,
    "Enable outbound IPv6 traffic using an egress-only internet gateway") in the route table
    of each dual-stack subnet with nat_egress, in no other."""
    gateway = only_logical_id(network, "AWS::EC2::EgressOnlyInternetGateway")
    ipv6_routes = [
        r["Properties"]
        for r in resources(network, "AWS::EC2::Route").values()
        if r["Properties"].get("DestinationIpv6CidrBlock") == "::/0"
    ]
    associations = {
        r["Properties"]["SubnetId"]["Ref"]: r["Properties"]["RouteTableId"]
        for r in resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    expected_tables = [associations[subnets[cidr][0]] for cidr, _ in DUAL_STACK_SUBNETS.values()]
    assert sorted(json.dumps(r["RouteTableId"]) for r in ipv6_routes) == sorted(
        json.dumps(table) for table in expected_tables
    )
    for route in ipv6_routes:
        assert route["EgressOnlyInternetGatewayId"] == {"Ref": gateway}


def test_each_dual_stack_subnet_routes_the_ipv6_destination_to_its_target_after_the_block(
    network: dict[str, Any],
) -> None:
    """multus2's route to 2001:db8:45::/48: AWS::EC2::Route takes an IPv6 destination as
    DestinationIpv6CidrBlock (CloudFormation template reference; DestinationCidrBlock is IPv4
    only), here to the appliance's NetworkInterfaceId, in each of its subnets' route tables;
    EC2 routes IPv6 only in a VPC with an IPv6 block, so each route depends on the block
    (and goes before it on delete)."""
    block = only_logical_id(network, "AWS::EC2::VPCCidrBlock")
    associations = {
        r["Properties"]["SubnetId"]["Ref"]: r["Properties"]["RouteTableId"]
        for r in resources(network, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    routes = {
        json.dumps(r["Properties"]["RouteTableId"]): r
        for r in resources(network, "AWS::EC2::Route").values()
        if r["Properties"].get("DestinationIpv6CidrBlock") == "2001:db8:45::/48"
    }
    assert sorted(routes) == sorted(
        json.dumps(associations[subnets[cidr][0]]) for cidr, _ in DUAL_STACK_SUBNETS.values()
    )
    for route in routes.values():
        assert "DestinationCidrBlock" not in route["Properties"]
        assert route["Properties"]["NetworkInterfaceId"] == "eni-0123456789abcdef0"
        assert block in route["DependsOn"]


def security_group(template: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    (match,) = [
        (logical_id, r)
        for logical_id, r in resources(template, "AWS::EC2::SecurityGroup").items()
        if {"Key": "Name", "Value": f"karpenterwithmultus-{name}"} in r["Properties"]["Tags"]
    ]
    return match


def test_dual_stack_group_allows_both_families_as_the_seed_does(network: dict[str, Any]) -> None:
    """The seed's group: all traffic out to 0.0.0.0/0 and ::/0
    (seed-karpenter-with-multus-on-eks cfn-templates/vpc-infra-mng.yaml, SecurityGroupEgress),
    in from the VPC; the IPv6 source is the VPC's block, which exists once associated."""
    _, group = security_group(network, "multus2")
    egress = group["Properties"]["SecurityGroupEgress"]
    assert [(r.get("CidrIp"), r.get("CidrIpv6"), r["IpProtocol"]) for r in egress] == [
        ("0.0.0.0/0", None, "-1"),
        (None, "::/0", "-1"),
    ]
    ingress = group["Properties"]["SecurityGroupIngress"]
    assert [(r.get("CidrIp"), r.get("CidrIpv6"), r["IpProtocol"]) for r in ingress] == [
        ("10.0.0.0/16", None, "-1"),
        (None, vpc_ipv6_block(network), "-1"),
    ]
    assert only_logical_id(network, "AWS::EC2::VPCCidrBlock") in group["DependsOn"]


def test_ipv4_group_stays_ipv4(network: dict[str, Any]) -> None:
    _, group = security_group(network, "multus1")
    rules = group["Properties"]["SecurityGroupEgress"] + group["Properties"]["SecurityGroupIngress"]
    assert [rule for rule in rules if "CidrIpv6" in rule] == []


def test_each_dual_stack_subnet_reserves_its_ipv6_pod_range(network: dict[str, Any]) -> None:
    """An explicit reservation (EC2 API reference, CreateSubnetCidrReservation: Cidr "the IPv4
    or IPV6 CIDR range to reserve") of the configured block of the subnet's own /64."""
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    ipv6 = sorted(
        (r["Properties"]["SubnetId"]["Ref"], json.dumps(r["Properties"]["Ipv6PodRange"]))
        for r in resources(network, "Custom::SubnetCidrReservation").values()
        if "Ipv6PodRange" in r["Properties"]
    )
    expected = []
    for cidr, _ in DUAL_STACK_SUBNETS.values():
        subnet_id = subnets[cidr][0]
        pod_range = {
            "SubnetCidr": {"Fn::Select": [0, {"Fn::GetAtt": [subnet_id, "Ipv6CidrBlocks"]}]},
            "PrefixLength": "112",
            "Offset": "1",
        }
        expected.append((subnet_id, json.dumps(pod_range)))
    assert ipv6 == sorted(expected)


def rendered(value: Any) -> str:
    """Template text with each weak reference shown as @<output name>@ (any other intrinsic
    fails: the NAD reads nothing else of the network stack)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(rendered(part) for part in parts)
    if "Fn::GetStackOutput" in value:
        return f"@{value['Fn::GetStackOutput']['OutputName']}@"
    raise AssertionError(f"unexpected intrinsic {value}")


def nad_configs(cluster: dict[str, Any]) -> dict[str, dict[str, Any]]:
    logical_ids = [  # one manifest per network
        logical_id
        for logical_id, (objects, _) in manifests(cluster).items()
        if any(o["kind"] == "NetworkAttachmentDefinition" for o in objects)
    ]
    return {
        nad["metadata"]["name"]: json.loads(nad["spec"]["config"])
        for logical_id in logical_ids
        for nad in json.loads(rendered(cluster["Resources"][logical_id]["Properties"]["Manifest"]))
    }


def output_value(template: dict[str, Any], reference: str) -> Any:
    return template["Outputs"][reference.strip("@")]["Value"]


def test_dual_stack_nads_carry_both_families_from_deploy_time_values(
    cluster: dict[str, Any], network: dict[str, Any]
) -> None:
    """Whereabouts takes the IPv6 range from ipRanges next to the IPv4 range, as first-last/64
    so the address keeps its subnet's prefix (whereabouts v0.9 pkg/config LoadIPAMConfig). Its
    single gateway goes to every address (cmd/whereabouts.go cmdAdd), which sbr would use for
    the IPv6 one too (containernetworking/plugins plugins/meta/sbr doRoutes), so each family's
    router comes as a route. The range and /64 are weak references to the reservation's and
    the subnet's attributes, never literals."""
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    configs = nad_configs(cluster)
    for az, (cidr, _) in DUAL_STACK_SUBNETS.items():
        ipvlan, sbr, pod_ip = configs[f"multus2-{az}"]["plugins"]
        ipam = ipvlan["ipam"]
        assert "gateway" not in ipam
        assert ipam["range"] == f"{cidr[:-5]}.32-{cidr[:-5]}.63/24"
        ((first_last,),) = [[r["range"]] for r in ipam["ipRanges"]]
        first, last = first_last.removesuffix("/64").split("-")
        (reservation,) = [
            logical_id
            for logical_id, r in resources(network, "Custom::SubnetCidrReservation").items()
            if r["Properties"]["SubnetId"] == {"Ref": subnets[cidr][0]}
            and "Ipv6PodRange" in r["Properties"]
        ]
        assert output_value(network, first) == {"Fn::GetAtt": [reservation, "FirstAddress"]}
        assert output_value(network, last) == {"Fn::GetAtt": [reservation, "LastAddress"]}
        subnet_64 = pod_ip["mainTableSubnetIpv6"]
        assert output_value(network, subnet_64) == {"Fn::GetAtt": [reservation, "SubnetCidr"]}
        ipv4_route, ipv6_route, beyond = ipam["routes"]
        assert ipv4_route == {"dst": "0.0.0.0/0", "gw": f"{cidr[:-5]}.1"}
        assert ipv6_route["dst"] == "::/0"
        router = {"Fn::GetAtt": [reservation, "RouterAddress"]}
        assert output_value(network, ipv6_route["gw"]) == router
        # The network's IPv6 route beyond the VPC, via the same IPv6 router, also in the pod's
        # main table (multus-pod-ip's mainTableRoutes; sbr moved it out with the rest).
        assert beyond["dst"] == "2001:db8:45::/48"
        assert output_value(network, beyond["gw"]) == router
        assert pod_ip["mainTableRoutes"] == [beyond]
        assert sbr == {"type": "sbr"}
        assert pod_ip["mainTableSubnet"] == cidr


def test_ipv4_nads_are_unchanged(cluster: dict[str, Any]) -> None:
    for az, cidr in (("us-west-2a", "10.0.4"), ("us-west-2b", "10.0.5")):
        ipvlan, _, pod_ip = nad_configs(cluster)[f"multus1-{az}"]["plugins"]
        assert ipvlan["ipam"]["gateway"] == f"{cidr}.1"
        assert "ipRanges" not in ipvlan["ipam"]
        assert "routes" not in ipvlan["ipam"]
        assert "mainTableSubnetIpv6" not in pod_ip


def test_every_emitted_object_passes_its_schema_and_cel_rules(cluster: dict[str, Any]) -> None:
    """Upstream CRDs (shared/reference: NetworkAttachmentDefinition, Karpenter v1.14.1) with
    their CEL rules; tokens stand in for the deploy-time values."""
    schemas = upstream_schemas()
    kinds = []
    for objects, _ in manifests(cluster).values():
        for obj in objects:
            if obj["kind"] in schemas:
                assert list(Draft202012Validator(schemas[obj["kind"]]).iter_errors(obj)) == []
                assert list(rule_violations(obj, schemas[obj["kind"]])) == [], obj["kind"]
                kinds.append(obj["kind"])
    assert kinds.count("NetworkAttachmentDefinition") == 4


def agent_configs(cluster: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pool's pod IP agent configuration file, its weak references as @<output>@."""
    found = []
    for logical_id, (objects, _) in manifests(cluster).items():
        if not any(o["kind"] == "ConfigMap" for o in objects):
            continue
        for document in json.loads(
            rendered(cluster["Resources"][logical_id]["Properties"]["Manifest"])
        ):
            if document["kind"] != "ConfigMap":
                continue
            for key, text in (document.get("data") or {}).items():
                if key.endswith(".json") and '"interfaces"' in text:
                    found.append(json.loads(text))
    return found


def test_the_agent_takes_each_dual_stack_subnets_ipv6_pod_range_next_to_its_reservation(
    cluster: dict[str, Any], network: dict[str, Any]
) -> None:
    """The agent assigns only addresses of its interfaces' ranges (multus_pod_ips/agent/config.py),
    so a dual-stack interface lists each AZ's IPv4 reservation and the reserved IPv6 pod range
    (the reservation's Cidr attribute, a deploy-time value); the IPv4-only one its IPv4 ranges."""
    (config,) = agent_configs(cluster)
    subnets = by_cidr(network, "AWS::EC2::Subnet")
    expected_ipv6 = []
    for cidr, _ in DUAL_STACK_SUBNETS.values():
        (reservation,) = [
            logical_id
            for logical_id, r in resources(network, "Custom::SubnetCidrReservation").items()
            if r["Properties"]["SubnetId"] == {"Ref": subnets[cidr][0]}
            and "Ipv6PodRange" in r["Properties"]
        ]
        expected_ipv6.append({"Fn::GetAtt": [reservation, "Cidr"]})
    multus2 = config["interfaces"]["multus2"]
    assert multus2[0::2] == ["10.0.6.32/27", "10.0.7.32/27"]
    assert [output_value(network, reference) for reference in multus2[1::2]] == expected_ipv6
    assert config["interfaces"]["multus1"] == ["10.0.4.32/27", "10.0.5.32/27"]
