"""The declared doors: the clock (a fixed one passed through the environment), the HTTP door (a replay refuses
it before anything is sent), the user-file door (the real cwd, never --root)."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fixtures.forge import ForgeState, forge_server, real_branch_lists
from fixtures.nvflash.rig import build_rig
from fwman.core import clock, paths
from fwman.core.clock import FixedClock
from fwman.core.errors import ExitCode, MissingError, UsageError, VerificationError
from fwman.driver.forks.cache import MAX_CACHE_BYTES, load_cache
from fwman.driver.forks.config import DEFAULT_FORKS
from fwman.driver.forks.forge import list_via_api
from fwman.driver.forks.listing import list_branches
from fwman.driver.forks.model import Fork
from fwman.host.http import MAX_JSON_ANSWER, HttpOptions, http_get, json_getter
from fwman.host.live import LiveHost
from fwman.host.snapshot import SnapshotHost
from fwman.host.userfiles import read_user_file
from tests.support.env import EXAMPLE_HOST

FIXED = datetime(2031, 2, 3, 4, 5, 6, tzinfo=UTC)


# -- clock ----------------------------------------------------------------------------------------------------
def test_a_fixed_clock_through_the_environment_names_the_backup_run(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.env = dataclasses.replace(rig.env, clock=FixedClock(FIXED))
    r = rig("backup", "--card", "41:00.0", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["run"] == "20310203T040506Z"
    assert doc["backups"][0]["path"].endswith("/20310203T040506Z-94.02.26.48.15.rom")
    assert clock.now_utc().year != 2031  # the fixed clock was installed for that one invocation only


def test_fixed_clock_sleep_advances_instead_of_waiting() -> None:
    fixed = FixedClock(FIXED)
    with clock.using(fixed):
        start = clock.monotonic()
        clock.sleep(90)
        assert clock.monotonic() - start == 90
        assert clock.now_utc() == datetime(2031, 2, 3, 4, 6, 36, tzinfo=UTC)


# -- HTTP -----------------------------------------------------------------------------------------------------
def test_a_replay_refuses_http_before_sending_anything() -> None:
    replay = SnapshotHost(EXAMPLE_HOST)
    state = ForgeState(repos=real_branch_lists())
    with forge_server(state) as api:
        with pytest.raises(UsageError, match="a replay does not reach the network") as e:
            http_get(replay, f"{api}/repos/x/y/branches", cap=1024, options=HttpOptions(retries=0))
        assert e.value.exit_code == ExitCode.USAGE
        with pytest.raises(UsageError, match="a replay does not reach the network"):
            list_via_api(replay, api, "tinygrad", "open-gpu-kernel-modules")
        # even without offline=True, listing the forks on a replay sends nothing: the door refuses
        report = list_branches(replay, [Fork(n, u) for n, u in DEFAULT_FORKS.items()], api=api, now=FIXED)
        assert len(list_via_api(LiveHost("/"), api, "tinygrad", "open-gpu-kernel-modules")) == 17  # live: served
    assert len(state.requests) == 1  # only the live request reached the server
    assert {f.source for f in report.forks} <= {"cache", "none"}  # the recorded cache, never live
    assert any("a replay does not reach the network" in (f.error or "") for f in report.forks)


AIKITORIA = DEFAULT_FORKS["aikitoria"]
OVER_CAP = b'[{"name": "' + b"a" * (MAX_JSON_ANSWER + 1) + b'"}]'  # the reviewer's 400 MB answer, scaled down


def no_git(tmp_path: Path) -> LiveHost:
    """Return a live host under ``tmp_path/root`` whose PATH has no git (the forge API is asked)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "root").mkdir(exist_ok=True)
    return LiveHost(str(tmp_path / "root"), env={"PATH": str(tmp_path / "bin")})


@pytest.mark.parametrize("with_length", [True, False])
def test_an_over_long_forge_answer_is_not_read_and_never_cached(tmp_path: Path, with_length: bool) -> None:
    host = no_git(tmp_path)
    state = ForgeState(repos={}, body=OVER_CAP, body_length=with_length)
    with forge_server(state) as api:
        report = list_branches(host, [Fork("aikitoria", AIKITORIA)], api=api, now=FIXED)
        with pytest.raises(VerificationError) as e, json_getter(host, api, headers={}, timeout=5, cap=1000) as get:
            get(f"{api}/repos/aikitoria/open-gpu-kernel-modules/branches")
    fork = report.forks[0]
    assert fork.source == "none" and fork.branches == []
    limit = f"{MAX_JSON_ANSWER}-byte limit"
    if with_length:  # refused from the header, before the body is read
        assert f"the server offers {len(OVER_CAP)} bytes, more than the {limit}" in (fork.error or "")
    else:  # no length: refused as the streamed body passes the cap
        assert f"the answer grew past the {limit}" in (fork.error or "")
    assert e.value.exit_code == ExitCode.VERIFICATION and "1000-byte limit" in e.value.message
    assert not (tmp_path / "root" / paths.BRANCH_CACHE_FILE.lstrip("/")).exists()


def test_names_fwman_refuses_as_a_branch_are_neither_listed_nor_cached(tmp_path: Path) -> None:
    host = no_git(tmp_path)
    listed = ["570.86.16-p2p", "a b", "x" * 5000, "../../etc", "-rf", "main"]
    state = ForgeState(repos={"aikitoria/open-gpu-kernel-modules": listed})
    with forge_server(state) as api:
        report = list_branches(host, [Fork("aikitoria", AIKITORIA)], api=api, now=FIXED)
    assert report.forks[0].source == "api" and report.forks[0].branches == ["570.86.16-p2p", "main"]
    cache = json.loads((tmp_path / "root" / paths.BRANCH_CACHE_FILE.lstrip("/")).read_text())
    assert cache["forks"][AIKITORIA]["branches"] == ["570.86.16-p2p", "main"]


def test_a_page_of_more_branches_than_asked_for_is_could_not_list(tmp_path: Path) -> None:
    host = no_git(tmp_path)
    page = json.dumps([{"name": f"b{i}"} for i in range(101)]).encode()
    with forge_server(ForgeState(repos={}, body=page)) as api:
        report = list_branches(host, [Fork("aikitoria", AIKITORIA)], api=api, now=FIXED)
    assert report.forks[0].source == "none"
    assert "101 branches in one page for aikitoria/open-gpu-kernel-modules, asked for 100" in (
        report.forks[0].error or ""
    )


def test_an_over_long_cache_is_empty_and_the_next_listing_rewrites_it(tmp_path: Path) -> None:
    host = no_git(tmp_path)
    cache = tmp_path / "root" / paths.BRANCH_CACHE_FILE.lstrip("/")
    cache.parent.mkdir(parents=True)
    with cache.open("wb") as f:  # sparse: what an uncapped answer of the past may have left
        f.write(b'{"format": "fwman-branch-cache", "version": 1, "forks": {}}')
        f.truncate(MAX_CACHE_BYTES + 1)
    assert load_cache(host) == {}
    with forge_server(ForgeState(repos=real_branch_lists())) as api:
        list_branches(host, [Fork("aikitoria", AIKITORIA)], api=api, now=FIXED)
    assert cache.stat().st_size < 64 * 1024
    assert load_cache(host)[AIKITORIA]["branches"] == real_branch_lists()["aikitoria/open-gpu-kernel-modules"]


# -- user files -----------------------------------------------------------------------------------------------
def test_user_file_is_read_from_the_real_cwd_never_under_root(tmp_path: Path) -> None:
    (tmp_path / "image.rom").write_bytes(b"\x55\xaa" + b"\0" * 30)
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert read_user_file("image.rom") == b"\x55\xaa" + b"\0" * 30
        assert read_user_file(str(tmp_path / "image.rom"), max_bytes=32)[:2] == b"\x55\xaa"
        with pytest.raises(UsageError, match="larger than"):
            read_user_file("image.rom", max_bytes=31)
        with pytest.raises(MissingError, match="no such file"):
            read_user_file("absent.rom")
        with pytest.raises(UsageError, match="is a directory"):
            read_user_file(".")
    finally:
        os.chdir(old)
