"""The version a build produces, for the lockstep gate (issue 26): the tree's, the branch name only a hint.

A fork branch named ``575.64.05-p2p`` whose ``version.mk`` says 570.86.16 builds 570.86.16; `driver branches`
reads each branch's tree and caches it per commit (``/var/cache/fwman/branches.json``), and ``build_target``
reads that cache on a temp root. Before: ``target_version`` returned the name's version first.
"""

from __future__ import annotations

import json
from pathlib import Path

from fwman.core import paths
from fwman.driver.build.lockstep import Target, build_target
from fwman.host.live import LiveHost

URL = "git://127.0.0.1/fork.git"
NAMED, BUILT = "575.64.05", "570.86.16"
COMMIT = "a" * 40


def _cache(root: Path, trees: dict[str, dict[str, str | None]], branch: str = f"{NAMED}-p2p") -> None:
    listing = {"fork": "standin", "branches": [branch], "commits": {branch: COMMIT}, "source": "git"}
    doc = {"format": "fwman-branch-cache", "version": 1, "forks": {URL: listing}, "trees": trees}
    path = root / paths.BRANCH_CACHE_FILE.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_a_branch_goes_by_the_version_its_tree_builds_not_its_name(tmp_path: Path) -> None:
    _cache(tmp_path, {COMMIT: {"version": BUILT, "date": "2026-06-01T10:00:00+00:00", "error": None}})
    host = LiveHost(str(tmp_path))
    assert build_target(host, f"{NAMED}-p2p", None, URL) == Target(BUILT, True)
    # another fork's listing says nothing of this one's branch: the name is the only hint left
    assert build_target(host, f"{NAMED}-p2p", None, "git://elsewhere/fork.git") == Target(NAMED, False)


def test_the_name_is_the_fallback_only_when_the_tree_cannot_be_read(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    assert build_target(host, f"{NAMED}-p2p-v2", None, URL) == Target(NAMED, False)  # no cache at all
    assert build_target(host, "bar1-p2p", None, URL) == Target(None, False)  # a name that says no version
    # the tree was fetched but had no version.mk: its read says why, and the name is the hint again
    _cache(tmp_path, {COMMIT: {"version": None, "date": None, "error": "no version.mk in its tree"}})
    assert build_target(host, f"{NAMED}-p2p", None, URL) == Target(NAMED, False)
    (tmp_path / paths.BRANCH_CACHE_FILE.lstrip("/")).write_text("{not json")
    assert build_target(host, f"{NAMED}-p2p", None, URL) == Target(NAMED, False)


def test_a_local_tree_is_read_from_its_version_file(tmp_path: Path) -> None:
    tree = tmp_path / "src/open-gpu-kernel-modules"
    tree.mkdir(parents=True)
    host = LiveHost(str(tmp_path))
    assert build_target(host, None, "/src/open-gpu-kernel-modules") == Target(None, False)
    (tree / "utils.mk").write_text("NVIDIA_VERSION ?= 565.77\n")
    assert build_target(host, None, "/src/open-gpu-kernel-modules") == Target("565.77", True)
    (tree / "version.mk").write_text(f"NVIDIA_VERSION = {BUILT}\n")
    assert build_target(host, None, "/src/open-gpu-kernel-modules/") == Target(BUILT, True)


def test_a_local_tree_is_read_by_the_one_version_mk_grammar(tmp_path: Path) -> None:
    """The tree's line is read as `driver branches` reads a fork's (versions.parse_version_mk): a value that is no
    driver version, or a line with more after the value, says nothing, and the next file or the hint is asked."""
    tree = tmp_path / "src/tree"
    tree.mkdir(parents=True)
    host = LiveHost(str(tmp_path))
    (tree / "version.mk").write_text("NVIDIA_VERSION = $(shell cat VERSION)\n")
    assert build_target(host, None, "/src/tree") == Target(None, False)
    (tree / "version.mk").write_text(f"NVIDIA_VERSION = {BUILT} # pinned\n")
    assert build_target(host, None, "/src/tree") == Target(None, False)
    # an empty value must not reach across the newline to the next line's word
    (tree / "version.mk").write_text(f"NVIDIA_VERSION =\n{NAMED}\n")
    assert build_target(host, None, "/src/tree") == Target(None, False)
    (tree / "utils.mk").write_text(f"NVIDIA_VERSION := {BUILT}\n")
    assert build_target(host, None, "/src/tree") == Target(BUILT, True)
