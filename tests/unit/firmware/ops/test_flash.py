"""fwman flash: every gate before any write, backups of all cards, pty-driven nvflash, read-back, journal."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fixtures.nvflash.rig import CARDS, REBAR_3987, WITHDRAWN_3987, Rig, build_rig, image
from fwman.core.errors import ExitCode
from fwman.firmware.rom.parse import parse_rom
from tests.support.env import EXAMPLE_HOST, FwmanEnv

TARGET = "0000:41:00.0"
REF = f"3842:3987/{REBAR_3987}"


def eeproms(rig: Rig) -> dict[str, bytes]:
    return {bus: rig.eeprom(bus) for bus, _, _ in CARDS}


def journal(rig: Rig) -> list[dict[str, object]]:
    d = rig.root / "var/lib/fwman/journal"
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []


def assert_nothing_written(rig: Rig, before: dict[str, bytes]) -> None:
    assert eeproms(rig) == before


def test_flash_writes_verifies_journals_and_records(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", REF, "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.flash/2"
    assert (doc["before_version"], doc["after_version"], doc["changed"]) == ("94.02.26.48.15", REBAR_3987, True)
    assert doc["readback_chain_sha256"] == parse_rom(rig.new_image).chain_sha256 == rig.chain(TARGET)
    # only the target changed, and every card was backed up first in one run
    after = eeproms(rig)
    assert [b for b in after if after[b] != before[b]] == [TARGET]
    backups = rig("backup", "list", "--json").json()["backups"]
    assert {b["bus_id"] for b in backups} == {bus for bus, _, _ in CARDS}
    assert {b["run"] for b in backups} == {doc["backup_run"]}
    (op,) = journal(rig)
    assert op["state"] == "done"
    assert [s["name"] for s in op["steps"]] == ["gates", "backups", "protectoff", "write", "readback", "record"]
    assert all(s["state"] == "done" for s in op["steps"])
    log = (rig.root / doc["log"].lstrip("/")).read_text()
    assert "A reboot is required for the update to take effect." in log and "--index 2" in log
    hist = rig("flash", "history", "--json").json()["records"]
    assert hist[-1]["result"] == "success" and hist[-1]["after_version"] == REBAR_3987
    assert hist[-1]["backup"] == next(b["path"] for b in backups if b["bus_id"] == TARGET)
    status = rig("flash", "status", "--json").json()["operations"]
    assert status[-1]["state"] == "done" and status[-1]["stopped_at"] is None


def test_flashing_the_running_firmware_writes_nothing(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    assert rig("flash", "--card", "41:00.0", "--image", REF).code == 0
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", str(rig.new_image_path))
    assert r.code == 0 and "nothing written" in r.stdout
    assert_nothing_written(rig, before)


def test_not_root_blocks(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    before = eeproms(rig)
    user = FwmanEnv(path_prepend=rig.env.path_prepend, variables=rig.env.variables, euid=1000)
    r = user("flash", "--card", "41:00.0", "--image", REF, "--root", str(rig.root))
    assert r.code == ExitCode.BLOCKED and "needs root" in r.stderr
    assert_nothing_written(rig, before)
    assert journal(rig)[-1]["state"] == "blocked"


def test_a_snapshot_never_flashes() -> None:
    for argv in (
        ("flash", "--card", "41:00.0", "--image", REF),
        ("upgrade", "--apply"),
        ("restore", "--card", "41:00.0", "--backup", "/x"),
    ):
        r = FwmanEnv()(*argv, "--snapshot", str(EXAMPLE_HOST))
        # one message for every command that changes a machine (issue 14)
        assert r.code == ExitCode.USAGE and "changes a machine: it cannot run on a --snapshot replay" in r.stderr


def test_process_holding_the_device_blocks_with_the_command_to_stop_it(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    for pid, comm in (("4242", "nvidia-persistenced"), ("777", "python3")):
        fd = rig.root / f"proc/{pid}/fd"
        fd.mkdir(parents=True)
        os.symlink("/dev/nvidia0", fd / "3")
        (rig.root / f"proc/{pid}/comm").write_text(comm + "\n")
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", REF)
    assert r.code == ExitCode.BLOCKED
    assert "hold /dev/nvidia*" in r.stderr
    assert "systemctl stop nvidia-persistenced; kill 777" in r.stderr
    assert_nothing_written(rig, before)
    assert not (rig.root / "var/lib/fwman/backups").exists()  # gates come before even the backups


def test_image_for_another_subsystem_is_blocked(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    other = tmp_path / "3982.rom"
    other.write_bytes(image("94.02.42.C0.05", 0x3982, card_data=7))
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", str(other))
    assert r.code == ExitCode.BLOCKED and "blocked before any write" in r.stderr
    assert "3842:3982" in r.stderr
    assert_nothing_written(rig, before)
    staging = rig.root / "var/lib/fwman/staging"
    assert staging.is_dir() and not list(staging.glob("*"))  # staged for the checks, removed once blocked


def test_withdrawn_and_unhashed_images_are_blocked(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    withdrawn = tmp_path / "ad.rom"
    withdrawn.write_bytes(image(WITHDRAWN_3987, card_data=8))
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", str(withdrawn))
    assert r.code == ExitCode.BLOCKED
    assert "withdrawn" in r.stderr or "no published hash" in r.stderr or "unverified" in r.stderr
    tampered = bytearray(rig.new_image)
    tampered[0x9500] ^= 1
    (tmp_path / "t.rom").write_bytes(bytes(tampered))
    r = rig("flash", "--card", "41:00.0", "--image", str(tmp_path / "t.rom"))
    assert r.code == ExitCode.BLOCKED
    assert_nothing_written(rig, before)


def test_board_id_mismatch_is_blocked_before_nvflash_writes(tmp_path: Path) -> None:
    rig = build_rig(tmp_path, board_ids={TARGET: "0x03e3"})
    state = json.loads((rig.state / "cards.json").read_text())
    state["image_board_ids"] = {parse_rom(rig.new_image).chain_sha256: "0x0475"}
    (rig.state / "cards.json").write_text(json.dumps(state))
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", REF)
    assert r.code == ExitCode.BLOCKED and "board ID" in r.stderr
    assert_nothing_written(rig, before)


def test_no_dual_firmware_switch_needs_the_named_flag(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    board = rig.root / "var/lib/fwman/catalog/boards/10de-2204-3842-3987.toml"
    text = board.read_text().replace("dual_firmware_switch = true", "dual_firmware_switch = false")
    board.write_text(text)
    index_path = rig.root / "var/lib/fwman/catalog/index.json"
    index = json.loads(index_path.read_text())
    import hashlib

    for f in index["files"]:
        if f["path"].endswith("3987.toml"):
            f["sha256"], f["size"] = hashlib.sha256(text.encode()).hexdigest(), len(text.encode())
    index_path.write_text(json.dumps(index))
    before = eeproms(rig)
    r = rig("flash", "--card", "41:00.0", "--image", REF)
    assert r.code == ExitCode.BLOCKED and "--i-understand-no-backup-bios" in r.stderr
    assert_nothing_written(rig, before)
    r = rig("flash", "--card", "41:00.0", "--image", REF, "--i-understand-no-backup-bios")
    assert r.code == 0, r.stderr


def test_reuse_backups_from_a_run(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    run = rig("backup", "--all", "--json").json()["run"]
    r = rig("flash", "--card", "41:00.0", "--image", REF, "--reuse-backups-from", run, "--json")
    assert r.code == 0, r.stderr
    assert r.json()["backup_run"] == run
    assert len(rig("backup", "list", "--json").json()["backups"]) == 4  # no new backups taken
    r = rig("flash", "--card", "61:00.0", "--image", REF, "--reuse-backups-from", "20000101T000000Z")
    assert r.code == ExitCode.BLOCKED and "no backup of" in r.stderr


def test_on_a_terminal_nvflash_output_is_shown_live(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    term = FwmanEnv(path_prepend=rig.env.path_prepend, variables=rig.env.variables, tty=True)
    r = term("flash", "--card", "41:00.0", "--image", REF, "--root", str(rig.root))
    assert r.code == 0, r.stderr
    assert "Update display adapter firmware?" in r.stderr and "100%" in r.stderr
    quiet = rig("flash", "--card", "61:00.0", "--image", REF)
    assert quiet.code == 0 and "Update display adapter firmware?" not in quiet.stderr


@pytest.mark.parametrize("mode", ["--apply", "--check"])
def test_upgrade_dry_run_with_apply_or_check_does_nothing(tmp_path: Path, mode: str) -> None:
    """`--dry-run --apply` once flashed both 3987 cards: a dry run must never write a card or the history."""
    rig = build_rig(tmp_path)
    before = eeproms(rig)
    history = rig.root / "var/lib/fwman/history.jsonl"
    r = rig("upgrade", "--dry-run", mode)
    assert r.code == 2 and "contradict" in r.stderr and "nothing was done" in r.stderr
    assert_nothing_written(rig, before)
    assert not history.exists()
