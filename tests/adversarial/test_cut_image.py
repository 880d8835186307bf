"""A cut image taken as a flash source: a full dump cut short after its option-ROM chain passed the catalog's
chain-hash check ("the file differs only in per-card data") and reached the write. A full dump shorter than the
card's own (its backup, taken by nvflash from the same EEPROM) is refused before any write, after the backups."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.nvflash.rig import CARDS, REBAR_3987, build_rig
from fwman.core.errors import ExitCode
from tests.support.counting import tried

TARGET = "0000:41:00.0"


@pytest.mark.parametrize("keep", [700_000, 998_400])
def test_a_cut_dump_is_not_a_flash_source(tmp_path: Path, keep: int) -> None:
    rig = build_rig(tmp_path)
    launch = rig.eeprom("0000:61:00.0")  # a full dump of the launch firmware (the catalog knows its chain hash)
    r = rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    before = {bus: rig.eeprom(bus) for bus, _, _ in CARDS}
    cut = tmp_path / "cut.rom"
    cut.write_bytes(launch[:keep])  # the chain intact, the per-card data after it cut short
    tried()
    r = rig("flash", "--card", "41:00.0", "--image", str(cut), "--allow-downgrade")
    assert r.code == ExitCode.BLOCKED, r.stdout + r.stderr  # type: ignore[attr-defined]
    assert f"the image is a full dump of {keep:,} bytes, shorter than this card's own (999,424 bytes" in r.stderr  # type: ignore[attr-defined]
    assert {bus: rig.eeprom(bus) for bus, _, _ in CARDS} == before  # nothing written
    op = rig("flash", "status", "--json").json()["operations"][-1]  # type: ignore[attr-defined]
    assert (op["state"], op["stopped_at"]) == ("blocked", "size")
    assert [s["state"] for s in op["steps"] if s["name"] == "gates"] == ["done"]  # the gates alone let it through


def test_the_whole_dump_of_another_card_still_flashes(tmp_path: Path) -> None:
    rig = build_rig(tmp_path)
    launch = rig.eeprom("0000:61:00.0")
    assert rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}").code == 0  # type: ignore[attr-defined]
    whole = tmp_path / "whole.rom"
    whole.write_bytes(launch)
    tried()
    r = rig("flash", "--card", "41:00.0", "--image", str(whole), "--allow-downgrade")
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
