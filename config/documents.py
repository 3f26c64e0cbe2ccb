"""Config files as JSON or YAML documents, with keys that appear twice refused.

Both parsers keep the last of two equal keys silently, so a second `vpc:` block would quietly
replace the first; here that is an error naming the key and where it repeats.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from typing import Any

import yaml

from config.errors import ConfigError


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a mapping key given twice (merge keys `<<` excepted)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node)
            if not isinstance(key, Hashable):
                continue  # a list or mapping as key: SafeLoader refuses it ("unhashable key")
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(f"key {key!r} appears twice (lines {seen[key]} and {line})")
            seen[key] = line
        return super().construct_mapping(node, deep)


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise _DuplicateKey(f"key {repeated[0]!r} appears twice in one object")
    return dict(pairs)


def load_document(text: str, source: str, is_json: bool) -> Any:
    """The parsed document; any problem is a ConfigError that starts with `source`."""
    try:
        if is_json:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    except _DuplicateKey as error:
        raise ConfigError(f"{source}: {error}; keep one and merge what it holds") from None
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"{source}: not valid JSON/YAML: {error}") from None
