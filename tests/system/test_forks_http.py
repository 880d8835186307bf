"""Fork branch listing against a real HTTP forge on 127.0.0.1 and a real local git repository.

API pages, cache, offline use, and the CLI over them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fixtures.forge import ForgeState, forge_server, real_branch_lists
from fwman.core import paths
from fwman.core.driver_version import DriverVersion
from fwman.core.errors import FwmanError
from fwman.driver.forks.config import DEFAULT_FORKS
from fwman.driver.forks.forge import list_via_api
from fwman.driver.forks.listing import list_branches
from fwman.driver.forks.model import Fork
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.tools import missing

AIKITORIA = "https://github.com/aikitoria/open-gpu-kernel-modules"
SHA = "0123456789abcdef0123456789abcdef01234567"


def no_git_host(root: Path) -> LiveHost:
    """A live host whose PATH has no git (the API path is taken)."""
    empty = root.parent / f"{root.name}-emptybin"
    empty.mkdir(exist_ok=True)
    host = LiveHost(str(root), env={"PATH": str(empty)})
    assert host.which("git") is None
    return host


# -- the forge API on a real HTTP server ------------------------------------------------------------------
def test_api_pagination_with_link_headers() -> None:
    lists = real_branch_lists()
    state = ForgeState(repos=lists, max_per_page=5)
    with forge_server(state) as api:
        names = list_via_api(LiveHost("/"), api, "aikitoria", "open-gpu-kernel-modules")
    assert list(names) == lists["aikitoria/open-gpu-kernel-modules"]
    assert len(state.requests) == 4  # 19 branches, 5 a page
    assert state.requests[0] == "/repos/aikitoria/open-gpu-kernel-modules/branches?per_page=100&page=1"


def test_api_pagination_by_page_number_without_link() -> None:
    # a forge that sends no Link header: full pages of 100 make the client ask for ?page=N+1
    real = real_branch_lists()["mylesgoose/open-gpu-kernel-modules"]
    big = real + [f"topic-{i:03d}" for i in range(200)]  # synthetic extra branches, to fill three pages
    state = ForgeState(repos={"big/repo": big}, link_headers=False)
    with forge_server(state) as api:
        names = list_via_api(LiveHost("/"), api, "big", "repo")
    assert list(names) == big
    assert [r.rsplit("page=", 1)[1] for r in state.requests] == ["1", "2", "3"]


def test_api_single_page_is_one_request() -> None:
    state = ForgeState(repos=real_branch_lists())
    with forge_server(state) as api:
        assert len(list_via_api(LiveHost("/"), api, "tinygrad", "open-gpu-kernel-modules")) == 17
    assert len(state.requests) == 1


def test_api_server_error() -> None:
    with forge_server(ForgeState(repos={}, fail_status=500)) as api, pytest.raises(FwmanError, match="HTTP 500"):
        list_via_api(LiveHost("/"), api, "aikitoria", "open-gpu-kernel-modules")


def test_list_branches_via_api_writes_cache(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    forks = [Fork(n, u) for n, u in DEFAULT_FORKS.items()]
    with forge_server(ForgeState(repos=real_branch_lists(), max_per_page=7)) as api:
        report = list_branches(host, forks, api=api, now=now)
    assert [f.source for f in report.forks] == ["api", "api", "api"]
    assert report.carrying(DriverVersion.parse("570.86.16")) == ["aikitoria"]
    assert report.carrying(DriverVersion.parse("550.54.15")) == ["aikitoria", "tinygrad", "mylesgoose"]
    assert [str(v) for v in report.forks[1].p2p_versions()] == ["550.54.15", "550.90.07", "565.57.01"]
    cache = json.loads((tmp_path / paths.BRANCH_CACHE_FILE.lstrip("/")).read_text())
    assert cache["forks"][AIKITORIA]["fetched_at"] == now.isoformat()
    assert "570.86.16-p2p" in cache["forks"][AIKITORIA]["branches"]


def test_server_error_falls_back_to_cache_with_age(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    forks = [Fork("aikitoria", AIKITORIA)]
    then = datetime(2026, 1, 1, tzinfo=UTC)
    with forge_server(ForgeState(repos=real_branch_lists())) as api:
        list_branches(host, forks, api=api, now=then)
    with forge_server(ForgeState(repos={}, fail_status=500)) as api:
        report = list_branches(host, forks, api=api, now=then + timedelta(hours=5))
    f = report.forks[0]
    assert f.source == "cache"
    assert f.age_seconds(report.now) == 5 * 3600
    assert f.error is not None and "HTTP 500" in f.error
    assert report.carrying(DriverVersion.parse("565.77")) == ["aikitoria"]


def test_server_error_without_cache(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    with forge_server(ForgeState(repos={}, fail_status=500)) as api:
        report = list_branches(host, [Fork("aikitoria", AIKITORIA)], api=api)
    assert report.forks[0].source == "none"
    assert not report.any_available


def test_offline_uses_cache_and_never_the_network(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    forks = [Fork("aikitoria", AIKITORIA), Fork("tinygrad", DEFAULT_FORKS["tinygrad"])]
    then = datetime(2026, 1, 1, tzinfo=UTC)
    state = ForgeState(repos=real_branch_lists())
    with forge_server(state) as api:
        list_branches(host, forks[:1], api=api, now=then)
        before = len(state.requests)
        report = list_branches(host, forks, api=api, offline=True, now=then + timedelta(days=3))
        assert len(state.requests) == before
    assert [f.source for f in report.forks] == ["cache", "none"]
    assert report.forks[0].age_seconds(report.now) == 3 * 86400
    assert not report.complete and report.any_available


def test_offline_without_cache(tmp_path: Path) -> None:
    report = list_branches(LiveHost(str(tmp_path)), [Fork("aikitoria", AIKITORIA)], offline=True)
    assert report.forks[0].source == "none"
    assert report.forks[0].error is not None and "offline" in report.forks[0].error


def test_unreachable_forge_is_offline(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    with forge_server(ForgeState(repos={})) as api:
        dead = api  # the port is closed once the server stops
    report = list_branches(host, [Fork("aikitoria", AIKITORIA)], api=dead, timeout=5)
    assert report.forks[0].source == "none"
    assert "cannot reach" in (report.forks[0].error or "")


# -- a real local git repository with branches and same-named tags -----------------------------------------
def make_repo(path: Path) -> None:
    """Create a git repository with P2P branches, a tag that shares a branch's name, and a tag-only 'version'."""
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("fork\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    for branch in ["570.86.16-p2p", "565.77-p2p", "VK551_06", "550"]:
        subprocess.run([*git, "branch", branch], check=True)
    for tag in ["570.86.16-p2p", "575.51.02-p2p"]:  # same name as a branch; and a tag with no branch
        subprocess.run([*git, "tag", tag], check=True)


@pytest.fixture
def git_root(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        missing("needs git (Debian package git)")
    root = tmp_path / "root"
    make_repo(root / "srv/git/fork")
    return root


def test_local_repo_branches_not_tags(git_root: Path) -> None:
    host = LiveHost(str(git_root))
    report = list_branches(host, [Fork("local", "/srv/git/fork")])
    f = report.forks[0]
    assert f.source == "git"
    assert sorted(f.branches) == ["550", "565.77-p2p", "570.86.16-p2p", "VK551_06", "main"]
    assert [str(v) for v in f.p2p_versions()] == ["565.77", "570.86.16"]
    assert report.carrying(DriverVersion.parse("575.51.02")) == []


def test_cli_branches_local_repo_and_version(git_root: Path) -> None:
    env = FwmanEnv()
    r = env("driver", "branches", "--root", str(git_root), "--fork", "local=/srv/git/fork", "--offline")
    assert r.code == 5, r.stderr  # offline and nothing cached yet
    assert "no fork could be listed" in r.stderr
    # --fork names the fork to list, alone: the built-in forks (unreachable here) are not asked (issue 39, row 5)
    r = env("driver", "branches", "--root", str(git_root), "--fork", "local=/srv/git/fork", "--json")
    assert r.code == 0, r.stderr
    assert [f["fork"] for f in r.json()["forks"]] == ["local"]
    conf = git_root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text('[forks]\ndefaults = false\nlocal = "/srv/git/fork"\n')  # no network in this test
    r = env("driver", "branches", "--root", str(git_root), "--driver-version", "570.86.16", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert [f["fork"] for f in doc["forks"]] == ["local"]
    assert doc["forks"][0]["source"] == "git"
    assert doc["forks"][0]["p2p_versions"] == ["565.77", "570.86.16"]
    assert doc["carried_by"] == ["local"]
    # 575.51.02-p2p exists only as a tag: not carried
    r = env("driver", "branches", "--root", str(git_root), "--driver-version", "575.51.02", "--json")
    assert r.json()["carried_by"] == [] and r.json()["nearest_below"]["version"] == "570.86.16"
    # and now offline, from the cache the live run wrote
    r = env("driver", "branches", "--root", str(git_root), "--offline")
    assert r.code == 0 and "cache" in r.stdout


# -- the CLI against the forge ------------------------------------------------------------------------------
@pytest.fixture
def forge_env(tmp_path: Path):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    state = ForgeState(repos=real_branch_lists(), max_per_page=10)
    (tmp_path / "root").mkdir()  # --root must exist (issue 14)
    with forge_server(state) as api:
        yield FwmanEnv(variables={"PATH": str(empty), "FWMAN_FORGE_API": api}), tmp_path / "root", state


def test_cli_version_carried(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--driver-version", "570.86.16", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.driver-branches/1"
    assert doc["carried_by"] == ["aikitoria"]
    assert doc["branch"] == "570.86.16-p2p"


def test_cli_version_not_carried_shows_nearest_and_move(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--driver-version", "575.51.02")
    assert r.code == 0, r.stderr
    assert "No fork carries 575.51.02-p2p" in r.stdout
    assert "Nearest with a branch: 570.86.16 (aikitoria)" in r.stdout
    assert "NVIDIA-Linux-x86_64-570.86.16.run --no-kernel-modules" in r.stdout
    assert "every container" in r.stdout
    r = env("driver", "branches", "--root", str(root), "--driver-version", "560.35.03", "--json")
    doc = r.json()
    assert doc["carried_by"] == ["aikitoria", "mylesgoose"]
    r = env("driver", "branches", "--root", str(root), "--driver-version", "555.42.02", "--json")
    doc = r.json()
    assert doc["carried_by"] == []
    assert doc["nearest_below"]["version"] == "550.90.07"
    assert doc["nearest_above"] == {
        "version": "560.35.03",
        "branch": "560.35.03-p2p",
        "forks": ["aikitoria", "mylesgoose"],
    }
    assert [m["version"] for m in doc["moves"]] == ["550.90.07", "560.35.03"]


def test_cli_table_then_offline_shows_age(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root))
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[0].split() == ["FORK", "SOURCE", "AGE", "P2P", "VERSIONS"]
    assert "aikitoria" in r.stdout and "570.86.16" in r.stdout
    r = env("driver", "branches", "--root", str(root), "--offline", "--json")
    assert r.code == 0
    assert {f["source"] for f in r.json()["forks"]} == {"cache"}


def test_cli_server_error_without_cache_is_missing(tmp_path: Path) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    with forge_server(ForgeState(repos={}, fail_status=500)) as api:
        env = FwmanEnv(variables={"PATH": str(empty), "FWMAN_FORGE_API": api})
        (tmp_path / "root").mkdir()
        r = env("driver", "branches", "--root", str(tmp_path / "root"), "--driver-version", "570.86.16")
    assert r.code == 5
    assert "HTTP 500" in r.stderr
    assert "Unknown whether any fork carries 570.86.16-p2p: no fork could be listed." in r.stdout


def test_cli_bad_version_and_fork(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--driver-version", "latest")
    assert r.code == 2 and "not an NVIDIA driver version" in r.stderr  # a bad argument, not bad host data
    r = env("driver", "branches", "--root", str(root), "--fork", "oops")
    assert r.code == 2 and "NAME=URL" in r.stderr


def test_fresh_cache_is_used_without_network_when_allowed(tmp_path: Path) -> None:
    host = no_git_host(tmp_path)
    forks = [Fork("aikitoria", AIKITORIA)]
    then = datetime(2026, 1, 1, tzinfo=UTC)
    state = ForgeState(repos=real_branch_lists())
    with forge_server(state) as api:
        list_branches(host, forks, api=api, now=then)
        assert len(state.requests) == 1
        fresh = list_branches(host, forks, api=api, now=then + timedelta(hours=1), max_cache_age=6 * 3600)
        assert len(state.requests) == 1 and fresh.forks[0].source == "cache"
        stale = list_branches(host, forks, api=api, now=then + timedelta(hours=7), max_cache_age=6 * 3600)
        assert len(state.requests) == 2 and stale.forks[0].source == "api"
