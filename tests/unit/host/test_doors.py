"""The declared doors: the clock (a fixed one passed through the environment), the HTTP door (a replay refuses
it before anything is sent), the user-file door (the real cwd, never --root)."""

from __future__ import annotations

import dataclasses
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fixtures.forge import ForgeState, forge_server, real_branch_lists
from fixtures.nvflash.rig import build_rig
from fwman.core import clock
from fwman.core.clock import FixedClock
from fwman.core.errors import ExitCode, MissingError, UsageError
from fwman.driver.forks import DEFAULT_FORKS, Fork, list_branches, list_via_api
from fwman.host.http import HttpOptions, http_get
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
