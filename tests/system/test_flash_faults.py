"""A fault at every step of a flash, and the whole upgrade story, on the example rig with the stand-in nvflash.

Each fault test checks the same four things: no card is written without verified backups of every card (cards
other than the target are byte-identical), every stored backup still verifies, the journal says where it
stopped, and the exit code is the documented one (docs/flash.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fixtures.nvflash.rig import CARDS, LAUNCH_3987, REBAR_3987, STOCK_3982, Rig, build_rig, image
from fwman.core.errors import ExitCode
from fwman.firmware.rom.parse import parse_rom
from tests.support.procs import journal_step, spawn, wait_for

TARGET = "0000:41:00.0"
REF = f"3842:3987/{REBAR_3987}"
FLASH = ("flash", "--card", "41:00.0", "--image", REF)


def eeproms(rig: Rig) -> dict[str, bytes]:
    return {bus: rig.eeprom(bus) for bus, _, _ in CARDS}


def last_op(rig: Rig) -> dict[str, object]:
    ops = rig("flash", "status", "--json").json()["operations"]  # type: ignore[attr-defined]
    assert ops, "nothing journaled"
    return ops[-1]  # type: ignore[no-any-return]


def assert_backups_verify(rig: Rig) -> None:
    r = rig("backup", "verify")
    assert r.code == 0, r.stdout + r.stderr  # type: ignore[attr-defined]


def assert_untouched(rig: Rig, before: dict[str, bytes], *, except_: tuple[str, ...] = ()) -> None:
    after = eeproms(rig)
    assert [b for b in after if after[b] != before[b] and b not in except_] == []


# -- one fault per step -----------------------------------------------------------------------------------------
def test_nvflash_missing(tmp_path: Path) -> None:
    from tests.support.env import FwmanEnv

    rig = build_rig(tmp_path)
    before = eeproms(rig)
    bare = FwmanEnv(variables={**rig.env.variables, "PATH": "/usr/bin:/bin"})
    r = bare(*FLASH, "--root", str(rig.root))
    assert r.code == ExitCode.MISSING and "required tool not found: nvflash" in r.stderr
    assert_untouched(rig, before)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("blocked", "gates")


def test_save_fails_on_one_card_so_no_card_is_flashed(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("save:error@3")
    before = eeproms(rig)
    r = rig(*FLASH)
    assert r.code == ExitCode.BLOCKED
    assert "no card is flashed: 1 of 4 backups failed" in r.stderr
    assert_untouched(rig, before)
    assert_backups_verify(rig)  # the three that were taken are good
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("blocked", "backups")


def _mount_tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("a small tmpfs needs root (mount -t tmpfs)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"mount -t tmpfs not permitted here: {r.stderr.decode().strip()}")


def test_disk_full_during_the_backups(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    backups = rig.root / "var/lib/fwman/backups"
    _mount_tmpfs(backups, "2560k")  # room for one dump plus nvflash's temp file, not for two
    try:
        before = eeproms(rig)
        r = rig(*FLASH)
        assert r.code == ExitCode.BLOCKED
        assert "No space left on device" in r.stderr
        assert_untouched(rig, before)
        assert_backups_verify(rig)
        stored = rig("backup", "list", "--json").json()["backups"]  # type: ignore[attr-defined]
        assert 1 <= len(stored) < 4
        assert not [p for p in backups.rglob("*") if p.name.startswith(".fwman")]  # no half-written file
        op = last_op(rig)
        assert (op["state"], op["stopped_at"]) == ("blocked", "backups")
    finally:
        subprocess.run(["umount", str(backups)], check=False)


def test_image_mismatch(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    wrong = tmp_path / "3982.rom"
    wrong.write_bytes(image(STOCK_3982, 0x3982, card_data=9))
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", str(wrong))
    assert r.code == ExitCode.BLOCKED and "subsystem" in r.stderr
    assert_untouched(rig, before)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("blocked", "gates")


def test_driver_loaded(tmp_path: Path) -> None:
    rig = build_rig(tmp_path, driver_loaded=True)
    before = eeproms(rig)
    r = rig(*FLASH)
    assert r.code == ExitCode.BLOCKED
    assert "rmmod nvidia_uvm nvidia" in r.stderr
    assert_untouched(rig, before)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("blocked", "gates")


def test_write_interrupted_then_resumed(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("flash:interrupt@2")
    before = eeproms(rig)
    r = rig(*FLASH)
    assert r.code == ExitCode.VERIFICATION
    assert "DAMAGED" in r.stderr and "fwman flash resume" in r.stderr
    assert_untouched(rig, before, except_=(TARGET,))
    assert rig.eeprom(TARGET) != before[TARGET]
    assert_backups_verify(rig)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("failed", "write")
    assert any("fwman restore --card 0000:41:00.0" in s for s in op["next_steps"])  # type: ignore[union-attr]
    rig.set_fault(None)
    r = rig("flash", "resume")
    assert r.code == 0, r.stderr
    assert rig.chain(TARGET) == parse_rom(rig.new_image).chain_sha256
    assert_untouched(rig, before, except_=(TARGET,))
    assert last_op(rig)["state"] == "done"
    results = [h["result"] for h in rig("flash", "history", "--json").json()["records"]]  # type: ignore[attr-defined]
    assert results == ["failed", "success"]
    assert "nothing to resume" in rig("flash", "resume").stdout


# -- fwman itself killed or interrupted (a real subprocess) ---------------------------------------------------
def test_fwman_killed_between_steps_then_resumed(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    before = eeproms(rig)
    proc = spawn(rig, *FLASH, extra={"NVFLASH_FAIL": "protectoff:hang", "NVFLASH_HANG_SECONDS": "120"})
    try:
        wait_for("the protect-off step", lambda: journal_step(rig.root, "protectoff", "running"), proc)
        wait_for("nvflash to hang", lambda: (rig.state / "hang.pid").exists(), proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # fwman and the nvflash it started (same process group)
        proc.communicate()
    assert_untouched(rig, before)  # killed after the backups, before any write
    assert_backups_verify(rig)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("killed", "protectoff")
    text = rig("flash", "status").stdout  # type: ignore[attr-defined]
    assert "killed at step protectoff" in text
    r = rig("flash", "resume")
    assert r.code == 0, r.stderr
    assert "reusing verified backups of run" in r.stderr  # the backups of the killed run, re-verified
    assert rig.chain(TARGET) == parse_rom(rig.new_image).chain_sha256
    assert_untouched(rig, before, except_=(TARGET,))
    assert last_op(rig)["state"] == "done"


def test_ctrl_c_is_deferred_while_nvflash_writes(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    proc = spawn(rig, *FLASH, extra={"NVFLASH_DELAY": "0.15"})
    wait_for("the write step", lambda: journal_step(rig.root, "write", "running"), proc)
    time.sleep(0.5)  # let nvflash get into its progress bar
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert "interrupted after the write finished and verified" in err
    assert rig.chain(TARGET) == parse_rom(rig.new_image).chain_sha256  # the write was not cut
    op = last_op(rig)
    assert op["state"] == "done"
    assert rig("flash", "history", "--json").json()["records"][-1]["result"] == "success"  # type: ignore[attr-defined]


# -- the whole story ---------------------------------------------------------------------------------------------
def test_upgrade_story_end_to_end(tmp_path: Path) -> None:
    rig = build_rig(tmp_path, driver_loaded=True)
    # the driver is loaded: the plan reads each card's firmware (as nvidia-smi / /proc would)
    info = rig.root / "proc/driver/nvidia/gpus"
    import shutil

    from tests.support.env import EXAMPLE_HOST

    shutil.copytree(EXAMPLE_HOST / "files/proc/driver/nvidia", rig.root / "proc/driver/nvidia")
    plan = rig("upgrade", "--dry-run", "--json")
    assert plan.code == 0, plan.stderr  # type: ignore[attr-defined]
    actions = {c["bus_id"]: c["action"] for c in plan.json()["gpus"]}  # type: ignore[attr-defined]
    assert actions == {b: ("flash" if v == LAUNCH_3987 else "keep") for b, _, v in CARDS}
    before = eeproms(rig)
    r = rig("upgrade", "--apply")
    assert r.code == ExitCode.BLOCKED and "rmmod" in r.stderr  # type: ignore[attr-defined]
    # the owner stops the driver, as the message says
    rig.load_driver(False)
    shutil.rmtree(info.parent)
    r = rig("upgrade", "--apply")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert "0000:41:00.0: 94.02.26.48.15 -> 94.02.42.80.27: written, read back and verified" in r.stdout
    assert "0000:61:00.0: 94.02.26.48.15 -> 94.02.42.80.27: written, read back and verified" in r.stdout
    assert "Re-Size BAR" in r.stdout and "upgrade --check" in r.stdout
    assert_untouched(rig, before, except_=("0000:41:00.0", "0000:61:00.0"))
    assert_backups_verify(rig)
    rig.reboot()
    r = rig("upgrade", "--check", "--json")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    rows = {c["bus_id"]: c["result"] for c in r.json()["gpus"]}  # type: ignore[attr-defined]
    assert rows == {
        "0000:01:00.0": "not flashed",
        "0000:21:00.0": "not flashed",
        "0000:41:00.0": "confirmed",
        "0000:61:00.0": "confirmed",
    }
    kinds = [(h["kind"], h["result"]) for h in rig("flash", "history", "--json").json()["records"]]  # type: ignore[attr-defined]
    assert kinds == [("flash", "success")] * 2 + [("check", "confirmed")] * 2


def test_upgrade_stops_at_the_first_failure(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("flash:interrupt@3")  # the second target (61:00.0)
    before = eeproms(rig)
    r = rig("upgrade", "--apply")
    assert r.code == ExitCode.VERIFICATION
    assert "upgrade stopped at 0000:61:00.0" in r.stderr and "flashed before: 0000:41:00.0" in r.stderr  # type: ignore[attr-defined]
    assert rig.chain("0000:41:00.0") == parse_rom(rig.new_image).chain_sha256
    assert_untouched(rig, before, except_=("0000:41:00.0", "0000:61:00.0"))
    assert_backups_verify(rig)
    # the way out the message gives: resume the damaged card, then the rest with the backups taken first
    run = r.stderr.split("--reuse-backups-from ")[1].split()[0]  # type: ignore[attr-defined]
    rig.set_fault(None)
    assert rig("flash", "resume").code == 0  # type: ignore[attr-defined]
    assert rig.chain("0000:61:00.0") == parse_rom(rig.new_image).chain_sha256
    r = rig("upgrade", "--apply", "--reuse-backups-from", run)
    assert r.code == 0 and "nothing to flash" in r.stderr  # type: ignore[attr-defined]
    assert_untouched(rig, before, except_=("0000:41:00.0", "0000:61:00.0"))


def test_upgrade_check_after_a_reboot_without_rebar_switch(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    assert rig("upgrade", "--apply", "--card", "41:00.0").code == 0  # type: ignore[attr-defined]
    rig.reboot(rebar_enabled=False)
    r = rig("upgrade", "--check")
    assert r.code == ExitCode.VERIFICATION
    assert "Re-Size BAR Support" in r.stdout  # type: ignore[attr-defined]


def test_nvflash_hangs_during_the_write(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("flash:hang@2")
    before = eeproms(rig)
    r = rig(*FLASH, "--timeout", "3")
    assert r.code == ExitCode.VERIFICATION
    assert "write timed out after 3s" in r.stderr and "the card is unchanged" in r.stderr  # type: ignore[attr-defined]
    assert_untouched(rig, before)
    op = last_op(rig)
    assert (op["state"], op["stopped_at"]) == ("failed", "write")


def test_a_restore_after_a_failed_write_settles_it(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()  # type: ignore[attr-defined]
    own = next(b["path"] for b in doc["backups"] if b["bus_id"] == TARGET)
    original = rig.chain(TARGET)
    rig.set_fault("flash:interrupt@2")
    assert rig(*FLASH, "--reuse-backups-from", doc["run"]).code == ExitCode.VERIFICATION  # type: ignore[attr-defined]
    rig.set_fault(None)
    r = rig("restore", "--card", "41:00.0", "--backup", own, "--reuse-backups-from", doc["run"])
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert rig.chain(TARGET) == original
    assert "nothing to resume" in rig("flash", "resume").stdout  # type: ignore[attr-defined]
    assert rig.chain(TARGET) == original
