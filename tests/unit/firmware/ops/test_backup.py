"""fwman backup: every card saved through the stand-in nvflash, checked, hashed, never overwritten."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fixtures.nvflash.rig import build_rig
from fwman.core.errors import ExitCode


def test_backup_all_stores_verified_dumps_with_a_manifest(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    r = rig("backup", "--all", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.backup/2" and not doc["failed"]
    run = doc["run"]
    assert {b["bus_id"] for b in doc["backups"]} == {"0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"}
    b41 = next(b for b in doc["backups"] if b["bus_id"] == "0000:41:00.0")
    assert b41["path"] == f"/var/lib/fwman/backups/3842-3987/0000-41-00.0/{run}-94.02.26.48.15.rom"
    stored = (rig.root / b41["path"].lstrip("/")).read_bytes()
    assert stored == rig.eeprom("0000:41:00.0")  # the whole EEPROM, per-card data included
    assert b41["sha256"] == hashlib.sha256(stored).hexdigest()
    manifest = json.loads((rig.root / "var/lib/fwman/backups/manifest.json").read_text())
    assert len(manifest["backups"]) == 4
    assert not list((rig.root / "var/lib/fwman/backups").rglob(".fwman-*"))  # no temp file left


def test_a_second_run_never_overwrites(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    assert rig("backup", "--card", "41:00.0").code == 0
    assert rig("backup", "--card", "41:00.0").code == 0  # same second possible: a suffix, never a replace
    files = sorted((rig.root / "var/lib/fwman/backups/3842-3987/0000-41-00.0").glob("*.rom"))
    assert len(files) == 2
    r = rig("backup", "list", "--json")
    assert len(r.json()["backups"]) == 2


def test_verify_catches_a_changed_backup_and_lists_strays(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()
    assert rig("backup", "verify").code == 0
    victim = rig.root / doc["backups"][0]["path"].lstrip("/")
    victim.chmod(0o644)
    data = bytearray(victim.read_bytes())
    data[0x9500] ^= 0xFF
    victim.write_bytes(bytes(data))
    (victim.parent / "copied-by-hand.rom").write_bytes(b"x")
    r = rig("backup", "verify")
    assert r.code == ExitCode.VERIFICATION
    assert "backup changed on disk" in r.stdout and "not in the manifest" in r.stdout


def test_save_failure_on_one_card_is_partial(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("save:error@2")
    r = rig("backup", "--all")
    assert r.code == ExitCode.PARTIAL
    assert "0000:41:00.0  FAILED: nvflash could not save" in r.stderr
    assert not list((rig.root / "var/lib/fwman/backups/3842-3987/0000-41-00.0").glob("*.rom"))
    assert len(rig("backup", "list", "--json").json()["backups"]) == 3


def test_every_save_failing_is_exit_4(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("save:crash")
    r = rig("backup", "--all")
    assert r.code == ExitCode.VERIFICATION and "no backup taken" in r.stderr


def test_backup_refuses_with_driver_loaded_not_root_and_on_a_snapshot(tmp_path: Path) -> None:
    from tests.support.env import EXAMPLE_HOST, FwmanEnv

    rig = build_rig(tmp_path, driver_loaded=True)
    r = rig("backup", "--all")
    assert r.code == ExitCode.BLOCKED and "rmmod nvidia_uvm nvidia" in r.stderr
    rig.load_driver(False)
    user = FwmanEnv(path_prepend=rig.env.path_prepend, variables=rig.env.variables, euid=1000)
    assert user("backup", "--all", "--root", str(rig.root)).code == ExitCode.BLOCKED
    r = FwmanEnv()("backup", "--all", "--snapshot", str(EXAMPLE_HOST))
    assert r.code == ExitCode.USAGE and "snapshot" in r.stderr


def test_backup_without_nvflash_is_exit_5(tmp_path: Path) -> None:
    from tests.support.env import FwmanEnv

    rig = build_rig(tmp_path)
    bare = FwmanEnv(variables={**rig.env.variables, "PATH": "/usr/bin:/bin"})
    r = bare("backup", "--all", "--root", str(rig.root))
    assert r.code == ExitCode.MISSING and "nvflash" in r.stderr


def test_two_runs_in_the_same_second_get_their_own_run_ids(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from fwman.core.clock import FixedClock
    from tests.support.env import FwmanEnv

    rig = build_rig(tmp_path)
    at = FixedClock(datetime(2026, 11, 29, 8, 30, tzinfo=UTC))  # the clock does not move between the runs
    rig.env = FwmanEnv(path_prepend=rig.env.path_prepend, variables=rig.env.variables, clock=at)
    runs = [rig("backup", "--card", "41:00.0", "--json").json()["run"] for _ in range(3)]  # type: ignore[attr-defined]
    assert runs == ["20261129T083000Z", "20261129T083000Z-2", "20261129T083000Z-3"]
    listed = rig("backup", "list", "--json").json()["backups"]  # type: ignore[attr-defined]
    assert [b["run"] for b in listed] == list(reversed(runs))  # newest first
    assert all(b["path"].endswith(f"/{b['run']}-94.02.26.48.15.rom") for b in listed)  # no "-2.rom" suffixes
    reuse = rig("flash", "--card", "41:00.0", "--image", str(rig.new_image_path), "--reuse-backups-from", runs[1])
    assert reuse.code == ExitCode.BLOCKED  # type: ignore[attr-defined]  # the run names one card only
    assert f"backups of run {runs[1]} do not cover" in reuse.stderr  # type: ignore[attr-defined]


def test_a_mixed_5090_and_3090_rig_is_backed_up_whole_and_the_5090_is_never_flashed(tmp_path: Path) -> None:
    """Issue 36 row 7: an RTX 50 image was refused, so a box mixing a 5090 with 3090s could not be backed up
    whole, and "back up every card before any flash" could not be kept."""
    from fixtures.nvflash.rtx50 import VERSION, make_rtx50_card

    for x86_first in (True, False):
        rig = build_rig(tmp_path / ("x86-first" if x86_first else "fwsec-first"))
        eeprom = make_rtx50_card(rig, "0000:01:00.0", x86_first=x86_first)
        r = rig("backup", "--all", "--json")
        assert r.code == 0, r.stderr
        doc = r.json()
        assert {b["bus_id"] for b in doc["backups"]} == {"0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"}
        b01 = next(b for b in doc["backups"] if b["bus_id"] == "0000:01:00.0")
        assert b01["path"].startswith("/var/lib/fwman/backups/f00d-5090/0000-01-00.0/") and b01["version"] == VERSION
        assert (rig.root / b01["path"].lstrip("/")).read_bytes() == eeprom  # byte for byte
        assert rig("backup", "verify").code == 0
        inspected = rig("rom", "inspect", str(rig.root / b01["path"].lstrip("/")), "--json").json()["image"]
        assert (inspected["kind"], inspected["device_id"], inspected["x86_index"]) == (
            "container",
            "2b85",
            0 if x86_first else 1,
        )
        # the 3090s can be flashed with every card backed up; the 5090's own dump is never a flash source
        assert rig("upgrade", "--apply", "--card", "41:00.0").code == 0
        refused = rig("restore", "--card", "01:00.0", "--backup", b01["path"])
        assert refused.code == ExitCode.BLOCKED, refused.stderr
        assert "a prefix no public source documents" in refused.stderr
        assert rig.eeprom("0000:01:00.0") == eeprom
