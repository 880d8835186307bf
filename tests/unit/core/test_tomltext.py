"""fwman.core.tomltext: TOML from outside (a replayed config.toml, board files) is a table or a ParseError."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError, UsageError, VerificationError
from fwman.core.jsontext import MAX_DEPTH
from fwman.core.tomltext import parse_toml

DEEP = "a = " + "[" * 5_000 + "]" * 5_000 + "\n"  # tomllib recurses once per level: RecursionError before


@pytest.mark.parametrize(
    "text", [DEEP, "a = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "a = " + "{b = " * 2_000 + "1" + "}" * 2_000]
)
def test_deep_nesting_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as e:
        parse_toml(text, "/etc/fwman/config.toml")
    assert e.value.detail == f"nested deeper than {MAX_DEPTH} levels"


def test_a_syntax_error_keeps_tomllibs_words() -> None:
    with pytest.raises(ParseError) as e:
        parse_toml("a = \n", "c")
    assert e.value.detail == "Invalid value (at line 1, column 5)"


def test_every_toml_reader_maps_it_to_its_own_error() -> None:
    from fwman.core.config import parse_config
    from fwman.firmware.catalog.schema import load_toml

    with pytest.raises(UsageError, match=r"config\.toml: not valid TOML: nested deeper than 64 levels"):
        parse_config(DEEP, "/etc/fwman/config.toml")
    with pytest.raises(VerificationError, match=r"boards/x\.toml: not valid TOML: nested deeper than 64 levels"):
        load_toml(DEEP.encode(), "boards/x.toml")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='ab =[]{}",.\n1', max_size=60))
def test_any_text_is_what_tomllib_says_or_a_parse_error(text: str) -> None:
    try:
        expected = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        with pytest.raises(ParseError):
            parse_toml(text, "x")
        return
    assert parse_toml(text, "x") == expected
