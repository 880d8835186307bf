"""check_compatible: which findings a parsed image gets against a card, with their severities."""

from __future__ import annotations

import struct

import pytest

from fixtures.romgen import RomSpec, build_rom
from fwman.core.findings import Finding, Severity, worst
from fwman.core.names import normal_board_id
from fwman.firmware.catalog.load import CatalogEntry
from fwman.firmware.catalog.schema import Board
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import DOWNGRADE_FLAG, check_compatible
from fwman.firmware.versions import Order, base_key, compare
from fwman.gpu.card import Card


def image_checks(image: RomImage, target: Card, *, board_id: str | None = None) -> list[Finding]:
    """Return :func:`check_compatible`'s findings for ``image`` on ``target`` without the catalog's."""
    return check_compatible(image, target, None, board_id=board_id, catalog=False)


def card(**kw: str | None) -> Card:
    """Return a 3842:3987 EVGA 3090 FTW3 Ultra on launch firmware at 41:00.0, with ``kw`` changed."""
    fields: dict[str, str | None] = {
        "bus_id": "0000:41:00.0",
        "vendor_id": "10de",
        "device_id": "2204",
        "subsystem_vendor_id": "3842",
        "subsystem_device_id": "3987",
        "vbios_version": "94.02.26.48.15",
        "board_id": None,
    }
    fields.update(kw)
    return Card(**fields)  # type: ignore[arg-type]


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def severity(findings: list[Finding], fid: str) -> Severity:
    return by_id(findings)[fid].severity


REBAR = RomSpec(version="94.02.42.80.27")


def test_the_right_image_for_the_card_passes_every_check() -> None:
    findings = image_checks(parse_rom(build_rom(REBAR)), card())
    sev = {f.id: f.severity for f in findings}
    assert sev == {
        "rom.kind": Severity.OK,
        "rom.device": Severity.OK,
        "rom.subsystem": Severity.OK,
        "rom.board_id": Severity.INFO,  # not known here: said so, not silently skipped
        "rom.x86_checksum": Severity.OK,
        "rom.nvgi_npde": Severity.OK,
        "rom.version": Severity.OK,  # newer than the card's
    }
    assert worst(findings) is Severity.INFO


def test_wrong_subsystem_blocks() -> None:
    findings = image_checks(parse_rom(build_rom(REBAR)), card(subsystem_device_id="3982"))
    f = by_id(findings)["rom.subsystem"]
    assert f.severity is Severity.BLOCK and f.override is None
    assert f.evidence == {"image": "3842:3987", "card": "3842:3982"}


def test_a_pre_kepler_rom_is_matched_by_its_subsystem_word() -> None:
    spec = RomSpec(era="pre_kepler", kind="option_rom", version="70.00.21.00.01", device_id=0x06C0)
    image = parse_rom(build_rom(spec))
    target = card(device_id="06c0", vbios_version="70.00.21.00.01")
    assert severity(image_checks(image, target), "rom.subsystem") is Severity.OK
    wrong = by_id(image_checks(image, card(device_id="06c0", subsystem_device_id="3988")))["rom.subsystem"]
    assert wrong.severity is Severity.BLOCK and wrong.evidence == {"image": "3842:3987", "card": "3842:3988"}


def test_an_image_without_a_subsystem_blocks_and_says_why() -> None:
    image = parse_rom(build_rom(RomSpec(kind="option_rom", npde_subsystem=False, version="86.02.39.00.5A")))
    f = by_id(image_checks(image, card()))["rom.subsystem"]
    assert f.severity is Severity.BLOCK and f.evidence == {"image": "unknown", "card": "3842:3987"}
    assert "HWINFO" in f.message and "+0x54" in f.message


def test_wrong_device_blocks() -> None:
    findings = image_checks(parse_rom(build_rom(RomSpec(device_id=0x2206))), card())
    assert severity(findings, "rom.device") is Severity.BLOCK
    assert "10de:2206" in by_id(findings)["rom.device"].message


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("stripped", Severity.BLOCK), ("sysfs", Severity.BLOCK), ("option_rom", Severity.OK), ("nvgi_dump", Severity.OK)],
)
def test_image_kind(kind: str, expected: Severity) -> None:
    findings = image_checks(parse_rom(build_rom(RomSpec(kind=kind))), card())  # type: ignore[arg-type]
    assert severity(findings, "rom.kind") is expected


def test_bad_checksum_blocks() -> None:
    data = bytearray(build_rom(RomSpec(kind="option_rom")))
    data[0x500] ^= 0xFF
    assert severity(image_checks(parse_rom(bytes(data)), card()), "rom.x86_checksum") is Severity.BLOCK


def test_nvgi_npde_disagreement_blocks() -> None:
    image = parse_rom(build_rom(RomSpec(nvgi_subsystem=(0x3842, 0x3982))))
    findings = image_checks(image, card())
    assert severity(findings, "rom.nvgi_npde") is Severity.BLOCK
    assert severity(findings, "rom.subsystem") is Severity.OK  # the NPDE subsystem is the card's


def test_option_rom_has_no_nvgi_to_cross_check() -> None:
    findings = image_checks(parse_rom(build_rom(RomSpec(kind="option_rom"))), card())
    assert severity(findings, "rom.nvgi_npde") is Severity.INFO


def test_rfrd_disagreement_warns() -> None:
    data = bytearray(build_rom(REBAR))
    struct.pack_into("<I", data, 0x5008, 0x9200)
    findings = image_checks(parse_rom(bytes(data)), card())
    assert severity(findings, "rom.rfrd_offset_disagree") is Severity.WARN


def test_older_image_warns_with_an_override_flag() -> None:
    f = by_id(image_checks(parse_rom(build_rom(RomSpec())), card(vbios_version="94.02.42.80.27")))["rom.version"]
    assert f.severity is Severity.WARN and f.override == DOWNGRADE_FLAG


def test_oem_field_alone_is_not_older_or_newer() -> None:
    # EVGA replaced 94.02.42.80.AD by 94.02.42.80.27: "27" is not a downgrade from "AD"
    f = by_id(image_checks(parse_rom(build_rom(REBAR)), card(vbios_version="94.02.42.80.AD")))["rom.version"]
    assert f.severity is Severity.INFO and "OEM" in f.message


def test_unknown_card_version_is_info() -> None:
    findings = image_checks(parse_rom(build_rom(REBAR)), card(vbios_version=None))
    assert severity(findings, "rom.version") is Severity.INFO


def test_image_without_version_blocks() -> None:
    data = bytearray(build_rom(RomSpec(kind="option_rom")))
    data[0x1B0:0x1B6] = bytes(6)  # no BIT table
    assert severity(image_checks(parse_rom(bytes(data)), card()), "rom.version") is Severity.BLOCK


@pytest.mark.parametrize(
    ("image_board", "card_board", "expected"),
    [
        ("0x0240", "0x0240", Severity.OK),
        ("240", "0x0240", Severity.OK),
        ("0x03E3", "0x0475", Severity.BLOCK),
        (None, "0x0240", Severity.INFO),
        ("0x0240", None, Severity.INFO),
    ],
)
def test_board_id(image_board: str | None, card_board: str | None, expected: Severity) -> None:
    findings = image_checks(parse_rom(build_rom(REBAR)), card(board_id=card_board), board_id=image_board)
    assert severity(findings, "rom.board_id") is expected


def test_version_order_compares_four_fields_and_never_the_build_code() -> None:
    assert base_key("94.02.26.48.15") == (0x94, 0x02, 0x26, 0x48)
    assert base_key("94.02.26.48") is None and base_key("zz.02.26.48.15") is None
    assert compare("94.02.26.48.15", "94.02.42.80.27") is Order.OLDER
    assert compare("94.02.42.80.27", "94.02.26.48.15") is Order.NEWER
    # EVGA replaced .AD by .27: the fifth field is a build code, neither is newer
    assert compare("94.02.42.80.AD", "94.02.42.80.27") is Order.SAME_BASE
    assert compare("94.02.42.80.27", "94.02.42.80.AD") is Order.SAME_BASE
    assert compare("94.02.42.80.ad", "94.02.42.80.AD") is Order.SAME
    assert compare("94.02.42.80", "94.02.42.80.AD") is None


def test_board_id_normalisation() -> None:
    assert normal_board_id("3e3") == "0x03E3" and normal_board_id("board") is None


def test_no_catalog_entry_gives_one_not_in_catalog_warning() -> None:
    findings = check_compatible(parse_rom(build_rom(REBAR)), card(), None)
    assert [f.id for f in findings if f.id.startswith("catalog.")] == ["catalog.entry"]
    assert severity(findings, "catalog.entry") is Severity.WARN


# -- the catalog hook ---------------------------------------------------------------------------------------------


def entry(image_md5: str = "", board_ids: list[str] | None = None, status: str = "current") -> CatalogEntry:
    """Return a catalog entry for 3842:3987 94.02.42.80.27 with the given hash, board IDs and status."""
    board = Board.model_validate(
        {
            "pci": {"vendor": "10de", "device": "2204", "subsystem_vendor": "3842", "subsystem_device": "3987"},
            "board": {"name": "test board", "maker": "test", "board_ids": board_ids or []},
            "images": [{"version": "94.02.42.80.27", "status": status, "md5": image_md5}],
        }
    )
    return CatalogEntry(board, board.images[0])


def test_catalog_entry_adds_hash_and_status_findings() -> None:
    image = parse_rom(build_rom(REBAR))
    ok = by_id(check_compatible(image, card(), entry(image.md5)))
    assert ok["catalog.hash"].severity is Severity.OK and ok["catalog.status"].severity is Severity.OK
    bad = by_id(check_compatible(image, card(), entry("0" * 32)))
    assert bad["catalog.hash"].severity is Severity.BLOCK
    gone = by_id(check_compatible(image, card(), entry(image.md5, status="withdrawn")))
    assert gone["catalog.status"].severity is Severity.BLOCK


def test_catalog_board_ids_are_compared_when_none_is_given() -> None:
    image = parse_rom(build_rom(REBAR))
    listed = entry(image.md5, board_ids=["0x0240", "0x0241"])
    assert severity(check_compatible(image, card(board_id="0x0241"), listed), "rom.board_id") is Severity.OK
    f = by_id(check_compatible(image, card(board_id="0x03e3"), listed))["rom.board_id"]
    assert f.severity is Severity.BLOCK and f.evidence["source"] == "catalog"
    # an explicit board ID (nvflash --version FILE) wins over the catalog's list
    given = check_compatible(image, card(board_id="0x03e3"), listed, board_id="0x03E3")
    assert severity(given, "rom.board_id") is Severity.OK
