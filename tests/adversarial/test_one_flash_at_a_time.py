"""Row 1: two flashes at once. The host-wide flash lock lets one flash, restore, backup or upgrade run; a second
one is refused (exit 3) naming the holder, before it backs up or journals anything; a stale lock (a killed
holder, another boot) is taken over with a line saying so; ``flash status`` tells running from killed under
``--root``. Two real processes on the stand-in nvflash rig."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.nvflash.rig import CARDS, REBAR_3987, Rig, build_rig
from fwman.core import paths
from fwman.core.errors import ExitCode
from fwman.firmware.rom.parse import parse_rom
from fwman.host.hostlock import LockHolder, parse_record
from tests.support.counting import tried
from tests.support.procs import journal_step, spawn, wait_for

TARGET = "0000:41:00.0"
FLASH = ("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}")


def eeproms(rig: Rig) -> dict[str, bytes]:
    return {bus: rig.eeprom(bus) for bus, _, _ in CARDS}


def backups(rig: Rig) -> list[Path]:
    return sorted((rig.root / "var/lib/fwman/backups").rglob("*.rom"))


def journals(rig: Rig) -> list[Path]:
    return sorted((rig.root / "var/lib/fwman/journal").glob("*.json"))


def own_backup(rig: Rig, taken: list[Path]) -> str:
    """Return the host path of 41:00.0's backup among ``taken``."""
    path = next(p for p in taken if "0000-41-00.0" in str(p))
    return "/" + str(path.relative_to(rig.root))


def lock_file(rig: Rig) -> Path:
    return rig.root / paths.FLASH_LOCK_FILE.lstrip("/")


def status(rig: Rig) -> dict[str, object]:
    r = rig("flash", "status", "--json")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    return r.json()  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("second", ["flash", "restore", "backup", "upgrade"])
def test_a_second_flash_is_refused_while_the_first_writes(tmp_path: Path, second: str) -> None:
    rig = build_rig(tmp_path)
    go_on = tmp_path / "go-on"
    first = spawn(rig, *FLASH, extra={"NVFLASH_HOLD": str(go_on)})  # the write waits half-way for go_on
    try:
        wait_for("the first flash's write", lambda: journal_step(rig.root, "write", "running"), first)
        taken, ops = backups(rig), journals(rig)
        doc = status(rig)
        assert doc["operations"][-1]["state"] == "running"  # type: ignore[index]
        assert doc["lock"]["pid"] == first.pid  # type: ignore[index]
        argv = {
            "flash": FLASH,
            "restore": ("restore", "--card", "41:00.0", "--backup", own_backup(rig, taken)),
            "backup": ("backup",),
            "upgrade": ("upgrade", "--apply"),
        }[second]
        other = spawn(rig, *argv)
        tried()
        out, err = other.communicate(timeout=120)
        assert other.returncode == ExitCode.BLOCKED, out + err
        assert "another flash" in err and f"pid {first.pid} (fwman flash --card 41:00.0" in err
        assert ") since 20" in err
        assert backups(rig) == taken and journals(rig) == ops  # nothing backed up, nothing journaled
        assert first.poll() is None  # the first one is still writing, undisturbed
    finally:
        go_on.touch()
        out, err = first.communicate(timeout=180)
    assert first.returncode == 0, err
    assert rig.chain(TARGET) == parse_rom(rig.new_image).chain_sha256
    assert lock_file(rig).read_bytes() == b""  # released cleanly: no record left
    assert status(rig)["lock"] is None


def test_a_killed_holder_is_seen_as_killed_and_its_lock_taken_over(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    before = eeproms(rig)
    first = spawn(rig, *FLASH, extra={"NVFLASH_FAIL": "protectoff:hang", "NVFLASH_HANG_SECONDS": "120"})
    try:
        wait_for("the protect-off step", lambda: journal_step(rig.root, "protectoff", "running"), first)
        assert status(rig)["operations"][-1]["state"] == "running"  # type: ignore[index]
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    tried()
    assert eeproms(rig) == before
    record = parse_record(lock_file(rig).read_bytes())
    assert record is not None and record.pid == first.pid  # the killed holder's record is left behind
    doc = status(rig)
    assert doc["lock"] is None and doc["operations"][-1]["state"] == "killed"  # type: ignore[index]
    r = rig("flash", "resume")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert f"took over a stale flash lock: pid {first.pid} (fwman flash --card 41:00.0" in r.stderr  # type: ignore[attr-defined]
    assert "its holder is gone" in r.stderr  # type: ignore[attr-defined]


def test_a_lock_from_another_boot_is_stale_even_when_its_pid_runs(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    lock = lock_file(rig)
    lock.parent.mkdir(parents=True, exist_ok=True)
    # pid 1 runs on every boot: only the boot id can tell this record is stale
    old = LockHolder(1, "fwman flash --card 41:00.0", "2026-11-30T10:00:00Z", "00000000-0000-0000-0000-000000000000")
    lock.write_text(json.dumps(old.to_dict()))
    tried()
    r = rig(*FLASH)
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    if Path(paths.BOOT_ID_FILE).exists():
        said = "took over a stale flash lock: pid 1 (fwman flash --card 41:00.0) since 2026-11-30T10:00:00Z"
        assert f"{said}, taken on another boot" in r.stderr  # type: ignore[attr-defined]
    else:
        assert "took over a stale flash lock: pid 1" in r.stderr  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode)))
def test_any_lock_record_is_a_holder_or_none(data: bytes) -> None:
    tried()
    holder = parse_record(data)
    assert holder is None or isinstance(holder.pid, int)


def test_a_damaged_lock_record_is_said_when_taken_over(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    lock = lock_file(rig)
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(b"{{{ not a record")
    tried()
    r = rig(*FLASH)
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert f"took over a stale flash lock whose record {paths.FLASH_LOCK_FILE} was unreadable" in r.stderr  # type: ignore[attr-defined]
