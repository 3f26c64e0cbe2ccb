"""Values that YAML or JSON typed differently from the field they are meant for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ConfigDict

# Every config section: unknown keys (typos) are refused, values are immutable once validated,
# and a value is taken only as the type its field has (strict): "yes" or "32" is text, not a
# boolean or a number; 1 is not true. `-c config.x=...` texts are typed by config/overrides.py
# before they get here, so the command line keeps writing -c config.x=true.
STRICT_SECTION = ConfigDict(extra="forbid", frozen=True, strict=True)


def number_as_version(known: Sequence[str]) -> Callable[[Any], Any]:
    """A before-validator turning an unquoted version (YAML/JSON read 1.35 as a number) back
    into its text when that text is a known version. A number loses trailing zeros (1.30 reads
    as 1.3), so anything else is refused with the quoting fix rather than guessed."""

    def convert(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        text = repr(value)
        if text in known:
            return text
        raise ValueError(
            f"{value!r} arrived as a number, which drops trailing zeros (1.30 reads as 1.3); "
            f'write the version in quotes, for example "{known[-1]}" (one of {", ".join(known)})'
        )

    return convert
