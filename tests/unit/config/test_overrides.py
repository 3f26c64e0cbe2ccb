"""`-c config.<path>=<value>` overrides: read by the type of the field they set, and every refusal
offers a form that works (fed back, the suggested command gives the config that was meant)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from config import ConfigError, load_config
from config.model import AppConfig
from config.overrides import overrides_from_context

REPO = Path(__file__).resolve().parents[3]
PIPELINE_SAMPLE = REPO / "examples" / "pipeline-three-environments.json"


def refusal(context: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        load_config(context, REPO)
    return str(error.value)


def suggested(message: str, list_path: str) -> Any:
    """The JSON value of the `-c 'config.<list_path>=<json>'` command a message suggests."""
    match = re.search(rf"-c 'config\.{re.escape(list_path)}=(.*?)'$", message, re.MULTILINE)
    assert match, message
    return json.loads(match.group(1))


def test_a_list_item_set_by_index_is_refused_with_the_whole_list_that_works() -> None:
    message = refusal({"config.multus.networks[1].name": "userplane"})
    networks = suggested(message, "multus.networks")
    config = load_config({"config.multus.networks": json.dumps(networks)}, REPO).base
    seed = AppConfig().multus.networks
    assert [network.name for network in config.multus.networks] == ["multus1", "userplane"]
    assert config.multus.networks[1].subnets == seed[1].subnets


def test_an_index_into_a_list_of_text_suggests_the_changed_list() -> None:
    message = refusal({"config.availability_zones[1]": "us-west-2c"})
    assert suggested(message, "availability_zones") == ["us-west-2a", "us-west-2c"]


@pytest.mark.parametrize(
    "key",
    [
        "config.availability_zones[2]",  # past the end of the two seed zones
        "config.multus.networks[0].subnets[1].cidr",  # a second index: no single list to give
        "config.multus.networks[0].name.first",  # below a text value
        "config.multus.networks[0].name.first.second",
        "config.name.first[0]",  # the path to the list runs through a text value
    ],
)
def test_an_index_that_cannot_be_applied_gets_the_general_form(key: str) -> None:
    message = refusal({key: "x"})
    assert "list items cannot be addressed by index" in message
    assert "here with your change" not in message
    assert re.search(r"for example -c 'config\.[a-z_.]+=\[\.\.\.\]'$", message), message


@pytest.mark.parametrize("key", ["config.availability_zones[x]", "config.vpc]", "config.vpc["])
def test_brackets_in_a_key_are_refused_even_without_an_index(key: str) -> None:
    message = refusal({key: "x"})
    assert f"-c {key}: list items cannot be addressed by index" in message
    # No list named: the example shows the form with one that is.
    assert message.endswith(
        "give the whole list as JSON, for example "
        """-c 'config.availability_zones=["us-west-2a", ...]'"""
    )


def test_the_suggestion_needs_the_config_before_the_overrides() -> None:
    # Without the current config there is no list to change: the general form.
    with pytest.raises(ConfigError, match=r"config\.availability_zones=\[\.\.\.\]'$"):
        overrides_from_context({"config.availability_zones[1]": "us-west-2c"})


@pytest.mark.parametrize("key", ["config.vpc..cidr", "config.vpc.", "config."])
def test_an_empty_key_between_dots_is_refused(key: str) -> None:
    assert "empty key between dots" in refusal({key: "10.0.0.0/16"})


def test_a_section_and_a_key_inside_it_conflict() -> None:
    message = refusal({"config.vpc": '{"cidr": "10.0.0.0/16"}', "config.vpc.nat_gateways": "one"})
    assert "-c config.vpc and -c config.vpc.nat_gateways conflict" in message


def test_two_keys_side_by_side_do_not_conflict() -> None:
    config = load_config(
        {"config.vpc.nat_gateways": "single", "config.vpc.flow_log_retention": "ONE_WEEK"}, REPO
    ).base
    assert (config.vpc.nat_gateways, config.vpc.flow_log_retention) == ("single", "ONE_WEEK")


def test_a_section_takes_a_json_object() -> None:
    config = load_config({"config.vpc": '{"nat_gateways": "single"}'}, REPO).base
    assert config.vpc.nat_gateways == "single"


def test_a_nested_list_field_refuses_comma_text_with_a_json_list_that_works() -> None:
    value = "10.0.0.0/24,10.0.1.0/24"
    message = refusal({"config.vpc.public_subnet_cidrs": value})
    assert "this field takes a JSON list" in message
    cidrs = suggested(message, "vpc.public_subnet_cidrs")
    assert cidrs == ["10.0.0.0/24", "10.0.1.0/24"]
    config = load_config({"config.vpc.public_subnet_cidrs": json.dumps(cidrs)}, REPO).base
    assert config.vpc.public_subnet_cidrs == cidrs


def test_null_clears_an_optional_field() -> None:
    context = {"config": {"cluster": {"public_access_cidrs": ["203.0.113.0/24"]}}}
    cleared = {**context, "config.cluster.public_access_cidrs": "null"}
    assert load_config(context, REPO).base.cluster.public_access_cidrs == ["203.0.113.0/24"]
    assert load_config(cleared, REPO).base.cluster.public_access_cidrs is None


def test_an_optional_list_field_takes_a_json_list() -> None:
    context = {"config.cluster.public_access_cidrs": '["203.0.113.0/24"]'}
    assert load_config(context, REPO).base.cluster.public_access_cidrs == ["203.0.113.0/24"]


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("config.name", "null"),  # a text field that is not optional keeps "null" as text
        ("config.cluster.name", "true"),  # not the boolean JSON would make of it
        ("config.account", "111122223333"),  # optional text: not the number 111122223333
    ],
)
def test_text_fields_keep_the_text_verbatim(key: str, text: str) -> None:
    config = load_config({key: text}, REPO).base
    section: Any = config
    for part in key.split(".")[1:]:
        section = getattr(section, part)
    assert section == text


@pytest.mark.parametrize(
    ("key", "text", "value"),
    [
        ("config.monitoring.prometheus_operator", "true", True),
        ("config.monitoring.prometheus_operator", "False", False),
        ("config.karpenter.spot_service_linked_role", "false", False),
        ("config.karpenter.replicas", "1", 1),
        ("config.cluster.teardown_timeout_minutes", " 45 ", 45),
        ("config.cluster.system_node_group.root_volume_gib", "16384", 16384),
    ],
)
def test_boolean_and_number_fields_read_their_command_line_text_as_their_type(
    key: str, text: str, value: object
) -> None:
    # The CLI hands -c values over as text; the model takes values only as their field's type
    # (a JSON "true" is refused), so the override types the text first.
    nested = overrides_from_context({key: text})
    section: Any = nested
    for part in key.split(".")[1:]:
        section = section[part]
    assert section == value and type(section) is type(value)
    config: Any = load_config({key: text}, REPO).base
    for part in key.split(".")[1:]:
        config = getattr(config, part)
    assert config == value


def test_command_line_text_that_is_no_number_is_left_to_the_model() -> None:
    # Refused with the config's other problems (all at once), naming the field and the text.
    assert overrides_from_context({"config.karpenter.replicas": "two"}) == {
        "karpenter": {"replicas": "two"}
    }
    message = refusal(
        {"config.karpenter.replicas": "two", "config.monitoring.prometheus_operator": "2"}
    )
    assert "karpenter.replicas: 'two' is text, but this field takes a whole number" in message
    assert (
        "monitoring.prometheus_operator: '2' is text, but this field takes true or false" in message
    )


def pipeline_context(**overrides: str) -> dict[str, Any]:
    return {"config_file": str(PIPELINE_SAMPLE), **overrides}


def test_pipeline_fields_are_read_by_their_own_types() -> None:
    loaded = load_config(
        pipeline_context(
            **{
                "config.pipeline.tooling_account": "444455556666",
                "config.pipeline.source.branch": "true",
            }
        ),
        REPO,
    )
    assert loaded.pipeline is not None
    assert loaded.pipeline.tooling_account == "444455556666"
    assert loaded.pipeline.source.branch == "true"


def test_the_whole_pipeline_section_takes_a_json_object() -> None:
    pipeline = json.loads(PIPELINE_SAMPLE.read_text())["pipeline"]
    loaded = load_config({"config.pipeline": json.dumps({**pipeline, "name": "other"})}, REPO)
    assert loaded.pipeline is not None and loaded.pipeline.name == "other"


def test_typed_context_values_are_taken_as_they_are() -> None:
    # cdk.json context entries arrive typed: a list stays a list, a number a number.
    nested = overrides_from_context(
        {"config.availability_zones": ["a", "b"], "config.karpenter.replicas": 3, "other": "x"}
    )
    assert nested == {"availability_zones": ["a", "b"], "karpenter": {"replicas": 3}}


def test_a_key_inside_a_section_of_a_list_item_is_set_in_the_suggestion() -> None:
    key = "config.pipeline.environments[0].overrides.name"
    environments = suggested(refusal(pipeline_context(**{key: "dev-app"})), "pipeline.environments")
    fixed = pipeline_context(**{"config.pipeline.environments": json.dumps(environments)})
    loaded = load_config(fixed, REPO)
    assert [e.config.name for e in loaded.environments] == [
        "dev-app",
        "karpenterwithmultus",
        "karpenterwithmultus",
    ]
    assert loaded.environments[0].settings.account == "222222222222"


def test_every_section_takes_values_only_as_their_fields_type() -> None:
    # StrictModel spells STRICT_SECTION out (for mypy); the logs and images sections use it.
    from config.coercion import STRICT_SECTION
    from config.images import ImagesConfig
    from config.logs import LogsConfig
    from config.model.base import StrictModel

    for section in (StrictModel, LogsConfig, ImagesConfig):
        assert section.model_config == STRICT_SECTION, section
