"""Config documents: JSON or YAML, a key given twice refused, YAML's own sharing forms kept."""

from __future__ import annotations

import pytest

from config import ConfigError
from config.documents import load_document

SHARED_SUBNETS = """\
defaults: &zone_a
  cidr: 10.0.4.0/24
  reservation: 10.0.4.32/27
multus:
  networks:
    - name: multus1
      subnets:
        - <<: *zone_a
        - <<: *zone_a
          cidr: 10.0.5.0/24
"""


def test_yaml_merge_keys_share_settings_and_are_no_repeated_key() -> None:
    # YAML 1.1 merge keys (<<) copy an anchored mapping; keys written next to them win.
    document = load_document(SHARED_SUBNETS, "config_file c.yaml", is_json=False)
    assert document["multus"]["networks"][0]["subnets"] == [
        {"cidr": "10.0.4.0/24", "reservation": "10.0.4.32/27"},
        {"cidr": "10.0.5.0/24", "reservation": "10.0.4.32/27"},
    ]


def test_equal_keys_in_different_mappings_are_no_repetition() -> None:
    text = '{"vpc": {"cidr": "10.0.0.0/16"}, "multus": {"cidr": "x"}}'
    assert load_document(text, "f.json", is_json=True)["multus"] == {"cidr": "x"}
    yaml_text = "vpc:\n  cidr: 10.0.0.0/16\nmultus:\n  cidr: x\n"
    assert load_document(yaml_text, "f.yaml", is_json=False)["multus"] == {"cidr": "x"}


@pytest.mark.parametrize(
    ("text", "is_json", "expected"),
    [
        ('{"name": "a", "name": "b"}', True, "f: key 'name' appears twice in one object"),
        ("name: a\nregion: x\nname: b\n", False, "f: key 'name' appears twice (lines 1 and 3)"),
    ],
)
def test_a_key_given_twice_is_named(text: str, is_json: bool, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_document(text, "f", is_json=is_json)
    assert str(error.value).startswith(expected)


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}"])
def test_a_list_or_mapping_as_key_is_refused_as_invalid_yaml(key: str) -> None:
    # YAML allows complex keys ("? [a, b]"); no config key is one.
    with pytest.raises(ConfigError, match=r"(?s)^f: not valid JSON/YAML: .*found unhashable key"):
        load_document(f"? {key}\n: x\n", "f", is_json=False)
