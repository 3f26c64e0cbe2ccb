"""Config for the lifecycle: cluster names, drain and teardown bounds, the user-data budget."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import config.model
from config import ConfigError, load_config, parse_config
from config.node_bootstrap_plan import (
    USER_DATA_LIMIT_BYTES,
    AzPlacement,
    MultusInterface,
    NodeBootstrapProps,
)
from node_bootstrap.renderer import deployed_size
from tests.conftest import REPO


def error_for(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    return str(caught.value)


def test_cluster_name_derives_from_the_app_name() -> None:
    assert parse_config({}).cluster_name == "eks-karpenterwithmultus"  # the earlier fixed default
    assert parse_config({"name": "lab"}).cluster_name == "eks-lab"
    assert parse_config({"name": "lab", "cluster": {"name": "mine"}}).cluster_name == "mine"


def test_drain_bound_must_fit_the_teardown_bound() -> None:
    message = error_for(
        {
            "node_pools": [{"name": "multus", "termination_grace_period": "1h"}],
            "cluster": {"teardown_timeout_minutes": 30},
        }
    )
    assert "node_pools[0] (multus).termination_grace_period 1h" in message
    assert "cluster.teardown_timeout_minutes (30)" in message
    config_ok = parse_config(
        {
            "node_pools": [{"name": "multus", "termination_grace_period": "40m"}],
            "cluster": {"teardown_timeout_minutes": 50},
        }
    )
    assert config_ok.node_pools[0].termination_grace_period == "40m"


@pytest.mark.parametrize("duration", ["1d", "15", "m15", "1.5h"])
def test_grace_period_uses_karpenters_duration_syntax(duration: str) -> None:
    assert "node_pools[0].termination_grace_period" in error_for(
        {"node_pools": [{"name": "multus", "termination_grace_period": duration}]}
    )


@pytest.mark.parametrize("minutes", [5, 52])
def test_teardown_bound_stays_within_what_cloudformation_waits_for(minutes: int) -> None:
    assert "cluster.teardown_timeout_minutes" in error_for(
        {"cluster": {"teardown_timeout_minutes": minutes}}
    )


def test_duration_seconds() -> None:
    assert config.model.duration_seconds("1h30m15s") == 5415
    assert config.model.duration_seconds("15m") == 900


def test_user_data_over_budget_is_refused_naming_the_fields() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({}, user_data_size=lambda _: USER_DATA_LIMIT_BYTES + 1)
    message = str(refused.value)
    assert "node_pools[0] (multus).networks: with availability_zones" in message
    assert "fewer availability zones or networks in this pool" in message


def test_three_az_three_network_example_fits_the_user_data_budget() -> None:
    example = parse_config(
        json.loads((REPO / "examples" / "three-az-three-networks.json").read_text())
    )
    props = NodeBootstrapProps(
        cluster_name=example.cluster_name,
        interfaces=[
            MultusInterface(n.name, n.device_name, i + 1, security_group_ids=["sg-1"])
            for i, n in enumerate(example.multus.networks)
        ],
        placements={
            az: AzPlacement(["subnet"] * len(example.multus.networks))
            for az in example.availability_zones
        },
    )
    assert deployed_size(props) <= USER_DATA_LIMIT_BYTES


def _pipeline(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(
        (REPO / "examples" / "pipeline-three-environments.json").read_text()
    )
    environments = sample["pipeline"]["environments"]
    same_place = {"account": "222222222222", "region": "us-west-2"}
    environments[:] = [
        {**copy.deepcopy(environments[0]), "name": "blue", **same_place, "overrides": first},
        {**copy.deepcopy(environments[0]), "name": "green", **same_place, "overrides": second},
    ]
    return sample


def test_environments_in_one_account_and_region_get_distinct_cluster_names() -> None:
    loaded = load_config({"config": _pipeline({"name": "blue"}, {"name": "green"})}, REPO)
    assert [e.config.cluster_name for e in loaded.environments] == ["eks-blue", "eks-green"]


def test_one_cluster_name_twice_in_an_account_and_region_is_refused() -> None:
    document = _pipeline(
        {"name": "blue", "cluster": {"name": "shared"}},
        {"name": "green", "cluster": {"name": "shared"}},
    )
    with pytest.raises(ConfigError) as caught:
        load_config({"config": document}, REPO)
    assert "blue and green deploy to 222222222222/us-west-2 with the same cluster name" in str(
        caught.value
    )
    assert "overrides.cluster.name" in str(caught.value)
