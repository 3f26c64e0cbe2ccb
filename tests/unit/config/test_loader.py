"""Loading the config from CDK context: cdk.json object, config file, `-c config.x=y` values."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from config import ConfigError, load_config
from config.loader import deep_merge
from config.overrides import overrides_from_context

REPO = Path(__file__).resolve().parents[3]


def test_empty_context_gives_the_seed_defaults() -> None:
    assert load_config({}, REPO).base.availability_zones == ["us-west-2a", "us-west-2b"]


def test_cdk_json_object_then_file_then_dotted_overrides(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text(
        json.dumps({"cluster": {"kubernetes_version": "1.35"}, "name": "from-file"})
    )
    config = load_config(
        {
            "config": {"name": "from-cdk-json", "karpenter": {"replicas": 3}},
            "config_file": "env.json",
            "config.name": "from-cli",
            "config.cluster.system_node_group.max_size": "5",
            "config.cluster.system_node_group.desired_size": "3",
        },
        tmp_path,
    ).base
    assert config.name == "from-cli"
    assert config.cluster.kubernetes_version == "1.35"
    assert config.karpenter.replicas == 3
    assert config.cluster.system_node_group.max_size == 5
    assert config.cluster.system_node_group.desired_size == 3


def test_yaml_config_file(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text("vpc:\n  nat_gateways: single\n")
    assert load_config({"config_file": "env.yaml"}, tmp_path).base.vpc.nat_gateways == "single"


def test_override_values_keep_decimal_versions_as_text() -> None:
    nested = overrides_from_context(
        {"config.cluster.kubernetes_version": "1.30", "config.availability_zones": '["a","b"]'}
    )
    assert nested == {"cluster": {"kubernetes_version": "1.30"}, "availability_zones": ["a", "b"]}


def test_deep_merge_replaces_lists_and_merges_mappings() -> None:
    merged = deep_merge({"a": {"b": 1, "c": [1, 2]}}, {"a": {"c": [3]}})
    assert merged == {"a": {"b": 1, "c": [3]}}


def test_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config_file .*nope\.json: no such file"):
        load_config({"config_file": "nope.json"}, tmp_path)


def test_invalid_override_is_reported_with_its_path() -> None:
    with pytest.raises(ConfigError, match=r"vpc\.nat_gateways"):
        load_config({"config.vpc.nat_gateways": "two"}, REPO)


def test_documented_three_az_example_is_valid() -> None:
    config = load_config({"config_file": "examples/three-az-three-networks.json"}, REPO).base
    assert len(config.availability_zones) == 3
    assert [network.name for network in config.multus.networks] == [
        "signaling",
        "userplane",
        "oam",
    ]


def test_cli_pins_are_read_from_package_json(tmp_path: Path) -> None:
    from config.loader import pinned_npm_version

    (tmp_path / "package.json").write_text('{"devDependencies": {"aws-cdk": "2.1148.1"}}')
    assert pinned_npm_version(tmp_path, "aws-cdk") == "2.1148.1"
    (tmp_path / "package.json").write_text('{"devDependencies": {"aws-cdk": "^2.1148.1"}}')
    with pytest.raises(ConfigError, match=r"devDependencies.aws-cdk must be an exact version"):
        pinned_npm_version(tmp_path, "aws-cdk")


@pytest.mark.parametrize(
    ("base", "override"),
    [({"a": {"b": 1}}, {"a": None}), ({"a": "text"}, {"a": {"b": 2}})],
)
def test_deep_merge_later_value_wins_over_another_kind(
    base: dict[str, object], override: dict[str, object]
) -> None:
    assert deep_merge(base, override) == override


def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # Windows editors save UTF-8 with a BOM; JSON parsers refuse it unless it is dropped.
    (tmp_path / "env.json").write_bytes(b"\xef\xbb\xbf" + b'{"name": "bom"}')
    assert load_config({"config_file": "env.json"}, tmp_path).base.name == "bom"


def test_a_json_file_is_read_as_json_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text("name: yaml-syntax\n")
    with pytest.raises(ConfigError, match=r"env\.json: not valid JSON/YAML"):
        load_config({"config_file": "env.json"}, tmp_path)


def test_config_file_must_be_a_path() -> None:
    with pytest.raises(ConfigError, match=r"config_file must be a path, not 5"):
        load_config({"config_file": 5}, REPO)


def test_errors_name_the_document_they_are_in() -> None:
    with pytest.raises(ConfigError) as error:
        load_config({"config.vpc.nat_gateways": "two"}, REPO)
    assert str(error.value).startswith("Invalid config:\n  - vpc.nat_gateways: ")


def test_the_cdk_cli_packages_are_the_ones_package_json_pins() -> None:
    # npm names: aws-cdk is the CDK CLI, cdk-assets publishes the assets in the pipeline.
    from config.loader import CDK_ASSETS_PACKAGE, CDK_CLI_PACKAGE, pinned_npm_version

    pinned = json.loads((REPO / "package.json").read_text())["devDependencies"]
    assert pinned_npm_version(REPO, CDK_CLI_PACKAGE) == pinned["aws-cdk"]
    assert pinned_npm_version(REPO, CDK_ASSETS_PACKAGE) == pinned["cdk-assets"]


def test_the_loaded_config_cannot_be_changed_after_validation() -> None:
    # Every stage reads the same objects: what was validated is what gets built.
    loaded = load_config({"config_file": "examples/pipeline-three-environments.json"}, REPO)
    with pytest.raises(FrozenInstanceError):
        loaded.base = loaded.environments[0].config  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        loaded.environments[0].config = loaded.base  # type: ignore[misc]
