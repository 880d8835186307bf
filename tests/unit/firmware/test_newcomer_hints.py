"""The flash path as a newcomer walks it: every hint names the real cause and a command that works *in that state*.

Each test puts the rig (the example host under a temp root, the stand-in nvflash) in the state a newcomer meets,
takes the command out of the hint fwman printed, runs it in the same state, and checks that it does not fail the
same way (the issue: hints that sent owners to `flash resume` with nothing to resume, to a `fetch` that refuses
the image, and to a `catalog update` with no URL configured).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path

from fixtures.nvflash.rig import LAUNCH_3987, REBAR_3987, WITHDRAWN_3987, Rig, build_rig, md5
from fixtures.nvflash.unknown_card import LAUNCH, UPDATE, make_unknown_card, vendor_images
from fwman.core.errors import ExitCode
from tests.support.env import EXAMPLE_HOST, Result

BOARD_3987 = "var/lib/fwman/catalog/boards/10de-2204-3842-3987.toml"


def _edit_board(rig: Rig, rel: str, text: str | None) -> None:
    """Rewrite (or, with None, remove) a board file of the rig's installed catalog, keeping its index true."""
    cat = rig.root / "var/lib/fwman/catalog"
    index_path = cat / "index.json"
    index = json.loads(index_path.read_text())
    name = rel.split("catalog/", 1)[1]
    if text is None:
        (rig.root / rel).unlink()
        index["files"] = [f for f in index["files"] if f["path"] != name]
    else:
        (rig.root / rel).write_text(text)
        for f in index["files"]:
            if f["path"] == name:
                f["sha256"], f["size"] = hashlib.sha256(text.encode()).hexdigest(), len(text.encode())
    index_path.write_text(json.dumps(index))


def _hinted(result: Result, after: str) -> list[list[str]]:
    """Return the fwman commands in the hint of ``result`` that follow ``after`` (split on ``, then``)."""
    hint = next(line for line in result.stderr.splitlines() if line.strip().startswith("hint:"))
    tail = hint.split(after, 1)[1]
    commands = [part.strip().rstrip(".") for part in re.split(r",? then:? ", tail)]
    return [shlex.split(c)[1:] for c in commands if c.startswith("fwman ")]


def _run(rig: Rig, argv: list[str]) -> Result:
    result = rig(*argv)
    assert isinstance(result, Result)
    return result


def test_the_dual_firmware_gate_in_an_upgrade_names_the_flag_and_a_rerun_that_works(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    board = (rig.root / BOARD_3987).read_text()
    _edit_board(rig, BOARD_3987, board.replace("dual_firmware_switch = true\n", ""))  # unknown to the catalog
    stopped = _run(rig, ["upgrade", "--apply"])
    assert stopped.code == ExitCode.BLOCKED, stopped.stderr
    assert "second firmware chip" in stopped.stderr
    assert "flash resume" not in stopped.stderr  # nothing was written: nothing to resume
    # the command fwman names, in this very state, goes past the gate
    (again,) = _hinted(stopped, "then: ")
    assert again[:2] == ["upgrade", "--apply"] and "--i-understand-no-backup-bios" in again
    done = _run(rig, again)
    assert done.code == 0, done.stderr
    assert rig.chain("0000:41:00.0") == rig.chain("0000:61:00.0")  # both 3987 cards flashed
    resume = _run(rig, ["flash", "resume"])  # what the old hint said: it never could help
    assert "nothing to resume" in resume.stdout + resume.stderr


def test_a_withdrawn_image_points_at_its_replacement_not_at_a_fetch_that_refuses_it(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    withdrawn = f"3842:3987/{WITHDRAWN_3987}"
    refused = _run(rig, ["flash", "--card", "41:00.0", "--image", withdrawn])
    assert refused.code == ExitCode.BLOCKED, refused.stderr  # a gate, not a missing download
    assert "was withdrawn: owners reported a lowered power limit" in refused.stderr
    assert "not downloaded" not in refused.stderr
    fetch, flash = _hinted(refused, f"{REBAR_3987}: ")
    assert fetch == ["fetch", f"3842:3987/{REBAR_3987}"]
    assert flash == ["flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}"]
    for argv in (fetch, flash):
        result = _run(rig, argv)
        assert result.code == 0 and "withdrawn" not in result.stderr, result.stderr
    # fetch refuses the withdrawn image the same way, and names a fetch that works
    again = _run(rig, ["fetch", withdrawn])
    assert again.code == ExitCode.BLOCKED and "was withdrawn" in again.stderr
    (hinted,) = _hinted(again, f"{REBAR_3987}: ")
    assert hinted == ["fetch", f"3842:3987/{REBAR_3987}"] and _run(rig, hinted).code == 0


def test_a_withdrawn_image_given_as_a_file_is_refused_as_withdrawn_with_the_recommended_commands(
    tmp_path: Path,
) -> None:
    """Issue 36 row 4: the file of the withdrawn image was refused as "unverified ... supply the vendor MD5",
    a hint that led toward the withdrawn image."""
    from fixtures.nvflash.rig import image

    rig = build_rig(tmp_path)
    withdrawn = tmp_path / "evga-withdrawn.rom"
    withdrawn.write_bytes(image(WITHDRAWN_3987, 0x3987, card_data=7))
    refused = _run(rig, ["flash", "--card", "41:00.0", "--image", str(withdrawn)])
    assert refused.code == ExitCode.BLOCKED, refused.stderr
    assert f"blocked before any write: {WITHDRAWN_3987} was withdrawn" in refused.stderr
    assert "--expect-md5" not in refused.stderr and "unverified" not in refused.stderr.split("hint:", 1)[1]
    fetch, flash = _hinted(refused, f"{REBAR_3987}: ")
    assert fetch == ["fetch", f"3842:3987/{REBAR_3987}"]
    assert flash == ["flash", "--card", "0000:41:00.0", "--image", f"3842:3987/{REBAR_3987}"]
    for argv in (fetch, flash):
        result = _run(rig, argv)
        assert result.code == 0 and "withdrawn" not in result.stderr, result.stderr
    from fwman.firmware.rom.parse import parse_rom

    assert rig.chain("0000:41:00.0") == parse_rom(rig.new_image).chain_sha256  # the recommended image runs


def test_an_unknown_card_is_described_with_add_local_not_a_catalog_update_without_url(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    make_unknown_card(rig, "0000:41:00.0")

    def driver(loaded: bool) -> None:  # planning reads the firmware through the driver; nvflash needs it gone
        rig.load_driver(loaded)
        nv = rig.root / "proc/driver/nvidia"
        if loaded:
            shutil.copytree(EXAMPLE_HOST / "files/proc/driver/nvidia", nv)
            info = nv / "gpus/0000:41:00.0/information"
            info.write_text(info.read_text().replace(LAUNCH_3987.lower(), LAUNCH.lower()))
        else:
            shutil.rmtree(nv)

    driver(True)
    plan = _run(rig, ["upgrade", "--dry-run"])
    assert plan.code == 0, plan.stderr
    fix = next(line for line in plan.stdout.splitlines() if "add-local --card 41:00.0" in line)
    assert "catalog update" not in plan.stdout
    backup, add_local = _hinted(Result(0, "", "hint: " + fix.split("fix: ", 1)[1]), "file: ")
    assert backup == ["backup", "--card", "41:00.0"]
    assert add_local[:4] == ["catalog", "add-local", "--card", "41:00.0"]
    # the old hint, in this state: no URL is configured, so it could not help
    assert "no catalog URL configured" in _run(rig, ["catalog", "update"]).stderr
    # the new one, with the placeholders filled in as the owner would (the card maker's file and its MD5)
    driver(False)
    assert _run(rig, backup).code == 0
    vendor = tmp_path / "vendor.rom"
    vendor.write_bytes(vendor_images()[f"F00D_3090_{UPDATE}.rom"])
    filled = {"FILE": str(vendor), "HEX": md5(vendor.read_bytes()), "URL": "https://vendor.example/f00d"}
    added = _run(rig, [filled.get(arg, arg) for arg in add_local])
    assert added.code == 0, added.stderr
    driver(True)
    replanned = _run(rig, ["upgrade", "--dry-run", "--json"]).json()
    card = next(c for c in replanned["gpus"] if c["bus_id"] == "0000:41:00.0")
    assert (card["action"], card["target_version"]) == ("flash", UPDATE)


def test_a_changed_installed_catalog_names_a_way_back_that_needs_no_configured_url(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    board = rig.root / BOARD_3987
    board.write_text(board.read_text().replace("launch run", "launch run, edited"))  # the index is not updated
    broken = _run(rig, ["upgrade", "--dry-run"])
    assert broken.code == ExitCode.VERIFICATION and "SHA-256 does not match index.json" in broken.stderr
    assert "no catalog URL configured" in _run(rig, ["catalog", "update"]).stderr  # the old hint's command
    hint = next(line for line in broken.stderr.splitlines() if "hint:" in line)
    removal = re.search(r"\(rm -r (?P<dir>/\S+)\)", hint)
    assert removal is not None and "catalog update --url URL" in hint, hint
    shutil.rmtree(rig.root / removal.group("dir").lstrip("/"))  # what `rm -r` does, under the rig's root
    listed = _run(rig, ["catalog", "list"])
    assert listed.code == 0 and "SHA-256 does not match" not in listed.stderr, listed.stderr


def _on_terminal(rig: Rig, *argv: str, answer: str) -> Result:
    """Run ``fwman argv... --root`` as from a terminal whose user types ``answer``."""
    from tests.support.env import FwmanEnv

    env = rig.env
    terminal = FwmanEnv(path_prepend=env.path_prepend, variables=env.variables, euid=env.euid, tty=True)
    return terminal(*argv, "--root", str(rig.root), stdin=answer)


def test_apply_on_a_terminal_asks_once_and_a_no_changes_nothing_then_the_hinted_yes_runs(tmp_path: Path) -> None:
    """Issue 36 row 6: `upgrade --apply` flashed two cards without asking."""
    rig = build_rig(tmp_path)
    before = {bus: rig.eeprom(bus) for bus in ("0000:41:00.0", "0000:61:00.0")}
    declined = _on_terminal(rig, "upgrade", "--apply", answer="n\n")
    assert declined.code == ExitCode.BLOCKED, declined.stderr
    assert declined.stderr.count("[y/N]") == 1
    assert f"0000:41:00.0 {LAUNCH_3987} -> {REBAR_3987}, 0000:61:00.0 {LAUNCH_3987} -> {REBAR_3987}" in declined.stderr
    assert "upgrade not confirmed: nothing was backed up or written" in declined.stderr
    assert {bus: rig.eeprom(bus) for bus in before} == before
    assert not (rig.root / "var/lib/fwman/backups").exists() or not any((rig.root / "var/lib/fwman/backups").iterdir())
    (hinted,) = _hinted(declined, "without the question: ")
    assert hinted == ["upgrade", "--apply", "--yes"]
    ran = _on_terminal(rig, *hinted, answer="")
    assert ran.code == 0, ran.stderr
    assert "[y/N]" not in ran.stderr
    assert all(rig.eeprom(bus) != old for bus, old in before.items())


def test_apply_on_a_terminal_goes_on_after_a_yes_and_a_script_is_not_asked(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    asked = _on_terminal(rig, "upgrade", "--apply", "--card", "41:00.0", answer="y\n")
    assert asked.code == 0, asked.stderr
    assert asked.stderr.count("[y/N]") == 1 and "flash 1 card(s): 0000:41:00.0" in asked.stderr
    script = _run(rig, ["upgrade", "--apply", "--card", "61:00.0"])  # no terminal: no question
    assert script.code == 0 and "[y/N]" not in script.stderr, script.stderr


def test_card_takes_nvidia_smis_index_and_says_which_card_that_is(tmp_path: Path) -> None:
    """Issue 36 row 6: `--card 2` was refused as "not a PCI bus id"."""
    from tests.support.env import FwmanEnv

    fwman = FwmanEnv()
    snap = str(EXAMPLE_HOST)
    planned = fwman("upgrade", "--dry-run", "--card", "2", "--snapshot", snap)
    assert "--card 2 is nvidia-smi's GPU 2: 0000:41:00.0 (NVIDIA GeForce RTX 3090, 3842:3987)" in planned.stdout
    doc = fwman("upgrade", "--dry-run", "--card", "2", "--json", "--snapshot", snap).json()
    chosen = [c["bus_id"] for c in doc["gpus"] if c["selected"]]
    assert chosen == ["0000:41:00.0"]
    unknown = fwman("upgrade", "--dry-run", "--card", "7", "--snapshot", snap)
    assert unknown.code == ExitCode.USAGE and "nvidia-smi has no GPU 7" in unknown.stderr
    # with the driver unloaded (a flash), nvidia-smi cannot say which card its index was: refused, never guessed
    rig = build_rig(tmp_path)
    refused = _run(rig, ["upgrade", "--apply", "--card", "2"])
    assert refused.code == ExitCode.USAGE
    assert "nvidia-smi cannot be read now" in refused.stderr and "0000:41:00.0 (3842:3987)" in refused.stderr
    assert _run(rig, ["upgrade", "--apply", "--card", "0000:41:00.0"]).code == 0  # the bus id, as the hint says


def test_report_uses_the_last_check_after_the_flash_not_one_run_before_the_reboot(tmp_path: Path) -> None:
    """Issue 36 row 5: a check run before the reboot recorded "unknown", and `report` kept showing it after the
    reboot's check had confirmed the flash."""
    rig = build_rig(tmp_path)
    assert _run(rig, ["upgrade", "--apply", "--card", "41:00.0"]).code == 0
    early = _run(rig, ["upgrade", "--check"])  # the natural thing to try, before the reboot
    assert early.code != 0
    hinted = shlex.split(early.stderr.split("hint:", 1)[1].split("`")[1])[1:]
    assert hinted == ["upgrade", "--check"]
    rig.reboot()
    checked = _run(rig, hinted)  # the hint, after the reboot
    assert checked.code == 0, checked.stderr
    report = _run(rig, ["flash", "report", "--card", "41:00.0", "--json"])
    assert report.code == 0, report.stderr
    doc = report.json()
    assert doc["check"]["result"] == "confirmed"
    assert doc["after"]["version"] == REBAR_3987 and doc["after"]["bar1_bytes"] == 32 << 30
