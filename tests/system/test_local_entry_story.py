"""The README upgrade story for a card no catalog knows, end to end through a local entry.

On the stand-in rig, card 41:00.0 becomes a synthetic ``f00d:3090`` board (fixtures/nvflash/unknown_card.py).
The owner has the card maker's update program (a 7-Zip self-extractor shape holding this board's image and a
sister board's) and the MD5 the maker publishes for it. Story: the plan leaves the card alone; a backup; a
local entry from the live IDs, the backup and the package; the plan now flashes it and says "local entry";
fetch from the package; flash with every gate (backups of every card, read-back); reboot; check; the owner
report of that flash; a catalog proposal from the local entry and the report; lint of the proposal.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from pathlib import Path

from fixtures.nvflash.rig import LAUNCH_3987, build_rig
from fixtures.nvflash.unknown_card import LAUNCH, UPDATE, make_unknown_card, vendor_images
from fixtures.packages import build_7z_sfx
from fwman.core.errors import ExitCode
from fwman.firmware.catalog.lint import lint_board_bytes
from fwman.firmware.rom.parse import parse_rom
from tests.support.env import EXAMPLE_HOST
from tests.support.tools import require_tools

BUS = "0000:41:00.0"


def uuids(root: Path) -> set[str]:
    """Return every GPU UUID the rig's recorded driver files name (none of them may reach a report)."""
    found: set[str] = set()
    for path in (root / "proc/driver/nvidia").rglob("*"):
        if path.is_file():
            found |= set(re.findall(r"GPU-[0-9a-f-]{36}", path.read_text(errors="replace")))
    return found


def test_upgrade_story_for_an_unknown_card_through_a_local_entry(tmp_path: Path) -> None:
    require_tools("7zz")
    rig = build_rig(tmp_path)
    make_unknown_card(rig, BUS)
    images = vendor_images()
    package = tmp_path / "Downloads/F00D_ReBAR_Update.exe"
    package.parent.mkdir()
    package.write_bytes(build_7z_sfx(images))
    vendor_md5 = hashlib.md5(package.read_bytes(), usedforsecurity=False).hexdigest()
    ours = parse_rom(images[f"F00D_3090_{UPDATE}.rom"])

    def with_driver() -> None:
        rig.load_driver(True)
        shutil.copytree(EXAMPLE_HOST / "files/proc/driver/nvidia", rig.root / "proc/driver/nvidia")
        info = rig.root / f"proc/driver/nvidia/gpus/{BUS}/information"
        info.write_text(info.read_text().replace(LAUNCH_3987.lower(), LAUNCH.lower()))

    def without_driver() -> None:
        rig.load_driver(False)
        shutil.rmtree(rig.root / "proc/driver/nvidia")

    # 1. the plan: the card is not in any catalog, so it is backed up and left alone
    with_driver()
    plan = rig("upgrade", "--dry-run", "--json").json()  # type: ignore[attr-defined]
    card = next(c for c in plan["gpus"] if c["bus_id"] == BUS)
    assert (card["pci_key"], card["action"]) == ("10de:2204:f00d:3090", "unknown-board")
    without_driver()

    # 2. a verified backup of the card, then the local entry from the live IDs, the backup and the package
    assert rig("backup", "--card", "41:00.0").code == 0  # type: ignore[attr-defined]
    bad = rig("catalog", "add-local", "--card", "41:00.0", "--image", str(package),
              "--expect-md5", "0" * 32, "--md5-source", "https://vendor.example/f00d")  # fmt: skip
    assert bad.code == ExitCode.VERIFICATION and "is not the vendor's" in bad.stderr  # type: ignore[attr-defined]
    assert not (rig.root / "etc/fwman/catalog.d").exists()
    r = rig("catalog", "add-local", "--card", "41:00.0", "--image", str(package), "--expect-md5", vendor_md5,
            "--md5-source", "https://vendor.example/f00d", "--export")  # fmt: skip
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    entry = rig.root / "etc/fwman/catalog.d/10de-2204-f00d-3090.toml"
    text = entry.read_text()
    assert f'version = "{UPDATE}"' in text and f'sha256 = "{ours.sha256}"' in text
    assert f'version = "{LAUNCH}"' in text and "[local]" in text and vendor_md5 in text
    assert f"F00D_3090_{UPDATE}.rom" in r.stdout and "[local]" not in r.stdout.split("curated")[-1]  # type: ignore[attr-defined]
    lint = rig("catalog", "lint", "--local")
    assert lint.code == 0, lint.stdout + lint.stderr  # type: ignore[attr-defined]

    # 3. the plan now flashes it, citing the local entry
    with_driver()
    plan = rig("upgrade", "--dry-run", "--json").json()  # type: ignore[attr-defined]
    card = next(c for c in plan["gpus"] if c["bus_id"] == BUS)
    assert (card["action"], card["target_version"]) == ("flash", UPDATE)
    assert "local entry" in card["board"]
    text_plan = rig("upgrade", "--dry-run").stdout  # type: ignore[attr-defined]
    assert "local entry" in text_plan
    without_driver()

    # 4. fetch from the package: the one image for f00d:3090 is taken and checked against the local entry
    r = rig("fetch", f"f00d:3090/{UPDATE}", "--image", str(package))
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert "(local entry)" in r.stdout and "local entry" in r.stdout.split("checked by")[1]  # type: ignore[attr-defined]
    cached = rig.root / f"var/cache/fwman/images/10de-2204-f00d-3090/{UPDATE}.rom"
    assert cached.read_bytes() == images[f"F00D_3090_{UPDATE}.rom"]
    # rom verify checks the image against the local entry, and says so
    image_file = tmp_path / f"{UPDATE}.rom"
    image_file.write_bytes(cached.read_bytes())
    r = rig("rom", "verify", str(image_file), "--card", "41:00.0", "--json")
    found = {f["id"]: f for f in r.json()["findings"]}  # type: ignore[attr-defined]
    assert found["catalog.hash"]["severity"] == "ok" and "local entry" in found["catalog.hash"]["message"]
    assert found["catalog.local"]["severity"] == "info"
    sister = tmp_path / "sister.rom"
    sister.write_bytes(images[f"F00D_3091_{UPDATE}.rom"])
    r = rig("rom", "verify", str(sister), "--card", "41:00.0")
    assert r.code != 0 and "f00d:3091" in r.stdout + r.stderr  # type: ignore[attr-defined]

    # 5. flash, with backups of every card and a read-back; the other cards stay as they were. Nobody has said
    #    this board keeps a second firmware chip, so the gate stops until the owner accepts that in words.
    before = {b: rig.eeprom(b) for b in ("0000:01:00.0", "0000:21:00.0")}
    r = rig("upgrade", "--apply", "--card", "41:00.0")
    assert r.code == ExitCode.BLOCKED and "second firmware chip" in r.stderr  # type: ignore[attr-defined]
    assert rig.chain(BUS) != ours.chain_sha256
    r = rig("upgrade", "--apply", "--card", "41:00.0", "--i-understand-no-backup-bios")
    assert r.code == 0, r.stdout + r.stderr  # type: ignore[attr-defined]
    assert f"{BUS}: {LAUNCH} -> {UPDATE}: written, read back and verified" in r.stdout  # type: ignore[attr-defined]
    assert rig.chain(BUS) == ours.chain_sha256
    assert {b: rig.eeprom(b) for b in before} == before
    assert rig("backup", "verify").code == 0  # type: ignore[attr-defined]

    # 6. after the reboot (the owner enabled Re-Size BAR; the new firmware offers a large BAR1): check
    rig.reboot()
    resource = rig.root / f"sys/bus/pci/devices/{BUS}/resource"
    lines = resource.read_text().splitlines()
    start = int(lines[1].split()[0], 16)
    lines[1] = f"0x{start:016x} 0x{start + (32 << 30) - 1:016x} {lines[1].split()[2]}"
    resource.write_text("\n".join(lines) + "\n")
    info = rig.root / f"proc/driver/nvidia/gpus/{BUS}/information"
    info.write_text(info.read_text().replace(LAUNCH_3987.lower(), UPDATE.lower()))
    r = rig("upgrade", "--check", "--json")
    rows = {c["bus_id"]: c["result"] for c in r.json()["gpus"]}  # type: ignore[attr-defined]
    assert rows[BUS] == "confirmed"

    # 7. the owner report of that flash: IDs, before/after versions and hashes, BAR1, power, the check; redacted
    report_file = tmp_path / "41.report.json"
    r = rig("flash", "report", "--card", "41:00.0", "--output", str(report_file))
    assert r.code == 0, r.stdout + r.stderr  # type: ignore[attr-defined]
    report = json.loads(report_file.read_text())
    assert report["schema"] == "fwman.report/1"
    assert (report["card"]["subsystem_vendor_id"], report["card"]["subsystem_device_id"]) == ("f00d", "3090")
    assert (report["before"]["version"], report["after"]["version"]) == (LAUNCH, UPDATE)
    assert report["flash"]["image_chain_sha256"] == ours.chain_sha256 == report["after"]["chain_sha256"]
    assert report["before"]["chain_sha256"] not in (None, ours.chain_sha256)
    assert report["after"]["bar1_bytes"] == 32 << 30 and report["check"]["result"] == "confirmed"
    assert f"{LAUNCH}" in r.stdout and "confirmed" in r.stdout  # type: ignore[attr-defined]
    text = report_file.read_text() + r.stdout  # type: ignore[attr-defined]
    for card_uuid in uuids(rig.root):
        assert card_uuid not in text
    assert str(rig.root) not in text and "/var/" not in text

    # 8. the proposal: the local entry plus the report, cited at the public page where the owner posted it
    posted = "https://forge.example/fwman/issues/41"
    proposal = tmp_path / "10de-2204-f00d-3090.toml"
    r = rig("catalog", "propose", "f00d:3090", "--report", str(report_file), posted, "--output", str(proposal))
    assert r.code == 0, r.stdout + r.stderr  # type: ignore[attr-defined]
    board = tomllib.loads(proposal.read_text())
    assert board["format"] == 2 and posted in board["board"]["sources"] and "local" not in board
    by_version = {i["version"]: i for i in board["images"]}
    assert set(by_version) == {LAUNCH, UPDATE}
    assert posted in by_version[UPDATE]["sources"] and posted in by_version[LAUNCH]["sources"]
    assert "https://vendor.example/f00d" in by_version[UPDATE]["sources"]
    assert by_version[UPDATE]["chain_sha256"] == ours.chain_sha256 and by_version[UPDATE]["status"] == "current"

    # 9. lint of the proposal (the catalog's own rules, format 2: every fact cites a source)
    issues = lint_board_bytes(proposal.read_bytes(), f"boards/{proposal.name}")
    assert [i for i in issues if i.level == "error"] == [], issues
