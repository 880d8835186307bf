"""The one board-ID rule and the one date rule (core/names.py), as the CLI and the catalog both apply them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fwman.core import names
from fwman.core.errors import UsageError
from fwman.firmware.catalog.schema import BoardInfo, CatalogImage, ImageStatus


@pytest.mark.parametrize(
    ("text", "normal"),
    [("0x0240", "0x0240"), ("240", "0x0240"), ("0x02a0", "0x02A0"), ("0X02A0", "0x02A0"), (" e433 ", "0xE433")],
)
def test_a_board_id_has_one_form_wherever_it_comes_from(text: str, normal: str) -> None:
    assert names.normal_board_id(text) == names.board_id(text) == normal
    # the catalog keeps what it is given in the same form (nvflash records lower-case hex, users type either)
    assert BoardInfo(name="b", maker="m", board_ids=[text]).board_ids == [normal]


@pytest.mark.parametrize("text", ["", "zz", "0x12345", "0x", "-1", "0240 1"])
def test_what_is_not_a_board_id_is_refused_alike(text: str) -> None:
    assert names.normal_board_id(text) is None
    with pytest.raises(UsageError, match="not a board ID"):
        names.board_id(text)
    with pytest.raises(ValidationError, match="at most four digits"):
        BoardInfo(name="b", maker="m", board_ids=[text])


def test_a_date_is_a_real_calendar_day_in_the_cli_and_the_catalog() -> None:
    assert names.is_iso_date("2024-02-29") and not names.is_iso_date("2026-02-30")
    assert names.is_partial_date("2026") and names.is_partial_date("2026-11") and names.is_partial_date("2026-11-29")
    assert not names.is_partial_date("2026-13") and not names.is_partial_date("2026-1-5")
    with pytest.raises(UsageError, match="not a date"):
        names.iso_date("2026-02-30")
    # the catalog's pattern alone took 30 February as a status date
    with pytest.raises(ValidationError, match="YYYY, YYYY-MM or YYYY-MM-DD"):
        CatalogImage(version="94.02.42.80.27", status=ImageStatus.CURRENT, status_date="2026-02-30")
    assert CatalogImage(version="94.02.42.80.27", status=ImageStatus.CURRENT, status_date="2026-02").status_date


def test_a_hash_field_takes_lower_case_hex_of_its_length_only() -> None:
    from fwman.firmware.catalog.overrides import HashOverride

    good = {"board": "10de:2204:3842:3987", "version": "94.02.26.48.15", "md5": "a" * 32, "source": "typed"}
    assert HashOverride(**good).sha256 == ""  # the SHA-256 may be unknown, the MD5 may not
    for bad in ({"md5": "A" * 32}, {"md5": ""}, {"md5": "a" * 31}, {"sha256": "g" * 64}, {"sha256": "a" * 63}):
        with pytest.raises(ValidationError, match=r"must be (32|64) lower-case hex digits"):
            HashOverride(**(good | bad))
    assert names.lower_hex(4, empty_ok=True)("") == ""
