"""Branches by what they contain (issue 26, item 1): a fork with ``-p2p``, ``-p2p-v2``, ``-p2p-v3`` and a
custom-named branch, served by the real ``git daemon`` and by ``file://``. ``driver branches`` lists them by the
version their trees' ``version.mk`` says, newest commit first with the commit dates; offline, from the cache;
``modules build --driver-version`` builds the newest revision.

Before: ``parse_p2p_branch`` read names only, so ``-p2p-v2``/``-p2p-v3`` and ``bar1-p2p`` carried nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fwman.driver.forks.trees import probe_dir
from tests.support.env import FwmanEnv
from tests.support.modules import (
    KERNEL_OK,
    P2P_BRANCH,
    branch_with,
    build_root,
    git_daemon,
    make_fork_repo,
    require_build_env,
)
from tests.support.tools import require_tools

VERSION = "570.86.16"  # what fixtures/kmod-tree/fork/version.mk says
OTHER = "575.64.05"  # a real release (NVIDIA's README of open-gpu-kernel-modules names it)


def _at(base: int, hours: int) -> str:
    """Return ``base`` (a Unix time) plus ``hours``, as ISO 8601 in UTC (git's %cI of a +0000 date)."""
    return datetime.fromtimestamp(base + hours * 3600, UTC).isoformat()


def _fork(served: Path) -> dict[str, str]:
    """Return {branch: commit} of a fork with three revisions of VERSION (-p2p first, -p2p-v3 newest), a
    custom-named branch building OTHER and a non-P2P branch; ``DATES`` says when each was committed."""
    bare = served / "fork.git"
    commits = {P2P_BRANCH: make_fork_repo(bare)}
    # the branch, not the tag of the same name (a later commit: a second later when the clock ticked between them)
    log = ["git", "-C", str(bare), "log", "-1", "--format=%ct", f"refs/heads/{P2P_BRANCH}"]
    base = int(subprocess.run(log, capture_output=True, text=True, check=True).stdout)
    for branch, hours, files in (
        (f"{VERSION}-p2p-v2", 1, {"V2": "2\n"}),
        ("bar1-p2p", 2, {"version.mk": f"NVIDIA_VERSION = {OTHER}\n"}),
        (f"{VERSION}-p2p-v3", 3, {"V3": "3\n"}),
        ("515", 4, {"M": "m\n"}),  # an inherited NVIDIA branch name: not a P2P branch
    ):
        DATES[branch] = _at(base, hours)
        commits[branch] = branch_with(bare, P2P_BRANCH, branch, files, DATES[branch])
    DATES[P2P_BRANCH] = _at(base, 0)
    return commits


DATES: dict[str, str] = {}


def _config(root: Path, url: str) -> None:
    conf = root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[forks]\ndefaults = false\nstandin = "{url}"\n')


def _listed(root: Path, *extra: str) -> dict[str, Any]:
    r = FwmanEnv()("driver", "branches", "--root", str(root), "--json", *extra)
    assert r.code == 0, r.stdout + r.stderr
    fork: dict[str, Any] = r.json()["forks"][0]
    return fork


def _check(fork: dict[str, Any], commits: dict[str, str]) -> None:
    assert fork["p2p_versions"] == [VERSION, OTHER]  # main and 515 are not P2P branches
    revs = fork["revisions"][VERSION]
    assert [r["branch"] for r in revs] == [f"{VERSION}-p2p-v3", f"{VERSION}-p2p-v2", P2P_BRANCH]
    assert [r["commit"] for r in revs] == [commits[r["branch"]] for r in revs]
    assert [r["date"] for r in revs] == [DATES[r["branch"]] for r in revs]
    assert all(r["from_tree"] for r in revs)
    (bar1,) = fork["revisions"][OTHER]
    assert bar1["branch"] == "bar1-p2p" and bar1["from_tree"] and bar1["commit"] == commits["bar1-p2p"]


def test_branches_are_listed_by_the_version_their_trees_build_over_git_daemon_then_offline(tmp_path: Path) -> None:
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    commits = _fork(served)
    root = tmp_path / "root"
    root.mkdir()
    with git_daemon(served) as base:
        _config(root, f"{base}/fork.git")
        _check(_listed(root), commits)
        text = FwmanEnv()("driver", "branches", "--root", str(root)).stdout
    # the table: one row per revision, newest first, with the date
    # (FAMILY and REV columns before the branch; "*" marks the one --driver-version builds: issue 40)
    rows = [[w for w in line.split() if w != "*"] for line in text.splitlines() if line.startswith(VERSION)]
    assert [row[4] for row in rows] == [f"{VERSION}-p2p-v3", f"{VERSION}-p2p-v2", P2P_BRANCH]
    assert [row[2:4] for row in rows] == [["p2p", "3"], ["p2p", "2"], ["p2p", "1"]]
    day, time_of_day = DATES[f"{VERSION}-p2p-v3"][:19].split("T")
    assert rows[0][5:7] == [day, f"{time_of_day}Z"]  # COMMITTED in UTC (issue 39)
    # the daemon is gone and the probe repository too: the cache answers, per commit
    shutil.rmtree(root / probe_dir(f"{base}/fork.git").lstrip("/"))
    _check(_listed(root, "--offline"), commits)
    cache = json.loads((root / "var/cache/fwman/branches.json").read_text())
    assert cache["trees"][commits["bar1-p2p"]]["version"] == OTHER


def test_a_file_url_fork_is_read_the_same_way(tmp_path: Path) -> None:
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    commits = _fork(served)
    root = tmp_path / "root"
    root.mkdir()
    _config(root, f"file://{served}/fork.git")
    _check(_listed(root), commits)


def test_modules_build_driver_version_builds_the_newest_revision(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    commits = _fork(served)
    root = build_root(tmp_path, (KERNEL_OK,))
    with git_daemon(served) as base:
        _config(root, f"{base}/fork.git")
        argv = ["modules", "build", "--root", str(root), "--kernel", KERNEL_OK, "--fork", "standin"]
        r = FwmanEnv()(*argv, "--driver-version", VERSION, "--force")
        assert r.code == 0, r.stdout + r.stderr
        assert f"building {VERSION}-p2p-v3 of standin, the newest of its revisions" in r.stdout + r.stderr
        missing = FwmanEnv()(*argv, "--driver-version", "580.95.05")
        assert missing.code == 5
        assert f"its P2P branches build: {VERSION}, {OTHER})" in missing.stderr
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["branch"] == f"{VERSION}-p2p-v3" and manifest["commit"] == commits[f"{VERSION}-p2p-v3"]


# -- a branch whose name says one version and whose tree another ------------------------------------------------
# issue 26: a fork renames nothing when it moves a branch to another driver release (or names it after the release
# it was started for). ``575.64.05-p2p`` here builds 570.86.16 (its version.mk), newer than ``570.86.16-p2p``.
MISNAMED = f"{OTHER}-p2p"


def _misnamed_fork(served: Path) -> dict[str, str]:
    """Return {branch: commit} of a fork with ``570.86.16-p2p`` and, committed an hour later, ``575.64.05-p2p``
    whose tree is still 570.86.16's (version.mk unchanged)."""
    bare = served / "fork.git"
    commits = {P2P_BRANCH: make_fork_repo(bare)}
    log = ["git", "-C", str(bare), "log", "-1", "--format=%ct", P2P_BRANCH]
    base = int(subprocess.run(log, capture_output=True, text=True, check=True).stdout)
    commits[MISNAMED] = branch_with(bare, P2P_BRANCH, MISNAMED, {"REBASED": "on 570.86.16\n"}, _at(base, 1))
    return commits


def _userspace(root: Path, version: str) -> None:
    """Give the root the host user space of ``version`` (the driver libraries the lockstep gate reads)."""
    libdir = root / "usr/lib/x86_64-linux-gnu"
    libdir.mkdir(parents=True, exist_ok=True)
    for lib in ("libcuda.so", "libnvidia-ml.so"):
        (libdir / f"{lib}.{version}").write_bytes(b"\x7fELF stand-in")


def test_a_branch_named_for_one_version_goes_by_the_version_its_tree_builds(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    commits = _misnamed_fork(served)
    root = build_root(tmp_path, (KERNEL_OK,))
    _userspace(root, VERSION)  # the owner's user space is 570.86.16: what the misnamed branch really builds
    with git_daemon(served) as base:
        _config(root, f"{base}/fork.git")
        fork = _listed(root)
        # driver branches: the misnamed branch is a revision of 570.86.16 (its tree), and 575.64.05 is carried by none
        assert fork["p2p_versions"] == [VERSION]
        revs = fork["revisions"][VERSION]
        assert [(r["branch"], r["version"], r["from_tree"]) for r in revs] == [
            (MISNAMED, VERSION, True),
            (P2P_BRANCH, VERSION, True),
        ]
        text = FwmanEnv()("driver", "branches", "--root", str(root)).stdout
        rows = [line.split() for line in text.splitlines() if MISNAMED in line.split()]
        assert rows and rows[0][0] == VERSION, text
        # asked for the name's version: carried by none, and the branch of that name is said to build another
        asked = FwmanEnv()("driver", "branches", "--root", str(root), "--driver-version", OTHER, "--json").json()
        assert asked["carried_by"] == [] and asked["nearest_below"]["version"] == VERSION
        assert asked["named_only"] == [{"fork": "standin", "branch": MISNAMED, "builds": VERSION}]
        said = FwmanEnv()("driver", "branches", "--root", str(root), "--driver-version", OTHER).stdout
        assert f"standin's branch {MISNAMED} builds {VERSION} (its tree's version.mk), not {OTHER}." in said

        argv = ["modules", "build", "--root", str(root), "--kernel", KERNEL_OK, "--fork", "standin"]
        # --driver-version goes by the trees: 575.64.05 is built by no branch, 570.86.16 by the misnamed one
        missing = FwmanEnv()(*argv, "--driver-version", OTHER)
        assert missing.code == 5, missing.stdout + missing.stderr
        assert f"no branch of fork standin builds driver version {OTHER} (its P2P branches build: {VERSION})" in (
            missing.stderr
        )
        r = FwmanEnv()(*argv, "--driver-version", VERSION)  # no --force: the user space is the tree's version
        assert r.code == 0, r.stdout + r.stderr
        assert f"building {MISNAMED} of standin, the newest of its revisions" in r.stdout + r.stderr
        manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
        assert manifest["branch"] == MISNAMED and manifest["commit"] == commits[MISNAMED]
        # named by --branch: the lockstep gate reads the tree's 570.86.16 too, never the name's 575.64.05
        again = FwmanEnv()(*argv, "--branch", MISNAMED)
        assert again.code == 0, again.stdout + again.stderr
        assert f"builds driver {OTHER}" not in again.stdout + again.stderr
