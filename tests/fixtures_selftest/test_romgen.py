"""The ROM builder puts every documented field where shared/docs/vbios.md says, read back with plain struct."""

from __future__ import annotations

import hashlib
import struct

import pytest

from fixtures.romgen import BLOCK, RomSpec, build_chain, build_rom


def u16(data: bytes, off: int) -> int:
    return int(struct.unpack_from("<H", data, off)[0])


def u32(data: bytes, off: int) -> int:
    return int(struct.unpack_from("<I", data, off)[0])


def test_nvgi_dump_prefix_layout() -> None:
    spec = RomSpec()
    dump = build_rom(spec)
    assert len(dump) == 999_424
    assert dump[0:4] == b"NVGI" and dump[0x2000:0x2004] == b"NVGI"  # Ampere repeats the header at 0x2000
    assert (u16(dump, 0x0C), u16(dump, 0x0E)) == (0x3842, 0x3987)
    assert dump[0x5000:0x5004] == b"RFRD"
    assert u32(dump, 0x5008) == 0x9400
    assert u32(dump, 0x500C) == spec.chain_length
    assert dump[0x9400 : 0x9400 + spec.chain_length] == build_chain(spec)


def test_turing_dump_has_rfrd_at_0x4000_and_no_copy() -> None:
    dump = build_rom(RomSpec(generation="turing", chain_offset=0x9200))
    assert dump[0x4000:0x4004] == b"RFRD" and dump[0x5000:0x5004] != b"RFRD"
    assert dump[0x2000:0x2004] != b"NVGI"
    assert u32(dump, 0x4008) == 0x9200


def test_x86_image_layout() -> None:
    spec = RomSpec(version="94.02.26.48.70")
    x86 = build_chain(spec)[: spec.x86_blocks * BLOCK]
    assert x86[0:2] == b"\x55\xaa" and x86[2] == spec.x86_blocks
    pcir = u16(x86, 0x18)
    assert pcir == 0x170 and x86[pcir : pcir + 4] == b"PCIR"
    assert (u16(x86, pcir + 4), u16(x86, pcir + 6)) == (0x10DE, 0x2204)
    assert x86[pcir + 0x14] == 0x00 and not x86[pcir + 0x15] & 0x80
    npde = (pcir + u16(x86, pcir + 0x0A) + 0x0F) & ~0x0F
    assert x86[npde : npde + 4] == b"NPDE"
    assert (u16(x86, npde + 4), u16(x86, npde + 6)) == (0x101, 0x14)
    assert (u16(x86, npde + 0x10), u16(x86, npde + 0x12)) == (0x3842, 0x3987)
    assert x86[0x38:0x40] == spec.modification_date.encode()
    assert sum(x86) & 0xFF == 0  # the 8-bit checksum
    bit = x86.find(b"\xff\xb8BIT\x00")
    assert bit == 0x1B0
    assert sum(x86[bit : bit + 12]) & 0xFF == 0
    tokens = {chr(x86[bit + 12 + 6 * k]): u16(x86, bit + 12 + 6 * k + 4) for k in range(x86[bit + 10])}
    assert set(tokens) == {"B", "i", "S"}
    # the documented example: bytes 48 26 02 94 70 print as 94.02.26.48.70
    assert x86[tokens["B"] : tokens["B"] + 5] == bytes([0x48, 0x26, 0x02, 0x94, 0x70])
    assert x86[tokens["i"] : tokens["i"] + 5] == bytes([0x48, 0x26, 0x02, 0x94, 0x70])
    assert x86[tokens["i"] + 0x0F : tokens["i"] + 0x17] == spec.build_date.encode()
    version_ptr = u16(x86, tokens["S"] + 3)
    assert x86[version_ptr:].startswith(b"Version 94.02.26.48.70\x00")


def test_efi_and_fwsec_images_carry_the_real_last_bit_quirk() -> None:
    spec = RomSpec()
    chain = build_chain(spec)
    offsets = []
    off = 0
    for blocks in spec.chain_blocks:
        offsets.append(off)
        off += blocks * BLOCK
    efi, fw1, fw2 = offsets[1:]
    assert u32(chain, efi + 4) == 0x0EF1 and u16(chain, efi + 0x0A) == 0x8664
    pcir = efi + u16(chain, efi + 0x18)
    assert chain[pcir + 0x14] == 0x03 and chain[pcir + 0x15] & 0x80  # PCIR says last...
    npde = efi + ((u16(chain, efi + 0x18) + u16(chain, pcir + 0x0A) + 0xF) & ~0xF)
    assert chain[npde : npde + 4] == b"NPDE" and not chain[npde + 0x0A] & 0x80  # ...NPDE says more follow
    for fw, last in ((fw1, False), (fw2, True)):
        p = fw + u16(chain, fw + 0x18)
        assert chain[p + 0x14] == 0xE0
        n = fw + ((u16(chain, fw + 0x18) + u16(chain, p + 0x0A) + 0xF) & ~0xF)
        assert bool(chain[n + 0x0A] & 0x80) is last


@pytest.mark.parametrize(
    ("kind", "size"),
    [("nvgi_dump", 999_424), ("stripped", 999_424 - 0x9400), ("option_rom", None), ("sysfs", None)],
)
def test_kinds_have_documented_sizes(kind: str, size: int | None) -> None:
    spec = RomSpec(kind=kind)  # type: ignore[arg-type]
    data = build_rom(spec)
    expected = {
        "option_rom": spec.chain_length,
        "sysfs": (spec.x86_blocks + spec.efi_blocks) * BLOCK,
    }.get(kind, size)
    assert len(data) == expected
    if kind != "nvgi_dump":
        assert data[:2] == b"\x55\xaa"


def test_sysfs_image_is_about_150_kb() -> None:
    assert 140_000 < len(build_rom(RomSpec(kind="sysfs"))) < 160_000


def test_card_data_changes_only_bytes_after_the_chain() -> None:
    a, b = build_rom(RomSpec(card_data=1)), build_rom(RomSpec(card_data=2))
    end = 0x9400 + RomSpec().chain_length
    assert a[:end] == b[:end]
    assert a[end:] != b[end:]
    assert build_rom(RomSpec(card_data=1)) == a  # deterministic
    assert hashlib.sha256(a).digest() != hashlib.sha256(b).digest()


def test_impossible_specs_are_refused() -> None:
    with pytest.raises(ValueError):
        build_rom(RomSpec(dump_size=0x9400 + 1024))
    with pytest.raises(ValueError):
        build_rom(RomSpec(x86_blocks=256))
    with pytest.raises(ValueError):
        build_rom(RomSpec(version="94.02.26.48"))
    with pytest.raises(ValueError):
        build_rom(RomSpec(chain_offset=0x9401))
