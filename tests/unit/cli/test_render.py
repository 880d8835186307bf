"""What the one text model looks like on a terminal: every style name has its terminal form, and the firmware
commands' colours are the ones they had before they moved onto it (the escapes pinned here)."""

from __future__ import annotations

from pathlib import Path

import click
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.romgen.build import RomSpec, build_rom
from fwman.app import text
from fwman.app.catalog.commands import wrapped
from fwman.cli import render
from tests.support.env import EXAMPLE_HOST, FwmanEnv

SNAP = ("--snapshot", str(EXAMPLE_HOST))


def test_every_style_name_has_its_terminal_form_and_no_other_exists() -> None:
    assert set(render.STYLES) == set(text.STYLES)


def test_the_upgrade_plan_is_coloured_on_a_terminal_and_plain_elsewhere() -> None:
    shown = FwmanEnv(tty=True)("upgrade", "--dry-run", *SNAP)
    assert shown.code == 0, shown.stderr
    out = shown.stdout
    assert "\x1b[36m\x1b[1mflash -> 94.02.42.80.27\x1b[0m" in out  # change: cyan, bold
    assert "  \x1b[32m\x1b[1muse \x1b[0m 94.02.42.80.27" in out  # good: green, bold
    assert "  \x1b[2mskip\x1b[0m 94.02.26.48.15" in out  # dim
    assert "[\x1b[35myou  \x1b[0m]" in out and "[\x1b[34mfwman\x1b[0m]" in out  # magenta, blue
    assert out.startswith("\x1b[1mfwman upgrade --dry-run\x1b[0m\x1b[2m  (snapshot ")
    plain = FwmanEnv()("upgrade", "--dry-run", *SNAP)
    assert "\x1b" not in plain.stdout and "41:00.0  3842:3987" in plain.stdout
    assert "flash -> 94.02.42.80.27" in plain.stdout and "  use  94.02.42.80.27" in plain.stdout


def test_rom_verify_tags_each_check_in_its_severity_colour(tmp_path: Path) -> None:
    rom = tmp_path / "stripped.rom"
    rom.write_bytes(build_rom(RomSpec(kind="stripped")))
    r = FwmanEnv(tty=True)("rom", "verify", str(rom), "--card", "41:00.0", *SNAP)
    assert r.code == 3  # a stripped image is no flash source
    assert "  \x1b[31m\x1b[1mBLOCK\x1b[0m  rom.kind " in r.stdout  # bad: red, bold
    assert "  \x1b[32m\x1b[1mOK   \x1b[0m  rom.device " in r.stdout  # good
    assert "  \x1b[34m\x1b[1mINFO \x1b[0m  " in r.stdout  # info: blue, bold
    assert "verdict:" not in r.stdout  # a block ends the text: no verdict line, then exit 3


#: a note's words: short ones, and ones longer than a line (URLs, hyphenated runs) that must be cut
WORDS = st.one_of(st.text(alphabet="ab-é\t", max_size=8), st.text(alphabet="ab-/:.", min_size=90, max_size=230))


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=30).map(" ".join))
def test_catalog_show_wraps_notes_as_click_did(notes: str) -> None:
    # the notes were wrapped by click.wrap_text in the CLI before catalog show's text moved into app/
    assert wrapped(notes, 100, "  ") == click.wrap_text(notes, width=100, initial_indent="  ", subsequent_indent="  ")
