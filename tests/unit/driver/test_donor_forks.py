"""A fork that is a donor patch: the ``[forks.NAME]`` table (patch, sha256, upstream, versions), its checks and
errors, and how the one resolver of a fork name returns it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.config import DONOR_KEYS, parse_config
from fwman.core.errors import ExitCode, ParseError, UsageError
from fwman.driver.forks.config import NVIDIA_UPSTREAM, configured_forks, parse_donor, resolve_fork
from fwman.driver.forks.listing import donor_revisions
from fwman.driver.forks.lsremote import parse_ls_remote_tags
from fwman.driver.forks.model import Fork
from tests.support.env import FwmanEnv

SHA = "83" * 32
WHERE = "/etc/fwman/config.toml"


def test_a_donor_table_is_a_fork_on_nvidias_upstream() -> None:
    fork = parse_donor(
        "p2p", {"patch": "https://example.org/p2p.diff", "sha256": SHA.upper(), "versions": ["595.58.03"]}, WHERE
    )
    assert fork.name == "p2p" and fork.url == NVIDIA_UPSTREAM
    assert fork.donor is not None
    assert (fork.donor.sha256, fork.donor.versions, fork.donor.versions_from) == (SHA, ("595.58.03",), "config")
    assert fork.donor.is_url and fork.donor.file_name == "p2p.diff"
    assert fork.cache_key == f"{NVIDIA_UPSTREAM}#patch={SHA}"  # never the same cache entry as a branch fork
    local = parse_donor("mine", {"patch": "/srv/p2p.patch", "sha256": SHA, "upstream": "/srv/git/nv.git",
                                 "versions": ["570.86.16", "570.86.16"]}, WHERE)  # fmt: skip
    assert local.url == "/srv/git/nv.git" and local.donor is not None and not local.donor.is_url
    assert local.donor.versions == ("570.86.16",)


def test_without_versions_the_patch_name_is_the_hint() -> None:
    fork = parse_donor("p2p", {"patch": "/srv/open-gpu-595.58.03-p2p.patch", "sha256": SHA}, WHERE)
    assert fork.donor is not None
    assert (fork.donor.versions, fork.donor.versions_from) == (("595.58.03",), "name")
    with pytest.raises(UsageError, match=r"say which NVIDIA release the patch is for: versions = \[\"V\"\]"):
        parse_donor("p2p", {"patch": "/srv/p2p.patch", "sha256": SHA}, WHERE)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"patch": "/srv/p2p.patch", "versions": ["595.58.03"]},
            "no sha256 for patch /srv/p2p.patch: an unpinned patch is refused",
        ),
        (
            {"patch": "/srv/p2p.patch", "sha256": "abc", "versions": ["595.58.03"]},
            "sha256 must be 64 hexadecimal digits",
        ),
        ({"sha256": SHA, "versions": ["595.58.03"]}, "`patch` must be a string"),
        ({"patch": "p2p.patch", "sha256": SHA}, "is neither an absolute path nor an https:// URL"),
        ({"patch": "http://example.org/p2p.patch", "sha256": SHA}, "is neither an absolute path nor an https:// URL"),
        ({"patch": "/p.patch", "sha256": SHA, "versions": "595.58.03"}, "versions must be a list of driver versions"),
        ({"patch": "/p.patch", "sha256": SHA, "versions": ["595"]}, "not an NVIDIA driver version"),
        ({"patch": "/p.patch", "sha256": SHA, "versions": ["1.2"], "upstream": "-uhelper"}, "not a repository URL"),
        ({"patch": "/p.patch", "sha256": SHA, "versions": ["595.58.03"], "sha": SHA}, "unknown key `sha`"),
    ],
)
def test_a_bad_donor_table_is_refused_naming_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("(", r"\(")) as e:
        parse_donor("p2p", table, WHERE)
    assert "[forks.p2p]" in e.value.message


def test_loopback_http_is_accepted_for_a_local_mirror() -> None:
    fork = parse_donor("p2p", {"patch": "http://127.0.0.1:8080/p2p-595.58.03.patch", "sha256": SHA}, WHERE)
    assert fork.donor is not None and fork.donor.is_url


def test_the_one_resolver_returns_a_donor_fork_and_lists_it() -> None:
    config = parse_config(
        f'[forks]\ndefaults = false\nmine = "/srv/git/fork.git"\n\n[forks.p2p]\npatch = "/srv/p2p.patch"\n'
        f'sha256 = "{SHA}"\nversions = ["595.58.03"]\n'
    )
    fork = resolve_fork(config, "p2p")
    assert fork.donor is not None and fork.url == NVIDIA_UPSTREAM
    assert [(f.name, f.donor is not None) for f in configured_forks(config)] == [("mine", False), ("p2p", True)]
    with pytest.raises(UsageError, match=r"known forks: mine, p2p"):
        resolve_fork(config, "p2q")


def test_an_unknown_key_in_a_donor_table_names_the_line() -> None:
    text = f'[forks]\n\n[forks.p2p]\npatch = "/srv/p2p.patch"\nsha265 = "{SHA}"\n'
    with pytest.raises(UsageError, match=r"config.toml:3: unknown key `sha265` in \[forks.p2p\]") as e:
        parse_config(text, WHERE)
    assert "known keys: " + ", ".join(DONOR_KEYS) in e.value.message


def test_cli_refuses_an_unpinned_patch_with_exit_2(tmp_path: Path) -> None:
    conf = tmp_path / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text('[forks.p2p]\npatch = "https://example.org/595.58.03-p2p.diff"\n')
    r = FwmanEnv()("driver", "branches", "--offline", "--root", str(tmp_path))
    assert r.code == ExitCode.USAGE, r.stdout + r.stderr
    assert "[forks.p2p]: no sha256 for patch https://example.org/595.58.03-p2p.diff" in r.stderr


def test_revisions_are_the_upstream_tags_the_remote_has_with_their_tree_versions() -> None:
    donor = parse_donor(
        "p2p", {"patch": "/p.patch", "sha256": SHA, "versions": ["595.58.03", "590.48.01"]}, WHERE
    ).donor
    assert donor is not None
    commit = "c" * 40
    trees = {commit: {"version": "595.58.03", "date": "2026-01-02T03:04:05+00:00", "error": None}}
    (rev,) = donor_revisions(donor, ["595.58.03"], {"595.58.03": commit}, trees)  # 590.48.01: no such tag
    assert (rev.branch, rev.version, rev.from_tree, rev.patch_sha256) == ("595.58.03", "595.58.03", True, SHA)
    (hint,) = donor_revisions(donor, ["595.58.03"], {"595.58.03": commit}, {})
    assert (hint.version, hint.from_tree) == ("595.58.03", False)  # tree not read: the tag's name is the hint


_values = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["/srv/p.patch", "https://e.org/595.58.03.diff", SHA, "http://localhost/x", "-x", "git://h/r"]),
    st.lists(st.one_of(st.text(max_size=12), st.sampled_from(["595.58.03", "570.86"])), max_size=3),
    st.integers(),
    st.booleans(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=20),
    st.dictionaries(st.one_of(st.sampled_from(DONOR_KEYS), st.text(max_size=8)), _values, max_size=5),
)
def test_property_any_table_is_a_donor_fork_or_a_usage_error(name: str, table: dict[str, Any]) -> None:
    try:
        fork = parse_donor(name, table, WHERE)
    except UsageError:
        return
    assert isinstance(fork, Fork) and fork.donor is not None
    assert len(fork.donor.sha256) == 64 and fork.donor.versions


def test_ls_remote_tags_take_an_annotated_tags_commit() -> None:
    tag_object, commit, other = "a" * 40, "b" * 40, "c" * 40
    text = f"{tag_object}\trefs/tags/595.58.03\n{commit}\trefs/tags/595.58.03^{{}}\n{other}\trefs/tags/590.48.01\n"
    assert parse_ls_remote_tags(text, ["590.48.01", "595.58.03", "580.1.2"]) == {
        "590.48.01": other,
        "595.58.03": commit,
    }
    with pytest.raises(ParseError, match="is not"):
        parse_ls_remote_tags("not a line\n", ["595.58.03"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.lists(st.text(max_size=12), max_size=3))
def test_property_any_ls_remote_text_is_tags_or_a_parse_error(text: str, tags: list[str]) -> None:
    try:
        found = parse_ls_remote_tags(text, tags)
    except ParseError:
        return
    assert set(found) <= set(tags)
