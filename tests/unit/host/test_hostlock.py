"""The flash lock on a real temp filesystem: one holder at a time, a clean release leaves no record, a probe
tells who holds it, a stale record is taken over with a line (the stand-in rig tests it across processes in
tests/adversarial/test_one_flash_at_a_time.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fwman.core import paths
from fwman.host.hostlock import LockHeld, LockHolder, exclusive, holder_now, parse_record
from fwman.host.live import LiveHost
from fwman.host.snapshot import SnapshotHost
from tests.support.env import EXAMPLE_HOST


def test_one_holder_at_a_time_and_a_clean_release(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    assert holder_now(host) is None
    with exclusive(host, "fwman flash --card 41:00.0") as mine:
        assert mine is not None and mine.pid == os.getpid()
        held = holder_now(host)
        assert held == mine
        # flock belongs to the open file: a second open in the same process is refused like another process
        refused = rf"another flash is running: pid {os.getpid()} \(fwman flash --card"
        with pytest.raises(LockHeld, match=refused), exclusive(host, "fwman backup"):
            pass
    assert holder_now(host) is None
    assert (tmp_path / paths.FLASH_LOCK_FILE.lstrip("/")).read_bytes() == b""


def test_a_record_whose_holder_is_gone_is_taken_over_with_a_line(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    lock = tmp_path / paths.FLASH_LOCK_FILE.lstrip("/")
    lock.parent.mkdir(parents=True)
    gone = LockHolder(2**22 + 12345, "fwman restore --card 41:00.0", "2026-12-01T10:00:00Z", None)  # past pid_max
    lock.write_text(json.dumps(gone.to_dict()))
    said: list[str] = []
    with exclusive(host, "fwman flash", say=said.append):
        pass
    assert said == [f"took over a stale flash lock: pid {gone.pid} (fwman restore --card 41:00.0) since "
                    "2026-12-01T10:00:00Z, its holder is gone"]  # fmt: skip


def test_a_snapshot_has_no_lock() -> None:
    host = SnapshotHost(EXAMPLE_HOST)
    with exclusive(host, "fwman flash") as mine:
        assert mine is None
    assert holder_now(host) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"[]",
        b'{"format": "fwman-lock"}',
        b'{"format": "fwman-lock", "pid": true, "command": "x", "since": "y"}',
    ],
)
def test_what_is_not_a_record_is_none(data: bytes) -> None:
    assert parse_record(data) is None
