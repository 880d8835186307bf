"""fwman restore: only the card's own recorded backup goes back, through the same gates as a flash."""

from __future__ import annotations

from pathlib import Path

from fixtures.nvflash.rig import LAUNCH_3987, REBAR_3987, build_rig
from fwman.core.errors import ExitCode
from fwman.firmware.rom.parse import parse_rom


def own_backup(rig: object, doc: dict[str, object], bus: str) -> str:
    return next(b["path"] for b in doc["backups"] if b["bus_id"] == bus)  # type: ignore[index,union-attr]


def test_restore_puts_the_launch_firmware_back(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()
    original = parse_rom(rig.eeprom("0000:41:00.0")).chain_sha256
    assert rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}").code == 0
    assert rig.chain("0000:41:00.0") != original
    r = rig("restore", "--card", "41:00.0", "--backup", own_backup(rig, doc, "0000:41:00.0"), "--json")
    assert r.code == 0, r.stderr
    assert (r.json()["before_version"], r.json()["after_version"]) == (REBAR_3987, LAUNCH_3987)
    assert rig.chain("0000:41:00.0") == original
    hist = rig("flash", "history", "--card", "41:00.0", "--json").json()["records"]
    assert [h["kind"] for h in hist] == ["flash", "restore"] and hist[-1]["result"] == "success"


def test_another_cards_backup_is_refused_even_with_the_same_subsystem(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()
    before = rig.eeprom("0000:61:00.0")
    r = rig("restore", "--card", "61:00.0", "--backup", own_backup(rig, doc, "0000:41:00.0"))
    assert r.code == ExitCode.BLOCKED and "belongs to card 0000:41:00.0" in r.stderr
    r = rig("restore", "--card", "61:00.0", "--backup", own_backup(rig, doc, "0000:01:00.0"))
    assert r.code == ExitCode.BLOCKED and "3842:3982" in r.stderr
    assert rig.eeprom("0000:61:00.0") == before


def test_a_file_fwman_did_not_record_is_refused(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    stray = rig.root / "var/lib/fwman/backups/3842-3987/0000-41-00.0/by-hand.rom"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(rig.eeprom("0000:41:00.0"))
    r = rig("restore", "--card", "41:00.0", "--backup", "/var/lib/fwman/backups/3842-3987/0000-41-00.0/by-hand.rom")
    assert r.code == ExitCode.BLOCKED and "not a backup fwman recorded" in r.stderr


def test_a_backup_changed_on_disk_is_refused(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()
    path = own_backup(rig, doc, "0000:41:00.0")
    local = rig.root / path.lstrip("/")
    local.chmod(0o644)
    data = bytearray(local.read_bytes())
    data[-10] ^= 0xFF  # per-card data: the chain still parses, the recorded hash does not match
    local.write_bytes(bytes(data))
    before = rig.eeprom("0000:41:00.0")
    r = rig("restore", "--card", "41:00.0", "--backup", path)
    assert r.code == ExitCode.BLOCKED and "changed since it was recorded" in r.stderr
    assert rig.eeprom("0000:41:00.0") == before


def test_with_reused_backups_the_before_is_what_the_card_holds_not_the_backup(tmp_path: Path) -> None:
    # run R backs up 41:00.0 at the launch firmware, then the card is flashed: R's backup no longer says what
    # the card holds, and a restore or flash reusing R must record the card's own firmware as "before"
    rig = build_rig(tmp_path)
    doc = rig("backup", "--all", "--json").json()
    run, backup = doc["run"], own_backup(rig, doc, "0000:41:00.0")
    assert (
        rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}", "--reuse-backups-from", run).code == 0
    )
    rebar_chain = rig.chain("0000:41:00.0")
    r = rig("restore", "--card", "41:00.0", "--backup", backup, "--reuse-backups-from", run, "--json")
    assert r.code == 0, r.stderr
    assert (r.json()["before_version"], r.json()["after_version"]) == (REBAR_3987, LAUNCH_3987)
    last = rig("flash", "history", "--card", "41:00.0", "--json").json()["records"][-1]
    assert (last["kind"], last["before_version"], last["before_chain_sha256"]) == ("restore", REBAR_3987, rebar_chain)
    # the same for a flash onto a card already holding the image: "unchanged", before = after = what it holds
    assert (
        rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}", "--reuse-backups-from", run).code == 0
    )
    r = rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}", "--reuse-backups-from", run, "--json")
    assert r.code == 0 and r.json()["changed"] is False
    last = rig("flash", "history", "--card", "41:00.0", "--json").json()["records"][-1]
    assert (last["result"], last["before_version"], last["after_version"]) == ("unchanged", REBAR_3987, REBAR_3987)
    assert last["before_chain_sha256"] == rig.chain("0000:41:00.0") == rebar_chain
