"""Tighter validation still lets every documented configuration through, and `-c` values and
unquoted YAML arrive as the values the user meant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from app import build_app
from config import load_config
from config.loader import LoadedConfig
from stages.environment_stage import EnvironmentStage
from tests.conftest import REPO, cdk_json_context


def load(context: dict[str, Any]) -> LoadedConfig:
    return load_config(context, REPO)


def region_document(region: str, letters: str) -> dict[str, Any]:
    return {"region": region, "availability_zones": [region + letter for letter in letters]}


VALID = {
    "default": {},
    "three-az-three-networks": {"config_file": "examples/three-az-three-networks.json"},
    "pipeline-sample": {"config_file": "examples/pipeline-three-environments.json"},
    "ap-northeast-1": {"config": region_document("ap-northeast-1", "cd")},
    "eu-central-1": {"config": region_document("eu-central-1", "bc")},
    "kubernetes-1.35": {"config.cluster.kubernetes_version": "1.35"},
    "kubernetes-1.36": {"config.cluster.kubernetes_version": "1.36"},
    "single-nat-gateway": {"config.vpc.nat_gateways": "single"},
    "own-nad-namespace": {"config.multus.nad_namespace": "telco-nads"},
    "multus-ingress-sources": {
        "config.multus.networks": '[{"name": "n2", "subnets": [{"cidr": "10.0.4.0/24", '
        '"reservation": "10.0.4.32/27"}, {"cidr": "10.0.5.0/24", "reservation": "10.0.5.32/27"}],'
        ' "security_group": {"ingress": [{"protocol": "sctp", "cidr": "10.0.0.0/8"}]}}]'
    },
}


@pytest.mark.parametrize("context", VALID.values(), ids=list(VALID))
def test_documented_configurations_are_valid(context: dict[str, Any]) -> None:
    assert load(context).base is not None


def test_account_id_from_the_command_line_stays_text() -> None:
    assert load({"config.account": "012345678901"}).base.account == "012345678901"


def test_list_fields_take_json_from_the_command_line() -> None:
    config = load({"config.node_pools": '[{"name": "multus", "instance_cpus": [4, 8]}]'}).base
    assert config.node_pools[0].instance_cpus == [4, 8]


def test_unquoted_yaml_version_is_read_as_the_version(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text("cluster:\n  kubernetes_version: 1.35\n")
    config = load_config({"config_file": "env.yaml"}, tmp_path).base
    assert config.cluster.kubernetes_version == "1.35"


def test_utf8_file_with_byte_order_mark(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_bytes(b"\xef\xbb\xbf" + json.dumps({"name": "bom"}).encode())
    assert load_config({"config_file": "env.json"}, tmp_path).base.name == "bom"


def test_only_a_namespace_kubernetes_lacks_is_created() -> None:
    assert load({"config.multus.nad_namespace": "telco-nads"}).base.multus.creates_nad_namespace
    assert not load({}).base.multus.creates_nad_namespace


@pytest.fixture(scope="module")
def eu_central_stage(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentStage:
    """A real synth in a Region the seed never used, with Kubernetes 1.36 and one NAT gateway."""
    context = cdk_json_context(
        config={
            **region_document("eu-central-1", "ac"),
            "cluster": {"kubernetes_version": "1.36"},
            "vpc": {"nat_gateways": "single"},
        }
    )
    app = cdk.App(context=context, outdir=str(tmp_path_factory.mktemp("eu-central-1.out")))
    build_app(app)
    app.synth()
    (stage,) = [c for c in app.node.children if isinstance(c, EnvironmentStage)]
    return stage


def test_eu_central_1_synthesizes_into_its_zones(eu_central_stage: EnvironmentStage) -> None:
    templates = [
        json.loads((Path(eu_central_stage.outdir) / stack.template_file).read_text())
        for stack in eu_central_stage.node.children
        if isinstance(stack, cdk.Stack)
    ]
    subnet_zones = {
        resource["Properties"]["AvailabilityZone"]
        for template in templates
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::EC2::Subnet"
    }
    nat_gateways = [
        resource
        for template in templates
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::EC2::NatGateway"
    ]
    assert subnet_zones == {"eu-central-1a", "eu-central-1c"}
    assert len(nat_gateways) == 1
