"""VBIOS images inside vendor update packages, found by structure in bytes (pure), and one picked per card."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.packages import build_pe
from fwman.core.errors import BlockedError, VerificationError
from fwman.firmware.rom.package import PackageScan, dedupe_images, scan_blob, select_image
from tests.support.packages import AS02, AS03, TURBO, TURBO_DUMP, tuf


def scan_of(name: str, data: bytes) -> PackageScan:
    """Return the scan of ``data`` as the raw bytes of a package named ``name`` (nothing unpacked)."""
    images, notes = scan_blob(data, name)
    return PackageScan(name, len(data), None, 0, dedupe_images(images), notes)


def test_pe_program_lists_every_embedded_image_with_subsystem_and_version() -> None:
    scan = scan_of("RTX3080_V6.exe", build_pe([AS02, AS03, TURBO, TURBO_DUMP]))
    found = [(i.rom.subsystem, i.rom.version, i.extent) for i in scan.images]
    assert found == [
        ("1043:87b0", "94.02.42.40.66", "structure"),
        ("1043:87b0", "94.02.42.40.65", "structure"),
        ("1043:87eb", "94.02.42.40.70", "structure"),
        ("1043:87eb", "94.02.42.40.71", "unknown"),
    ]
    # the structure extent is the vendor image exactly: the chain plus its padding, not the filler after it
    assert scan.images[0].data == AS02 and scan.images[1].data == AS03


def test_select_takes_the_one_image_for_the_card_and_refuses_none_or_several() -> None:
    scan = scan_of("pkg.exe", build_pe([AS02, AS03, TURBO, TURBO_DUMP]))
    assert select_image(scan, "1043:87b0", "2206", "94.02.42.40.65").data == AS03
    with pytest.raises(BlockedError, match="2 different images for 1043:87b0 device 2206: fwman does not pick"):
        select_image(scan, "1043:87b0", "2206")
    with pytest.raises(VerificationError, match="no image for 3842:3987") as e:
        select_image(scan, "3842:3987")
    assert "1043:87eb 94.02.42.40.70" in (e.value.hint or "")
    with pytest.raises(VerificationError, match="no image for 1043:87b0 device 2204"):
        select_image(scan, "1043:87b0", "2204", "94.02.42.40.65")
    # a full dump found raw inside a program: its end is not stated anywhere, so it is never taken
    with pytest.raises(BlockedError, match=r"cannot be taken: .*end unknown"):
        select_image(scan, "1043:87eb", "2206", "94.02.42.40.71")


def test_a_plain_rom_is_one_image_of_extent_file() -> None:
    assert [(i.extent, i.data == AS02) for i in scan_of("AS02.rom", AS02).images] == [("file", True)]


def test_a_package_without_images_says_so() -> None:
    with pytest.raises(VerificationError, match="no VBIOS image found"):
        select_image(scan_of("notes.exe", build_pe([])), "1043:87b0")


def test_the_same_chain_twice_is_one_image_the_surest_extent_kept() -> None:
    # an archive member (extent file) and the same bytes found again raw in the package (extent structure)
    member, _ = scan_blob(AS02, "AS02.rom")
    raw, _ = scan_blob(build_pe([AS02]), "pkg.exe")
    assert [(i.origin, i.extent) for i in dedupe_images([*raw, *member])] == [("AS02.rom", "file")]


def test_a_rom_behind_a_512_byte_archive_header_is_the_member_not_a_container() -> None:
    # a tar member starts on a 512-byte boundary: the whole archive parses as a "container" (an unknown prefix,
    # then a chain), but a package scan takes the image inside, never the archive as if it were the ROM
    header = b"odd.rom".ljust(512, b"\x00")
    blob = header + AS02 + b"\x00" * 1024
    images, _ = scan_blob(blob, "pkg.tar")
    assert [(i.offset, i.data) for i in images] == [(512, AS02)]


def test_a_chain_cut_by_the_end_of_a_package_is_not_an_image() -> None:
    images, _ = scan_blob(b"MZ" + b"\x00" * 510 + AS02[: len(AS02) // 2], "pkg.exe")
    assert images == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_scan_blob_never_crashes(blob: bytes, cut: int) -> None:
    # arbitrary bytes, and arbitrary bytes spliced into a real image: images or nothing, never an exception
    for data in (blob, AS02[: cut * 64] + blob, b"NVGI" + blob + AS02[:cut]):
        images, _ = scan_blob(data, "x")
        assert all(i.rom.vendor_id == "10de" for i in images)


def test_a_chain_cut_from_a_dump_is_never_taken() -> None:
    # a stripped dump (chain then per-card data): as a file it stays stripped; inside a program the chain is
    # followed by card data, not padding, so its end is unknown. Neither may become a "clean" option ROM.
    stripped = tuf("94.02.42.40.66", 1, kind="stripped")
    scan = scan_of("x.rom", stripped)
    assert [(i.extent, i.rom.kind.value, i.takeable) for i in scan.images] == [("file", "stripped", False)]
    with pytest.raises(BlockedError, match="cannot be taken"):
        select_image(scan, "1043:87b0")
    scan = scan_of("p.exe", build_pe([stripped]))
    assert [(i.extent, i.takeable) for i in scan.images] == [("unknown", False)]
    with pytest.raises(BlockedError, match="cannot be taken"):
        select_image(scan, "1043:87b0")
