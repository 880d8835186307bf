"""fwman.core.jsontext: the one JSON parser for text from outside; it raises ParseError and nothing else."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ExitCode, ParseError
from fwman.core.jsontext import MAX_DEPTH, parse_json

DEEP_ARRAY = "[" * 200_000 + "]" * 200_000  # the reviewer's snapshot.json: past the interpreter's recursion limit


def nested(depth: int, *, obj: bool = False) -> str:
    """Return a JSON document of ``depth`` nested lists (or objects)."""
    return ('{"a": ' * depth + "1" + "}" * depth) if obj else ("[" * depth + "]" * depth)


@pytest.mark.parametrize(
    "text",
    [
        DEEP_ARRAY,
        DEEP_ARRAY.encode(),
        nested(5_000, obj=True),
        nested(MAX_DEPTH + 1),  # parses in json, but deeper than fwman reads
        nested(MAX_DEPTH + 1, obj=True),
        '{"commands": [' + nested(MAX_DEPTH) + "]}",
    ],
)
def test_deep_nesting_is_a_parse_error_never_a_recursion_error(text: str | bytes) -> None:
    with pytest.raises(ParseError) as e:
        parse_json(text, "snapshot", "snapshot.json")
    assert e.value.detail == f"nested deeper than {MAX_DEPTH} levels"
    assert str(e.value) == f"snapshot: snapshot.json: nested deeper than {MAX_DEPTH} levels"
    assert e.value.exit_code == ExitCode.VERIFICATION


def test_the_deepest_accepted_document_is_returned() -> None:
    doc = parse_json(nested(MAX_DEPTH), "x")
    depth = 0
    while isinstance(doc, list):
        depth, doc = depth + 1, doc[0] if doc else None
    assert depth == MAX_DEPTH


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"\xff{}", "not JSON: not UTF-8 text (invalid start byte at byte 0)"),
        ("{{{", "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ("", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"a": 1} x', "not JSON: Extra data: line 1 column 10 (char 9)"),
    ],
)
def test_what_is_not_json_says_so(data: str | bytes, detail: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_json(data, "bundle", "bundle.json")
    assert e.value.detail == detail


json_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_documents)
def test_an_ordinary_document_parses_as_json_loads_does(doc: Any) -> None:
    text = json.dumps(doc)
    assert parse_json(text, "x") == json.loads(text)
    assert parse_json(text.encode(), "x") == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=64), st.text(alphabet='[]{}":,0 \\ntrue', max_size=64)))
def test_any_input_is_a_value_or_a_parse_error(data: str | bytes) -> None:
    try:
        parse_json(data, "x")
    except ParseError:
        pass
