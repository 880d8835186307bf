"""Fork branch listing: a real HTTP forge on 127.0.0.1, a real local git repository, cache and offline."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.forge import ForgeState, forge_server, real_branch_lists
from fwman.core import paths
from fwman.core.config import Config, parse_config
from fwman.core.errors import FwmanError, ParseError, UsageError
from fwman.driver.forks import (
    DEFAULT_FORKS,
    Fork,
    api_base,
    configured_forks,
    forge_repo,
    list_branches,
    list_via_api,
    parse_link_next,
    parse_ls_remote,
)
from fwman.driver.versions import DriverVersion
from fwman.host.live import LiveHost
from tests.helpers import FwmanEnv

AIKITORIA = "https://github.com/aikitoria/open-gpu-kernel-modules"
SHA = "0123456789abcdef0123456789abcdef01234567"


def no_git_host(root: Path) -> LiveHost:
    """A live host whose PATH has no git (the API path is taken)."""
    empty = root.parent / f"{root.name}-emptybin"
    empty.mkdir(exist_ok=True)
    host = LiveHost(str(root), env={"PATH": str(empty)})
    assert host.which("git") is None
    return host


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
    forks = configured_forks(config, ["local=/srv/fork.git", "tinygrad=https://github.com/t2/ogkm"])
    names = {f.name: f.url for f in forks}
    assert names["aikitoria"] == DEFAULT_FORKS["aikitoria"]
    assert names["mine"] == "https://github.com/me/ogkm"
    assert names["local"] == "/srv/fork.git"
    assert names["tinygrad"] == "https://github.com/t2/ogkm"  # --fork replaces a default of the same name
    assert "api_url" not in names
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


# -- the forge API on a real HTTP server ------------------------------------------------------------------
def test_api_pagination_with_link_headers() -> None:
    lists = real_branch_lists()
    state = ForgeState(repos=lists, max_per_page=5)
    with forge_server(state) as api:
        names = list_via_api(LiveHost("/"), api, "aikitoria", "open-gpu-kernel-modules")
    assert names == lists["aikitoria/open-gpu-kernel-modules"]
    assert len(state.requests) == 4  # 19 branches, 5 a page
    assert state.requests[0] == "/repos/aikitoria/open-gpu-kernel-modules/branches?per_page=100&page=1"


def test_api_pagination_by_page_number_without_link() -> None:
    # a forge that sends no Link header: full pages of 100 make the client ask for ?page=N+1
    real = real_branch_lists()["mylesgoose/open-gpu-kernel-modules"]
    big = real + [f"topic-{i:03d}" for i in range(200)]  # synthetic extra branches, to fill three pages
    state = ForgeState(repos={"big/repo": big}, link_headers=False)
    with forge_server(state) as api:
        names = list_via_api(LiveHost("/"), api, "big", "repo")
    assert names == big
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
        pytest.skip("needs git")
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
    conf = git_root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text('[forks]\ndefaults = false\nlocal = "/srv/git/fork"\n')  # no network in this test
    r = env("driver", "branches", "--root", str(git_root), "--version", "570.86.16", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert [f["fork"] for f in doc["forks"]] == ["local"]
    assert doc["forks"][0]["source"] == "git"
    assert doc["forks"][0]["p2p_versions"] == ["565.77", "570.86.16"]
    assert doc["carried_by"] == ["local"]
    # 575.51.02-p2p exists only as a tag: not carried
    r = env("driver", "branches", "--root", str(git_root), "--version", "575.51.02", "--json")
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
    with forge_server(state) as api:
        yield FwmanEnv(variables={"PATH": str(empty), "FWMAN_FORGE_API": api}), tmp_path / "root", state


def test_cli_version_carried(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--version", "570.86.16", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.driver-branches/1"
    assert doc["carried_by"] == ["aikitoria"]
    assert doc["branch"] == "570.86.16-p2p"


def test_cli_version_not_carried_shows_nearest_and_move(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--version", "575.51.02")
    assert r.code == 0, r.stderr
    assert "No fork carries 575.51.02-p2p" in r.stdout
    assert "Nearest with a branch: 570.86.16 (aikitoria)" in r.stdout
    assert "NVIDIA-Linux-x86_64-570.86.16.run --no-kernel-modules" in r.stdout
    assert "every container" in r.stdout
    r = env("driver", "branches", "--root", str(root), "--version", "560.35.03", "--json")
    doc = r.json()
    assert doc["carried_by"] == ["aikitoria", "mylesgoose"]
    r = env("driver", "branches", "--root", str(root), "--version", "555.42.02", "--json")
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
        r = env("driver", "branches", "--root", str(tmp_path / "root"), "--version", "570.86.16")
    assert r.code == 5
    assert "HTTP 500" in r.stderr
    assert "Unknown whether any fork carries 570.86.16-p2p: no fork could be listed." in r.stdout


def test_cli_bad_version_and_fork(forge_env) -> None:
    env, root, _ = forge_env
    r = env("driver", "branches", "--root", str(root), "--version", "latest")
    assert r.code == 4 and "not an NVIDIA driver version" in r.stderr
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
