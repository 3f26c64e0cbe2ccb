"""`-c config.<dotted.path>=<value>` overrides, read by the type of the field they set.

The CDK CLI hands every `-c` value over as text. Text fields keep it verbatim (an account ID
stays "012345678901", a version "1.30" is not turned into the number 1.3), a number or boolean
field's text is read as its type here (the model takes a value only as its field's type, so
"true" in a JSON file is refused while -c config.x=true works), and list or section fields take
JSON. Keys that cannot work are
refused with the form that does: list indexes (networks[0].name) and two keys where one sets a
section and the other a key inside it.
"""

from __future__ import annotations

import copy
import json
import re
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from config.errors import ConfigError
from config.messages import model_at
from config.model import AppConfig
from config.pipeline import PipelineConfig

OVERRIDE_PREFIX = "config."
_INDEXED = re.compile(r"^(?P<list>[^\[\]]+)\[(?P<index>\d+)\](?P<rest>.*)$")

Path = tuple[str, ...]


def overrides_from_context(
    context: Mapping[str, Any], current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The nested overrides; `current` (the config before them) only improves error hints."""
    entries = [
        (key, _path(key, value, current or {}), value)
        for key, value in context.items()
        if key.startswith(OVERRIDE_PREFIX)
    ]
    _check_no_conflicts(entries)
    nested: dict[str, Any] = {}
    for key, path, value in entries:
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _typed_value(key, path, value)
    return nested


def _path(key: str, value: Any, current: Mapping[str, Any]) -> Path:
    dotted = key.removeprefix(OVERRIDE_PREFIX)
    if "[" in dotted or "]" in dotted:
        raise ConfigError(_index_key_message(key, dotted, value, current))
    path = tuple(dotted.split("."))
    if not all(path):
        raise ConfigError(
            f"-c {key}: empty key between dots; write the field's path, for example "
            "-c config.vpc.nat_gateways=single"
        )
    return path


def _check_no_conflicts(entries: list[tuple[str, Path, Any]]) -> None:
    for outer_key, outer, _ in entries:
        for inner_key, inner, _ in entries:
            if len(outer) < len(inner) and inner[: len(outer)] == outer:
                raise ConfigError(
                    f"-c {outer_key} and -c {inner_key} conflict: the first sets all of "
                    f"{'.'.join(outer)}, the second a key inside it; keep one of them (or put "
                    f"the inner value into the first as JSON)"
                )


def _typed_value(key: str, path: Path, value: Any) -> Any:
    if not isinstance(value, str):
        return value  # already typed (a cdk.json context entry)
    annotation = _field_annotation(path)
    if annotation is None:
        return _decoded(value)  # not a field: the model reports the unknown key
    if value == "null" and _optional(annotation):
        return None
    expected = _json_container(_without_none(annotation))
    if expected is None:
        return _scalar(_without_none(annotation), value)
    decoded = _decoded(value)
    if not isinstance(decoded, expected):
        raise ConfigError(_json_hint(key, value, expected))
    return decoded


def _field_annotation(path: Path) -> Any:
    root: type[BaseModel] = AppConfig
    if path[0] == "pipeline" and len(path) > 1:
        root, path = PipelineConfig, path[1:]
    section = model_at(root, path[:-1])
    if section is None or path[-1] not in section.model_fields:
        return None
    return section.model_fields[path[-1]].annotation


def _optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _without_none(annotation: Any) -> Any:
    if not _optional(annotation):
        return annotation
    members = [member for member in get_args(annotation) if member is not type(None)]
    return members[0] if len(members) == 1 else annotation


def _scalar(annotation: Any, text: str) -> Any:
    """A boolean or number field's text as that type (true, 1, 30, 0.5, as pydantic's lax mode
    reads them); other text as it is, and text that is no such value too: the model then
    refuses it with the rest of the config's problems."""
    if annotation not in (bool, int, float):
        return text  # text, a choice, a union of text and a number: the model reads the text
    try:
        return TypeAdapter(annotation).validate_python(text.strip())
    except ValidationError:
        return text


def _json_container(annotation: Any) -> type[list[Any]] | type[dict[str, Any]] | None:
    """list or dict when the field takes a list or a section/mapping, else None."""
    if get_origin(annotation) is list:
        return list
    if get_origin(annotation) is dict or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel | dict)
    ):
        return dict
    return None


def _decoded(text: str) -> Any:
    """JSON if the text is JSON (except decimals, which stay text: 1.30 is not 1.3)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return text if isinstance(value, float) else value


def _json_hint(key: str, text: str, expected: type) -> str:
    if expected is list:
        items = [_decoded(item.strip()) for item in text.split(",") if item.strip()]
        return (
            f"-c {key}: this field takes a JSON list, not {text!r}; for example "
            f"-c '{key}={json.dumps(items)}'"
        )
    return (
        f"-c {key}: this section takes a JSON object, not {text!r}; set one key with "
        f"-c {key}.<key>=<value>, or give the object, for example -c '{key}={{\"key\": 1}}'"
    )


def _index_key_message(key: str, dotted: str, value: Any, current: Mapping[str, Any]) -> str:
    message = f"-c {key}: list items cannot be addressed by index; give the whole list as JSON"
    indexed = _INDEXED.match(dotted)
    if indexed is None:
        return message + ", for example -c 'config.availability_zones=[\"us-west-2a\", ...]'"
    list_path = indexed.group("list")
    changed = _with_change(
        _lookup(current, list_path.split(".")),
        int(indexed.group("index")),
        indexed.group("rest"),
        _decoded(value) if isinstance(value, str) else value,
    )
    if changed is None:
        return message + f", for example -c 'config.{list_path}=[...]'"
    return message + f" (here with your change):\n    -c 'config.{list_path}={json.dumps(changed)}'"


def _with_change(items: Any, index: int, rest: str, value: Any) -> list[Any] | None:
    """A copy of `items` with `value` at [index] + rest (".a.b"), or None if that is no key."""
    keys = [part for part in rest.split(".") if part]
    if not isinstance(items, list) or index >= len(items) or "[" in rest:
        return None
    changed = copy.deepcopy(items)
    if not keys:
        changed[index] = value
        return changed
    node = changed[index]
    for part in keys[:-1]:
        if not isinstance(node, dict):
            return None
        node = node.setdefault(part, {})
    if not isinstance(node, dict):
        return None
    node[keys[-1]] = value
    return changed


def _lookup(document: Mapping[str, Any], path: list[str]) -> Any:
    node: Any = document
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node
