"""The pipeline section: environments merged over the base config, and its bad inputs."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from config import ConfigError, load_config
from config.loader import LoadedConfig
from tests.conftest import REPO

SAMPLE: dict[str, Any] = json.loads(
    (REPO / "examples" / "pipeline-three-environments.json").read_text()
)


def load(document: dict[str, Any]) -> LoadedConfig:
    return load_config({"config": document}, REPO)


def broken(change: Any) -> str:
    document = copy.deepcopy(SAMPLE)
    change(document["pipeline"])
    with pytest.raises(ConfigError) as caught:
        load(document)
    return str(caught.value)


def test_sample_pipeline_merges_each_environment_over_the_base() -> None:
    loaded = load(SAMPLE)
    assert loaded.pipeline is not None
    configs = {environment.settings.name: environment.config for environment in loaded.environments}
    assert list(configs) == ["dev", "staging", "production"]
    assert configs["dev"].account == "222222222222"
    assert configs["dev"].vpc.cidr == loaded.base.vpc.cidr == "10.0.0.0/16"
    assert configs["staging"].region == "ap-northeast-1"
    assert configs["staging"].multus.networks[0].subnets[0].reservation == "10.20.4.32/27"
    assert len(configs["production"].availability_zones) == 3
    assert configs["production"].cluster == loaded.base.cluster  # not overridden: inherited


def test_without_pipeline_section_there_are_no_environments() -> None:
    loaded = load({})
    assert loaded.pipeline is None
    assert loaded.environments == []


def test_duplicate_environment_names() -> None:
    message = broken(lambda p: p["environments"][2].update(name="staging"))
    assert "environments: names must be unique; repeated: ['staging']" in message


def test_account_must_have_12_digits() -> None:
    message = broken(lambda p: p["environments"][0].update(account="12345"))
    assert "environments[0].account" in message


def test_environment_azs_must_belong_to_its_region() -> None:
    message = broken(
        lambda p: p["environments"][1].update(availability_zones=["us-west-2a", "us-west-2b"])
    )
    assert "pipeline.environments[1] (staging)" in message
    assert "'us-west-2a' is not an availability zone of ap-northeast-1" in message


def test_pipeline_needs_environments() -> None:
    message = broken(lambda p: p.update(environments=[]))
    assert "environments: List should have at least 1 item" in message


def test_unknown_pipeline_key() -> None:
    message = broken(lambda p: p.update(stages=[]))
    assert "stages: unknown key" in message


def test_environment_override_errors_name_the_environment() -> None:
    message = broken(
        lambda p: p["environments"][0].update(overrides={"vpc": {"cidr": "10.0.0.0/8"}})
    )
    assert "pipeline.environments[0] (dev)" in message
    assert "vpc.cidr" in message


def test_two_environments_in_one_account_and_region_need_distinct_names() -> None:
    def same_place(pipeline: dict[str, Any]) -> None:
        pipeline["environments"][2].update(
            account="333333333333", availability_zones=["ap-northeast-1a", "ap-northeast-1c"]
        )
        pipeline["environments"][2]["overrides"] = pipeline["environments"][1]["overrides"]

    message = broken(same_place)
    assert "staging and production deploy to 333333333333/ap-northeast-1" in message
    assert "the same name 'karpenterwithmultus'; set overrides.name in one of them" in message


def test_pipeline_errors_name_the_pipeline_section() -> None:
    message = broken(lambda p: p["environments"][0].update(account="12345"))
    assert message.startswith("Invalid pipeline config:\n  - pipeline.environments[0].account: ")


def test_two_environments_in_one_place_need_distinct_cluster_names() -> None:
    def one_cluster_name(pipeline: dict[str, Any]) -> None:
        production = pipeline["environments"][2]
        production.update(account="333333333333", region="ap-northeast-1")
        production["availability_zones"] = ["ap-northeast-1a", "ap-northeast-1c"]
        staging_overrides = pipeline["environments"][1]["overrides"]
        staging_overrides["cluster"] = {"name": "shared"}
        production["overrides"] = {**staging_overrides, "name": "production"}

    message = broken(one_cluster_name)
    assert "staging and production deploy to 333333333333/ap-northeast-1" in message
    assert "the same cluster name 'shared'; set overrides.cluster.name in one of them" in message
