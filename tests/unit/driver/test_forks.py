"""Fork branch listing: ls-remote and Link parsing, forge names, fork configuration.

No network here: tests/system/test_forks_http.py runs the forge API on 127.0.0.1 and a real git repository.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.config import Config, parse_config
from fwman.core.errors import ParseError, UsageError
from fwman.driver.forks.config import DEFAULT_FORKS, configured_forks, resolve_fork
from fwman.driver.forks.forge import api_base, forge_repo, parse_link_next
from fwman.driver.forks.lsremote import parse_ls_remote
from fwman.driver.forks.model import Fork, utc_text

AIKITORIA = "https://github.com/aikitoria/open-gpu-kernel-modules"
SHA = "0123456789abcdef0123456789abcdef01234567"


# -- pure parsers -----------------------------------------------------------------------------------------
def test_ls_remote_keeps_heads_only() -> None:
    text = (
        f"{SHA}\trefs/heads/570.86.16-p2p\n{SHA}\trefs/heads/main\n"
        f"{SHA}\trefs/tags/570.86.16-p2p\n{SHA}\trefs/tags/575.51.02-p2p\n{SHA}\tHEAD\n"
    )
    assert parse_ls_remote(text) == ["570.86.16-p2p", "main"]


def test_ls_remote_garbage_is_parse_error() -> None:
    with pytest.raises(ParseError, match="'fatal: not a repo' is not") as e:
        parse_ls_remote(f"{SHA}\trefs/heads/main\nfatal: not a repo\n")
    assert e.value.offset == 2  # the line number


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_property_ls_remote_any_text(text: str) -> None:
    with contextlib.suppress(ParseError):
        for name in parse_ls_remote(text):
            assert "\n" not in name


def test_link_header() -> None:
    header = '<https://x/b?page=2>; rel="next", <https://x/b?page=4>; rel="last"'
    assert parse_link_next(header) == "https://x/b?page=2"
    assert parse_link_next('<https://x/b?page=1>; rel="prev"') is None
    assert parse_link_next(None) is None


def test_forge_repo() -> None:
    assert forge_repo(AIKITORIA) == ("aikitoria", "open-gpu-kernel-modules")
    assert forge_repo(AIKITORIA + ".git") == ("aikitoria", "open-gpu-kernel-modules")
    assert forge_repo("git@github.com:me/fork.git") == ("me", "fork")
    assert forge_repo("/srv/git/fork.git") is None
    assert forge_repo("https://gitlab.com/a/b") is None


def test_config_can_drop_default_forks() -> None:
    forks = configured_forks(parse_config("[forks]\ndefaults = false\n"), ["a=/srv/a.git"])
    assert forks == [Fork("a", "/srv/a.git")]


def test_configured_forks_defaults_config_and_options() -> None:
    config = parse_config('[forks]\napi_url = "http://127.0.0.1:1"\nmine = "https://github.com/me/ogkm"\n')
    names = {f.name: f.url for f in configured_forks(config)}
    assert names["aikitoria"] == DEFAULT_FORKS["aikitoria"]
    assert names["mine"] == "https://github.com/me/ogkm"
    assert "api_url" not in names
    # --fork names the forks to list, alone (issue 39, row 5: a local mirror offline must not wait on the others)
    forks = configured_forks(config, ["local=/srv/fork.git", "tinygrad=https://github.com/t2/ogkm", "mine"])
    assert [(f.name, f.url) for f in forks] == [
        ("local", "/srv/fork.git"),
        ("tinygrad", "https://github.com/t2/ogkm"),  # NAME=URL: this URL, not the built-in one
        ("mine", "https://github.com/me/ogkm"),
    ]
    assert api_base(config, {}) == "http://127.0.0.1:1"
    assert api_base(config, {"FWMAN_FORGE_API": "http://h/"}) == "http://h"
    assert api_base(Config(), {}) == "https://api.github.com"


@pytest.mark.parametrize("bad", ["noequals", "=https://x", "name=", "bad name=x"])
def test_bad_fork_option(bad: str) -> None:
    with pytest.raises(UsageError, match="NAME=URL"):
        configured_forks(Config(), [bad])


def test_bad_toml_is_usage_error() -> None:
    with pytest.raises(UsageError, match="not valid TOML"):
        parse_config("[forks\n")


# -- one resolver of a named fork (issue 23, row 1) --------------------------------------------------------
MIRROR = '[forks]\naikitoria = "/srv/git/open-gpu-kernel-modules"\nmine = "me/ogkm"\n'


def test_resolver_takes_a_configured_name_a_built_in_name_name_equals_url_and_a_url() -> None:
    config = parse_config(MIRROR)
    # the form docs/driver-branches.md shows: a configured name replaces the built-in URL of the same name
    assert resolve_fork(config, "aikitoria") == Fork("aikitoria", "/srv/git/open-gpu-kernel-modules")
    assert resolve_fork(config, "tinygrad") == Fork("tinygrad", DEFAULT_FORKS["tinygrad"])
    assert resolve_fork(config, "mine") == Fork("mine", "https://github.com/me/ogkm.git")  # owner/name: GitHub
    assert resolve_fork(config, "x=/srv/x.git") == Fork("x", "/srv/x.git")
    assert resolve_fork(config, "git://127.0.0.1:9418/f.git") == Fork(
        "git://127.0.0.1:9418/f.git", "git://127.0.0.1:9418/f.git"
    )
    assert resolve_fork(config, "a/b") == Fork("a/b", "https://github.com/a/b.git")
    assert resolve_fork(Config(), "aikitoria") == Fork("aikitoria", DEFAULT_FORKS["aikitoria"])


def test_an_unknown_name_is_a_usage_error_naming_the_known_forks() -> None:
    with pytest.raises(UsageError) as e:
        resolve_fork(parse_config(MIRROR), "aikitora", "/etc/fwman/config.toml: [modules] fork")
    assert e.value.message.startswith("/etc/fwman/config.toml: [modules] fork 'aikitora': no fork of that name")
    assert "known forks: aikitoria, tinygrad, mylesgoose, mine" in e.value.message
    with pytest.raises(UsageError, match=r"known forks: none \(\[forks\] defaults = false"):
        resolve_fork(parse_config("[forks]\ndefaults = false\n"), "aikitoria")


def test_listing_options_take_a_known_name_too() -> None:
    # --fork of audit and driver branches: NAME=URL as documented, and now a known name or a URL as well
    assert configured_forks(Config(), ["aikitoria", "aikitoria"]) == [Fork("aikitoria", DEFAULT_FORKS["aikitoria"])]
    config = parse_config("[forks]\ndefaults = false\n")
    assert configured_forks(config, ["file:///srv/f.git"]) == [Fork("file:///srv/f.git", "file:///srv/f.git")]
    with pytest.raises(UsageError, match="'tinygrad': no fork of that name"):
        configured_forks(config, ["tinygrad"])  # defaults = false: not known here


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_property_resolver_any_text_is_a_fork_or_a_usage_error(text: str) -> None:
    config = parse_config(MIRROR)
    try:
        fork = resolve_fork(config, text)
    except UsageError:
        return
    assert not fork.url.startswith("-") and not any(c.isspace() for c in fork.url)


def test_commit_dates_are_shown_in_utc() -> None:
    """Issue 39, row 7: %cI is in each committer's own offset; the COMMITTED column is one clock."""
    assert utc_text("2025-01-30T13:00:00+01:00") == "2025-01-30 12:00:00Z"
    assert utc_text("2025-01-30T07:00:00-05:00") == "2025-01-30 12:00:00Z"
    assert utc_text("2025-01-30T12:00:00Z") == "2025-01-30 12:00:00Z"
    assert (utc_text(None), utc_text("yesterday")) == ("unknown", "yesterday")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_any_date_text_gives_a_cell(text: str) -> None:
    assert isinstance(utc_text(text), str)
