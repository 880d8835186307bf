"""TOML text from outside fwman (a replayed host's config.toml, catalog board files): ParseError only.

``tomllib`` parses nested arrays and inline tables recursively, so a line such as ``a = [[[[...]]]]`` a few KB
long raises ``RecursionError``, not ``TOMLDecodeError``: on a replay it was an "unexpected" exit 1. Like
:func:`fwman.core.jsontext.parse_json`, :func:`parse_toml` turns that and any syntax error into ParseError, and
refuses nesting deeper than the same :data:`~fwman.core.jsontext.MAX_DEPTH`.
"""

from __future__ import annotations

import tomllib
from typing import Any

from fwman.core.errors import ParseError
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
