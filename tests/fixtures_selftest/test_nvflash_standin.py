"""The stand-in nvflash behaves as the design notes' docs/vbios.md section 4 says the real one does (what fwman
relies on)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from fixtures.nvflash.rig import REBAR_3987, STANDIN_DIR, Rig, build_rig, image
from fwman.core.errors import ParseError
from fwman.firmware.nvflash import protocol as nvflash
from fwman.firmware.rom.parse import parse_rom
from fwman.host.pty import run_in_pty

NVFLASH = str(STANDIN_DIR / "nvflash")
BANNER = "NVIDIA Firmware Update Utility (Version 5.867.0)"


def run(rig: Rig, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NVFLASH, *args], capture_output=True, text=True, env=rig.env.host_env(), input=stdin, check=False
    )


def pty(rig: Rig, *args: str, answers: list[tuple[str, str]]) -> str:
    import os

    return run_in_pty([NVFLASH, *args], env={**os.environ, **rig.env.host_env()}, answers=answers, timeout=60).output


def test_first_line_and_driver_loaded_refusal(tmp_path: Path) -> None:
    rig = build_rig(tmp_path, driver_loaded=True)
    r = run(rig, "--index", "2", "--save", str(tmp_path / "x.rom"))
    assert r.stdout.splitlines()[0] == BANNER
    assert (
        "ERROR: In order to avoid the irreparable damage to your graphics adapter it is necessary to unload the "
        "NVIDIA kernel driver first: rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia_peermem nvidia"
    ) in r.stdout
    assert r.returncode != 0 and not (tmp_path / "x.rom").exists()


def test_piped_confirmation_fails_and_changes_nothing(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    run(rig, "-i", "2", "-r")
    before = rig.eeprom("0000:41:00.0")
    r = run(rig, "-i", "2", str(rig.new_image_path), stdin="y\n")
    assert "Press 'y' to confirm (any other key to abort):" in r.stdout
    assert r.stdout.rstrip().endswith("Nothing changed!")
    assert rig.eeprom("0000:41:00.0") == before


def test_flash_through_a_terminal_keeps_the_cards_own_data(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    before = rig.eeprom("0000:41:00.0")
    refused = pty(rig, "-i", "2", str(rig.new_image_path), answers=[("Press 'y'", "y")])
    assert "write protected" in refused  # protection must come off first
    assert "Setting EEPROM protection complete." in run(rig, "--index", "2", "--protectoff").stdout
    out = pty(rig, "-i", "2", str(rig.new_image_path), answers=[("Press 'y'", "y")])
    assert "Current      - Version:94.02.26.48.15 ID:10DE:2204:3842:3987" in out
    assert f"Replace with - Version:{REBAR_3987} ID:10DE:2204:3842:3987" in out
    assert nvflash.parse_flash(out).outcome is nvflash.FlashOutcome.SUCCESS
    after = rig.eeprom("0000:41:00.0")
    assert parse_rom(after).chain_sha256 == parse_rom(rig.new_image).chain_sha256
    assert after != rig.new_image  # the per-card bytes after the chain stay the card's
    assert after[len(after) - 4096 :] == before[len(before) - 4096 :]


def test_any_other_key_aborts(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    run(rig, "-i", "2", "-r")
    before = rig.eeprom("0000:41:00.0")
    out = pty(rig, "-i", "2", str(rig.new_image_path), answers=[("Press 'y'", "n")])
    assert "Nothing changed!" in out and rig.eeprom("0000:41:00.0") == before


def test_subsystem_mismatch_needs_overridesub_and_typed_yes(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    run(rig, "-i", "2", "-r")
    other = tmp_path / "3982.rom"
    other.write_bytes(image("94.02.42.C0.05", 0x3982, card_data=5))
    out = run(rig, "-i", "2", str(other)).stdout
    assert "WARNING: Firmware image PCI Subsystem ID (3842.3982)" in out
    assert "does not match adapter PCI Subsystem ID (3842.3987)." in out
    assert out.rstrip().endswith("Nothing changed!")
    out = pty(rig, "-i", "2", "-6", str(other), answers=[("'YES'", "yes\n")])
    assert "Nothing changed!" in out  # lower-case is not YES
    out = pty(rig, "-i", "2", "-6", str(other), answers=[("'YES'", "YES\n"), ("Press 'y'", "y")])
    assert nvflash.SUCCESS_LINE in out


def test_board_id_mismatch_cannot_be_overridden(tmp_path: Path) -> None:
    rig = build_rig(tmp_path, board_ids={"0000:41:00.0": "0x03E3"})
    state = json.loads((rig.state / "cards.json").read_text())
    state["image_board_ids"] = {parse_rom(rig.new_image).chain_sha256: "0x0475"}
    (rig.state / "cards.json").write_text(json.dumps(state))
    run(rig, "-i", "2", "-r")
    out = pty(rig, "-i", "2", "-6", str(rig.new_image_path), answers=[("Press 'y'", "y")])
    assert "Adapter Board ID:        03E3" in out and "Firmware image Board ID: 0475" in out
    assert out.rstrip().endswith("ERROR: Board ID mismatch.\r\nNothing changed!")
    assert "Board ID              : 0x0475" in run(rig, "--version", str(rig.new_image_path)).stdout


def test_injected_interrupt_leaves_a_corrupt_eeprom(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("flash:interrupt@2")
    run(rig, "-i", "2", "-r")
    out = pty(rig, "-i", "2", str(rig.new_image_path), answers=[("Press 'y'", "y")])
    assert nvflash.parse_flash(out).outcome is nvflash.FlashOutcome.INCOMPLETE
    damaged = rig.eeprom("0000:41:00.0")
    assert damaged[: len(damaged) // 3] == rig.new_image[: len(damaged) // 3]  # the first part is new
    old, new = parse_rom(image("94.02.26.48.15")).chain_sha256, parse_rom(rig.new_image).chain_sha256
    try:  # the rest of the chain is erased: neither the old firmware nor the new one
        assert parse_rom(damaged).chain_sha256 not in (old, new)
    except ParseError:
        pass


def test_injected_save_failure(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    rig.set_fault("save:error@1")
    r = run(rig, "-i", "1", "--save", str(tmp_path / "b.rom"))
    assert r.returncode != 0 and not (tmp_path / "b.rom").exists()
    assert run(rig, "-i", "2", "--save", str(tmp_path / "c.rom")).returncode == 0


def test_the_rig_starts_with_one_command_and_its_printed_commands_run(tmp_path: Path) -> None:
    """`python -m fixtures.nvflash.rig DIR` (docs/flash.md): the commands it prints run as printed, in a shell,
    through the installed fwman: a backup of every card and a flash of one, on the stand-in only."""
    from fixtures.nvflash.rig import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["rig", str(tmp_path / "rig")]) == 0
    lines = [ln.strip() for ln in out.getvalue().splitlines() if ln.startswith("    ")]
    assert lines[0].startswith("export FWMAN_MACHINE_TOOLS=")
    bindir = Path(sys.executable).parent
    script = "\n".join(["set -e", f'export PATH="{bindir}:$PATH"', *lines])
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "41:00.0" in r.stdout and "94.02.42.80.27" in r.stdout
    eeprom = json.loads((tmp_path / "rig/nvflash-state/cards.json").read_text())["cards"][2]["eeprom"]
    assert parse_rom((tmp_path / "rig/nvflash-state" / eeprom).read_bytes()).version == REBAR_3987
