"""TOML text from outside fwman (a replayed host's config.toml, catalog board files): ParseError only.

``tomllib`` parses nested arrays and inline tables recursively, so a line such as ``a = [[[[...]]]]`` a few KB
long raises ``RecursionError``, not ``TOMLDecodeError``: on a replay it was an "unexpected" exit 1. Like
:func:`fwman.core.jsontext.parse_json`, :func:`parse_toml` turns that and any syntax error into ParseError, and
refuses nesting deeper than the same :data:`~fwman.core.jsontext.MAX_DEPTH`.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

from fwman.core.errors import ParseError, UsageError
from fwman.core.jsontext import MAX_DEPTH, deeper_than


def parse_toml(text: str, what: str, field: str = "document") -> dict[str, Any]:
    """Return the table of the TOML ``text``.

    Raises ParseError whose ``detail`` is tomllib's message for a syntax error (``Invalid value (at line 1,
    column 5)``), or ``nested deeper than 64 levels``; never RecursionError.
    """
    try:
        doc = tomllib.loads(text)
    except RecursionError as e:
        raise ParseError(what, field, f"nested deeper than {MAX_DEPTH} levels") from e
    except tomllib.TOMLDecodeError as e:
        raise ParseError(what, field, str(e)) from e
    if deeper_than(doc, MAX_DEPTH):
        raise ParseError(what, field, f"nested deeper than {MAX_DEPTH} levels")
    return doc


def toml_value(value: object) -> str:
    """Return ``value`` (a string, integer, boolean, float or list of them) as a TOML value.

    Strings are TOML basic strings: JSON's escapes are TOML's, non-ASCII stays literal (JSON's ``\\ud83d\\ude00``
    surrogate pairs are not valid TOML escapes), DEL is escaped (TOML forbids it raw, JSON leaves it). Raises
    UsageError for text that is not Unicode (a lone surrogate: a non-UTF-8 argument or file name), which no TOML
    file can hold.
    """
    if isinstance(value, str):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise UsageError(
                f"{value.encode('utf-8', 'surrogateescape')[:60]!r} is not UTF-8 text: a TOML file cannot hold it",
                hint="give it as UTF-8 text",
            )
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")
