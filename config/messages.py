"""Validation errors in plain words: the field's path, what is wrong and how to fix it.

pydantic reports a pattern mismatch with the regular expression and an unknown key as "extra
inputs are not permitted"; here the first becomes the pattern's words and an example
(config/patterns.py), the second names the closest accepted key, and a cross-field error whose
message starts with a field path ("region: ...") is filed under that field.
"""

from __future__ import annotations

import difflib
import json
import re
import types
from typing import Any, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from config.patterns import PLAIN_PATTERNS

Location = tuple[int | str, ...]

#: json_schema_extra keys naming what a number field counts, in the plural and for 1
#: (config/model/base.py unit()): its bounds' messages and the reference page name it.
UNIT_KEY, UNIT_ONE_KEY = "unit", "unit_one"

# "multus.networks[1] (multus2).subnets: ..." or "region: ...": a path the message names.
_SEGMENT = r"[a-z_][a-z0-9_]*(?:\[\d+\])*(?: \([^)]*\))?"
_PATH_PREFIX = re.compile(rf"^({_SEGMENT}(?:\.{_SEGMENT})*): ")


def describe_errors(
    error: ValidationError, source: str, model: type[BaseModel], section: str = ""
) -> str:
    """One line per problem; `section` is where `model` sits in the document (e.g. pipeline)."""
    lines = [f"Invalid {source}:"]
    for detail in error.errors():
        for path, message in _describe(detail, model):
            lines.append(f"  - {_dotted(section, path) or '(top level)'}: {message}")
    return "\n".join(lines)


def format_location(location: Location) -> str:
    return "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in location
    ).removeprefix(".")


def _dotted(*paths: str) -> str:
    """Paths joined with dots; an empty one (the top level) adds nothing."""
    return ".".join(path for path in paths if path)


def _describe(detail: ErrorDetails, model: type[BaseModel]) -> list[tuple[str, str]]:
    """(path, message) per problem; a validator may report several, one per line."""
    location: Location = tuple(detail["loc"])
    message = detail["msg"].removeprefix("Value error, ")
    kind = detail["type"]
    if kind == "extra_forbidden":
        message = _unknown_key(location, model)
    elif kind == "string_pattern_mismatch":
        message = _pattern_mismatch(detail)
    elif kind == "string_type" and isinstance(detail["input"], bool):
        message = (
            f"{detail['input']!r} arrived as a boolean (YAML reads yes/no/on/off that way), but "
            "this field takes text; put it in quotes"
        )
    elif kind == "string_type" and isinstance(detail["input"], int | float):
        message = (
            f"{detail['input']!r} arrived as a number, but this field takes text; "
            f'put it in quotes, for example "{detail["input"]}"'
        )
    elif kind in _SCALAR_TAKES:
        message = _wrong_scalar(kind, detail["input"])
    elif kind in _BOUND_KINDS and (bounded := _field_at(model, location)) is not None:
        message = _out_of_bounds(kind, detail["input"], bounded)
    if _only_whitespace_wrong(detail):
        return [(format_location(location), surrounding_whitespace(detail["input"]))]
    path = format_location(location)
    if kind != "value_error":
        return [(path, message)]
    section = model_at(model, location)
    return [_file_under_named_field(path, section, line) for line in message.split("\n")]


_BOUND_KINDS = ("greater_than_equal", "greater_than", "less_than_equal", "less_than")


def _field_at(model: type[BaseModel], location: Location) -> FieldInfo | None:
    """The field at `location` (its last part a field name), or None."""
    section = model_at(model, location[:-1])
    if section is None or not location or not isinstance(location[-1], str):
        return None
    return section.model_fields.get(location[-1])


def counted(number: object, field: FieldInfo | None) -> str:
    """`number` with its field's unit (30 minutes, 1 minute, 20 GiB); bare without one."""
    extra = field.json_schema_extra if field is not None else None
    if not isinstance(extra, dict) or UNIT_KEY not in extra:
        return str(number)
    unit = extra.get(UNIT_ONE_KEY) if number == 1 else extra[UNIT_KEY]
    return f"{number} {unit or extra[UNIT_KEY]}"


def bounds_text(field: FieldInfo) -> str:
    """What a bounded number field takes, with its unit: at least 10 minutes, 1 to 100."""
    low = high = None
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            low = f"at least {counted(item.ge, field)}"
        elif isinstance(item, annotated_types.Gt):
            low = f"more than {counted(item.gt, field)}"
        elif isinstance(item, annotated_types.Le):
            high = f"at most {counted(item.le, field)}"
        elif isinstance(item, annotated_types.Lt):
            high = f"less than {counted(item.lt, field)}"
    if low and high and low.startswith("at least ") and high.startswith("at most "):
        # 1 to 100, 30 to 432000 seconds: the unit once, after the upper bound.
        return f"{low.split(' ')[2]} to {high.removeprefix('at most ')}"
    return " and ".join(part for part in (low, high) if part)


def _out_of_bounds(kind: str, value: object, field: FieldInfo) -> str:
    side = "below" if kind.startswith("greater") else "above"
    return f"{counted(value, field)} is {side} what this field takes: {bounds_text(field)}"


def _only_whitespace_wrong(detail: ErrorDetails) -> bool:
    """A pattern or a choice that the text misses only by its surrounding whitespace."""
    text, context = detail["input"], detail.get("ctx") or {}
    if not isinstance(text, str) or text == text.strip():
        return False
    if detail["type"] == "string_pattern_mismatch":
        return re.search(str(context.get("pattern", "")), text.strip()) is not None
    if detail["type"] == "literal_error":
        return repr(text.strip()) in str(context.get("expected", ""))
    return False


def surrounding_whitespace(text: str) -> str:
    """The refusal of a value with whitespace around it (a CIDR's "'16 ' is not a valid
    netmask" would not say so); validators of text where a space is no part of any value
    (CIDRs, addresses) raise it first."""
    ends = [end for end, side in (("start", text.lstrip()), ("end", text.rstrip())) if side != text]
    return (
        f"{text!r} has surrounding whitespace (at its {' and its '.join(ends)}), which this "
        f"field does not take; write {text.strip()!r}"
    )


def refuse_surrounding_whitespace(text: str) -> None:
    """Raise surrounding_whitespace's refusal if `text` has any (a validator's first check)."""
    if text != text.strip():
        raise ValueError(surrounding_whitespace(text))


# What a boolean or number field takes, in the words of a JSON or YAML document.
_SCALAR_TAKES = {
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
}
_TRUE_WORDS = ("true", "yes", "on", "y", "t", "1")
_FALSE_WORDS = ("false", "no", "off", "n", "f", "0")


def _wrong_scalar(kind: str, value: Any) -> str:
    """A value of another type where a boolean or number is meant: the config takes each value
    only as its field's type (config/coercion.py, STRICT_SECTION), so say what it is and what
    to write instead."""
    takes = _SCALAR_TAKES[kind]
    if isinstance(value, str):
        return f"{value!r} is text, but this field takes {takes}; {_unquoted(kind, value)}"
    if isinstance(value, bool):
        return f"{_json(value)} is a boolean, but this field takes {takes}, for example 2"
    if isinstance(value, int | float) and kind == "bool_type":
        return f"{_json(value)} is a number, but this field takes true or false (no quotes)"
    if isinstance(value, float) and value.is_integer():
        return f"{value!r} has a decimal point, but this field takes {takes}; write {int(value)}"
    if isinstance(value, float):
        return f"{value!r} is not {takes}; write one, for example {round(value)}"
    shape = (
        "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else None
    )
    return f"{shape or _json(value)} given, but this field takes {takes}"


def _unquoted(kind: str, text: str) -> str:
    """The fix of a boolean or number written as text."""
    word = text.strip().lower()
    if kind == "bool_type":
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            meant = "true" if word in _TRUE_WORDS else "false"
            return f"write {meant} without quotes"
        return "write true or false without quotes"
    number = _number(text.strip(), whole=kind == "int_type")
    if number is None:
        example = "2" if kind == "int_type" else "0.5"
        return f"write one without quotes, for example {example}"
    return f"write {number} without quotes"


def _number(text: str, whole: bool) -> str | None:
    """`text` as the number it spells (whole numbers only if `whole`), or None."""
    pattern = r"[+-]?[0-9]+" if whole else r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    if not re.fullmatch(pattern, text):
        return None
    return str(int(text)) if whole else text


def _json(value: Any) -> str:
    """A scalar as a JSON document spells it (true, not Python's True)."""
    return json.dumps(value) if isinstance(value, bool | None) else repr(value)


def _file_under_named_field(
    path: str, section: type[BaseModel] | None, message: str
) -> tuple[str, str]:
    """A message "field.sub: text" from a section's validator is filed under that field."""
    named = _PATH_PREFIX.match(message)
    if named is None or section is None:
        return path, message
    first_field = re.split(r"[.\[ ]", named.group(1))[0]
    if first_field not in section.model_fields:
        return path, message
    return _dotted(path, named.group(1)), message[named.end() :]


def _pattern_mismatch(detail: ErrorDetails) -> str:
    regex = (detail.get("ctx") or {}).get("pattern", "")
    plain = PLAIN_PATTERNS.get(str(regex))
    if plain is None:
        return detail["msg"]
    return f"{detail['input']!r} is not {plain.allowed}; for example {plain.example}"


def _unknown_key(location: Location, model: type[BaseModel]) -> str:
    key = str(location[-1])
    parent = model_at(model, location[:-1])
    if parent is None:
        return "unknown key (typo?); see docs/configuration.md for the accepted keys"
    accepted = list(parent.model_fields)
    close = difflib.get_close_matches(key, accepted, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; the accepted keys here are {', '.join(accepted)}"


def model_at(model: type[BaseModel], location: Location) -> type[BaseModel] | None:
    """The config section at `location` (list indexes skipped), or None if it is no section."""
    current: Any = model
    for part in location:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = element_type(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def element_type(annotation: Any) -> Any:
    """The model or scalar type behind Optional[...] and list[...]."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return element_type(members[0]) if len(members) == 1 else annotation
    if origin is list:
        return element_type(get_args(annotation)[0])
    return annotation
