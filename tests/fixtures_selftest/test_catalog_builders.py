"""The catalog builders in tests/support/catalog.py make catalogs that the real loader accepts."""

from __future__ import annotations

from pathlib import Path

from fwman.firmware.catalog.load import load_directory
from fwman.firmware.catalog.schema import parse_board
from tests.support.catalog import LAUNCH, REBAR, WITHDRAWN, board_toml, rom, seed_images, sha256, write_catalog


def test_builders_make_a_catalog_that_loads(tmp_path: Path) -> None:
    image = rom()
    src = write_catalog(tmp_path / "cat", {"10de-2204-3842-3987": board_toml(seed_images(image))})
    cat = load_directory(src)
    entry = cat.entry(f"3842:3987/{REBAR}")
    assert entry.image.sha256 == sha256(image) and entry.image.size == len(image)
    assert cat.serial == 2


def test_board_toml_round_trips_through_the_schema() -> None:
    board = parse_board(board_toml(seed_images()).encode(), "x.toml")
    assert [i.version for i in board.images_newest_first()] == [REBAR, WITHDRAWN, LAUNCH]
