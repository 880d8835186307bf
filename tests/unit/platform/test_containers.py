"""The container readers' pure parts: where vLLM keeps its P2P cache in a container, and the cache's parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.platform.containers import parse_vllm_cache, vllm_cache_dir


def test_vllm_cache_place_and_parser() -> None:
    assert vllm_cache_dir({}) == "/root/.cache/vllm"
    assert vllm_cache_dir({"XDG_CACHE_HOME": "/cache"}) == "/cache/vllm"
    assert vllm_cache_dir({"VLLM_CACHE_ROOT": "/data/vllm/", "XDG_CACHE_HOME": "/cache"}) == "/data/vllm"
    assert parse_vllm_cache('{"0->1": true, "1->0": false}', "x") == {"0->1": True, "1->0": False}
    for bad in ('{"0->1": "yes"}', "[]", '{"gpu": true}', "{"):
        with pytest.raises(ParseError):
            parse_vllm_cache(bad, "x")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_vllm_cache_parser_gives_a_verdict_or_a_parse_error(text: str) -> None:
    try:
        parse_vllm_cache(text, "x")
    except ParseError:
        pass
