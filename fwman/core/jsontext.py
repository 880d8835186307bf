"""JSON text from outside fwman: the one parser, which raises nothing but ParseError.

``json.loads`` raises ``RecursionError`` for a deeply nested document (``[`` × 200 000 is a few hundred KB, and
a few thousand levels are enough), and ``RecursionError`` is no ``ValueError``: a caller that caught the
decoding errors let it out as an "unexpected" exit 1. A document that does parse can still nest deep enough
that the code reading it (a ``repr`` in an error message, a pydantic model) recurses past the interpreter's
limit. Every document fwman reads as JSON (snapshot.json, a catalog signature and index, a bundle's
bundle.json, the JSON-lines histories, state records, forge answers, the torch runner's result line) goes
through :func:`parse_json`, so all of them refuse the same way and each caller maps ParseError to its
documented exit once.
"""

from __future__ import annotations

import json
from typing import Any

from fwman.core.errors import ParseError

#: the deepest nesting fwman accepts. Its own documents nest a handful of levels (snapshot.json: the object,
#: "commands", one entry, its "argv" is four); 64 leaves room for any honest one and stays far below the
#: interpreter's recursion limit (1000) wherever the document is later walked, printed or validated
MAX_DEPTH = 64


def parse_json(data: str | bytes, what: str, field: str = "document") -> Any:
    """Return the value of the JSON text ``data`` (bytes must be UTF-8).

    ``what`` names the document and ``field`` the part being read, for the message. Raises ParseError (whose
    ``detail`` starts ``not JSON:`` or ``nested deeper than``) for bytes that are not UTF-8, text that is not
    JSON, and a document nested deeper than :data:`MAX_DEPTH` levels; never RecursionError or ValueError.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as e:
        raise ParseError(what, field, f"not JSON: not UTF-8 text ({e.reason} at byte {e.start})") from e
    try:
        doc = json.loads(text)
    except RecursionError as e:
        # the C decoder stops at the interpreter's recursion limit and unwinds cleanly: nothing is half-built
        raise ParseError(what, field, f"nested deeper than {MAX_DEPTH} levels") from e
    except ValueError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ParseError(what, field, f"not JSON: {first}") from e
    if deeper_than(doc, MAX_DEPTH):
        raise ParseError(what, field, f"nested deeper than {MAX_DEPTH} levels")
    return doc


def deeper_than(doc: object, limit: int) -> bool:
    """Return True when ``doc`` nests lists and objects more than ``limit`` levels deep (a scalar is level 0).

    Iterative, so it never recurses itself; it visits each container once.
    """
    pending: list[tuple[object, int]] = [(doc, 1)]
    while pending:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
