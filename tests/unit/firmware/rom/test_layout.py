"""The named VBIOS layouts: offsets, bounds-checked reads, and the errors a bad read gives."""

from __future__ import annotations

import struct

import pytest

from fwman.core.errors import ParseError
from fwman.firmware.rom.layout import BIT_HEADER, NPDE, PCIR, X86, Layout
from fwman.firmware.rom.reader import Reader


def test_reads_and_offsets_follow_the_table() -> None:
    pcir = (
        b"PCIR"
        + struct.pack("<HHHHB", 0x10DE, 0x2204, 0, 0x18, 0)
        + b"\x00\x00\x03"
        + struct.pack("<HHBB", 0xBE, 1, 0, 0x80)
    )
    r = Reader(b"\x00" * 0x20 + pcir)
    assert PCIR.read(r, 0x20, "vendor_id", "x") == 0x10DE and PCIR.read(r, 0x20, "device_id", "x") == 0x2204
    assert PCIR.read(r, 0x20, "blocks", "x") == 0xBE and PCIR.read(r, 0x20, "indicator", "x") == 0x80
    assert PCIR.raw(r, 0x20, "signature") == b"PCIR"
    assert PCIR.at(0x20, "code_type") == 0x34 and PCIR.width("length") == 2
    assert X86.at(0, "strap_subsystem") == 0x54 and X86.width("modification_date") == 8


def test_a_read_past_the_end_names_the_field_and_offset() -> None:
    r = Reader(b"NPDE" + b"\x01\x01\x14\x00")
    with pytest.raises(ParseError) as e:
        NPDE.read(r, 0, "subsystem_vendor", "image[0].npde.subsystem_vendor")
    assert e.value.field == "image[0].npde.subsystem_vendor" and e.value.offset == 0x10
    assert NPDE.raw(r, 0, "blocks") == b""  # a probe past the end gives nothing, never raises


def test_misuse_is_a_programming_error_not_a_parse_error() -> None:
    r = Reader(b"\xff\xb8BIT\x00" + bytes(6))
    with pytest.raises(TypeError):
        BIT_HEADER.read(r, 0, "signature", "bit.header")
    with pytest.raises(KeyError):
        BIT_HEADER.at(0, "no_such_field")


@pytest.mark.parametrize("layout", [PCIR, NPDE, BIT_HEADER, X86])
def test_fixed_fields_lie_inside_the_fixed_size(layout: Layout) -> None:
    # NPDE's subsystem words are the optional tail of revision 0x101 (length 0x14), read only when present
    optional = {"subsystem_vendor", "subsystem_device"} if layout is NPDE else set()
    for name in layout.fields:
        if name not in optional:
            assert layout.at(0, name) + layout.width(name) <= layout.size, name
