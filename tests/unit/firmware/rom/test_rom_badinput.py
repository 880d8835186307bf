"""parse_rom on bad input: a model or a ParseError naming field and offset, never another exception."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.romgen import BLOCK, RomSpec, build_rom
from fwman.core.errors import ParseError
from fwman.firmware.rom.chain import MAX_IMAGES
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.rom.parse import parse_rom

# small images keep hypothesis fast; the layout is the same as the full-size defaults
SMALL = RomSpec(
    x86_blocks=4, efi_blocks=2, fwsec_blocks=(1, 2), chain_offset=0x5200, dump_size=0x5200 + 9 * BLOCK + 2048
)
KINDS = ["nvgi_dump", "option_rom", "stripped", "sysfs"]
SMALL_IMAGES = {k: build_rom(RomSpec(**{**SMALL.__dict__, "kind": k})) for k in KINDS}


def parse_or_error(data: bytes) -> RomImage | ParseError:
    """Return the model, or the ParseError after checking it names a field and an offset."""
    try:
        return parse_rom(data)
    except ParseError as e:
        assert e.what == "VBIOS image"
        assert e.field and " " not in e.field  # a field name, e.g. image[1].pcir_pointer
        assert isinstance(e.offset, int) and e.offset >= 0
        assert f"at offset 0x{e.offset:X}" in str(e)
        return e


def expect_error(data: bytes, field: str, offset: int | None = None) -> ParseError:
    """Assert parsing ``data`` fails on ``field`` (at ``offset`` when given) and return the error."""
    result = parse_or_error(data)
    assert isinstance(result, ParseError), f"expected a ParseError on {field}, got a {result.kind} model"
    assert result.field == field, str(result)
    if offset is not None:
        assert result.offset == offset, str(result)
    return result


def image_offsets(spec: RomSpec, base: int) -> list[int]:
    """Return the absolute offsets of the chain images of ``spec`` when the chain starts at ``base``."""
    out, off = [], base
    for blocks in spec.chain_blocks:
        out.append(off)
        off += blocks * BLOCK
    return out


# -- arbitrary and mutated bytes -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([b"", b"NVGI", b"\x55\xaa", b"\x55\xaa\x04"]), st.binary(max_size=4096))
def test_arbitrary_bytes(prefix: bytes, rest: bytes) -> None:
    parse_or_error(prefix + rest)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(KINDS),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 0xFF)), min_size=1, max_size=6),
    st.booleans(),
)
def test_mutated_images(kind: str, writes: list[tuple[int, int]], near_structures: bool) -> None:
    data = bytearray(SMALL_IMAGES[kind])
    base = SMALL.chain_offset if kind == "nvgi_dump" else 0
    starts = image_offsets(SMALL, base)
    for pos, value in writes:
        if near_structures:  # aim at the headers, PCIR, NPDE and BIT of some image, or the NVGI/RFRD prefix
            anchor = [*starts, 0, 0x5000][pos % (len(starts) + 2)]
            pos = anchor + (pos >> 3) % 0x200
        data[pos % len(data)] = value
    parse_or_error(bytes(data))


# -- truncation at every boundary ------------------------------------------------------------------------------


def boundaries(spec: RomSpec, base: int) -> list[int]:
    """Return every structure boundary of a generated file (with a byte either side)."""
    points = {0, 2, 4, 0x0C, 0x0E, 0x10, 0x2000, 0x2010, 0x5000, 0x5008, 0x500C, 0x5010}
    for off in image_offsets(spec, base):
        pcir = off + (0x170 if off == base else (0x1C if off == image_offsets(spec, base)[1] else 0x20))
        points.update({off, off + 0x18, off + 0x1A, off + 0x38, off + 0x40, pcir, pcir + 0x0A, pcir + 0x18})
        points.update({pcir + 0x1C, off + 0x40, off + 0x50, off + 0x190, off + 0x1A4, off + 0x1B0, off + 0x1BC})
        points.update({off + 0x200, off + 0x220, off + 0x240, off + 0x260, off + 0x2E0})
    for off, blocks in zip(image_offsets(spec, base), spec.chain_blocks, strict=True):
        points.add(off + blocks * BLOCK)
    return sorted({q for p in points for q in (p - 1, p, p + 1) if q >= 0})


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_at_every_boundary(kind: str) -> None:
    data = SMALL_IMAGES[kind]
    base = SMALL.chain_offset if kind == "nvgi_dump" else 0
    chain_end = base + SMALL.chain_length
    for cut in boundaries(SMALL, base):
        if cut >= len(data):
            continue
        result = parse_or_error(data[:cut])
        if cut < chain_end and kind in ("nvgi_dump", "option_rom", "stripped") and isinstance(result, RomImage):
            # a prefix of a chain is either the x86 + EFI cut (exactly what sysfs returns) or a file that ends
            # inside an image: read as far as it goes, never a flash source
            efi_end = base + (SMALL.x86_blocks + SMALL.efi_blocks) * BLOCK
            assert not result.flashable
            if result.kind is RomKind.SYSFS_TRUNCATED:
                assert cut == efi_end and base == 0
            else:
                assert result.kind is RomKind.TRUNCATED and result.size == cut
                assert result.declared_size is not None and result.declared_size > cut
                assert f"the file has {cut:,}" in result.notes[-1].message


def test_truncated_dump_is_read_as_far_as_it_goes() -> None:
    data = SMALL_IMAGES["nvgi_dump"]
    x86 = SMALL.chain_offset
    cut = data[: x86 + 3 * BLOCK]
    image = parse_rom(cut)
    assert image.kind is RomKind.TRUNCATED and not image.flashable
    # the identity before the cut is all there; the checksum of a cut image cannot be taken
    assert (image.version, image.subsystem, image.nvgi_subsystem) == ("94.02.26.48.15", "3842:3987", "3842:3987")
    assert image.x86_checksum_ok is None and image.x86_checksum is None
    declared = x86 + SMALL.x86_blocks * BLOCK  # the NPDE sub-image length says the x86 image ends here
    assert image.declared_size == declared and image.chain_length == 3 * BLOCK
    note = image.note("truncated")
    assert note is not None
    assert note.message == f"truncated: the header says {declared:,} bytes, the file has {len(cut):,}"
    # cut right after the x86 image: its NPDE says more follow, its PCIR does not say last
    expect_error(data[: x86 + SMALL.x86_blocks * BLOCK], "image[0].last", x86 + 0x190 + 0x0A)
    expect_error(data[: x86 + SMALL.x86_blocks * BLOCK + 8], "image[1].header", x86 + SMALL.x86_blocks * BLOCK)


def test_a_cut_before_the_bit_table_keeps_what_came_before() -> None:
    data = SMALL_IMAGES["option_rom"]
    image = parse_rom(data[:0x1A8])  # PCIR and NPDE (to 0x1A4) are in, the BIT table (at 0x1B0) is not
    assert image.kind is RomKind.TRUNCATED and image.subsystem == "3842:3987" and image.device_id == "2204"
    assert image.version is None and image.note("bit_missing") is not None


# -- pointers, lengths, loops ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 3), st.integers(0, 0xFFFF), st.sampled_from(["pcir_pointer", "pcir_length", "npde_length"]))
def test_flipped_pointers_and_lengths(index: int, value: int, which: str) -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    off = image_offsets(SMALL, 0)[index]
    pcir = off + struct.unpack_from("<H", data, off + 0x18)[0]
    npde = off + 0x190 if index == 0 else off + 0x40
    target = {"pcir_pointer": off + 0x18, "pcir_length": pcir + 0x0A, "npde_length": npde + 8}[which]
    struct.pack_into("<H", data, target, value)
    parse_or_error(bytes(data))


def test_pcir_pointer_out_of_the_file() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    struct.pack_into("<H", data, 0x18, 0xFFFF)
    err = expect_error(bytes(data), "image[0].pcir_pointer", 0x18)
    assert "0xFFFF" in err.detail


def test_pcir_pointer_to_itself() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    struct.pack_into("<H", data, 0x18, 0)  # the image header is not a PCIR
    expect_error(bytes(data), "image[0].pcir_pointer", 0x18)


def test_zero_length_image_is_a_self_referencing_chain() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    efi = SMALL.x86_blocks * BLOCK
    struct.pack_into("<H", data, efi + 0x40 + 8, 0)  # EFI NPDE length 0: the next image would be itself
    err = expect_error(bytes(data), "image[1].length", efi + 0x40 + 8)
    assert "points at itself" in err.detail


def test_length_0xffff_is_a_truncated_file_never_a_flash_source() -> None:
    data = bytearray(SMALL_IMAGES["nvgi_dump"])
    npde = SMALL.chain_offset + 0x190
    struct.pack_into("<H", data, npde + 8, 0xFFFF)
    image = parse_rom(bytes(data))
    assert image.kind is RomKind.TRUNCATED and not image.flashable
    assert image.declared_size == SMALL.chain_offset + 0xFFFF * BLOCK


def test_a_chain_without_a_last_image_stops_after_max_images() -> None:
    one = bytearray(BLOCK)
    one[0:2] = b"\x55\xaa"
    struct.pack_into("<H", one, 0x18, 0x20)
    one[0x20:0x24] = b"PCIR"
    struct.pack_into("<HHHHB", one, 0x24, 0x10DE, 0x2204, 0, 0x18, 0)
    struct.pack_into("<HHBB", one, 0x30, 1, 0, 0, 0)  # 1 block, x86, not last
    err = expect_error(bytes(one) * (MAX_IMAGES + 4), "chain", 0)
    assert str(MAX_IMAGES) in err.detail


def test_bad_image_signature_in_the_chain() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    second = SMALL.x86_blocks * BLOCK
    data[second : second + 2] = b"\x00\x00"
    expect_error(bytes(data), "image[1].signature", second)


def test_garbage_start() -> None:
    err = expect_error(b"MZ\x90\x00" + bytes(4000), "signature", 0)
    assert "4D 5A 90 00" in err.detail
    expect_error(b"", "signature", 0)


def test_nvgi_without_any_chain() -> None:
    data = bytearray(b"\xff" * 0x20000)
    data[0:4] = b"NVGI"
    expect_error(bytes(data), "chain", BLOCK)


def test_first_image_must_be_x86() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    data[0x170 + 0x14] = 0x03
    expect_error(bytes(data), "image[0].code_type", 0x170 + 0x14)


# -- checksums and the BIT table ---------------------------------------------------------------------------------


def test_wrong_x86_checksum_gives_a_model_that_says_so() -> None:
    data = bytearray(SMALL_IMAGES["nvgi_dump"])
    x86 = slice(SMALL.chain_offset, SMALL.chain_offset + SMALL.x86_blocks * BLOCK)
    data[x86.stop - 1] ^= 0x5A
    image = parse_rom(bytes(data))
    assert not image.x86_checksum_ok
    assert image.x86_checksum == sum(data[x86]) & 0xFF != 0


def test_wrong_bit_header_checksum() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    data[0x1B0 + 11] ^= 0xFF
    expect_error(bytes(data), "bit.checksum", 0x1B0 + 11)


def test_bit_token_pointing_outside_the_x86_image() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    struct.pack_into("<H", data, 0x1BC + 4, SMALL.x86_blocks * BLOCK - 2)  # token B: 8 bytes from the end - 2
    expect_error(bytes(data), "bit.token[B].pointer", SMALL.x86_blocks * BLOCK - 2)


def test_bit_token_table_past_the_image() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    data[0x1B0 + 9] = 0xFF  # token size 255 and 255 tokens reach past the 2 KiB x86 image
    data[0x1B0 + 10] = 0xFF
    data[0x1B0 + 11] = (data[0x1B0 + 11] - (0xFF - 6) - (0xFF - 3)) & 0xFF  # keep the header checksum right
    expect_error(bytes(data), "bit.token_count", 0x1BC)


def test_missing_bit_table_leaves_identity_unknown() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    data[0x1B0:0x1B6] = b"\x00" * 6
    image = parse_rom(bytes(data))
    assert image.version is None and image.build_date is None and image.sign_on is None
    assert image.note("bit_missing") is not None


def test_sign_on_pointer_outside_the_x86_image() -> None:
    data = bytearray(SMALL_IMAGES["option_rom"])
    struct.pack_into("<H", data, 0x240, 0xFFF0)
    expect_error(bytes(data), "bit.token[S].sign_on_pointer", 0xFFF0)


# -- files that are not flash sources still parse ----------------------------------------------------------------


def test_stripped_and_sysfs_images_are_models_not_errors() -> None:
    assert parse_rom(SMALL_IMAGES["stripped"]).kind is RomKind.STRIPPED
    assert parse_rom(SMALL_IMAGES["sysfs"]).kind is RomKind.SYSFS_TRUNCATED
    big = parse_rom(build_rom(RomSpec(kind="sysfs")))
    assert big.kind is RomKind.SYSFS_TRUNCATED and big.size == 152_576


def test_option_rom_padded_to_1_mib_is_still_an_option_rom() -> None:
    chain = build_rom(RomSpec(kind="option_rom"))
    assert parse_rom(chain + b"\xff" * ((1 << 20) - len(chain))).kind is RomKind.OPTION_ROM


def test_a_file_ending_after_a_non_last_image_is_an_error_not_sysfs() -> None:
    data = SMALL_IMAGES["option_rom"]
    cut = (SMALL.x86_blocks + SMALL.efi_blocks + SMALL.fwsec_blocks[0]) * BLOCK
    expect_error(data[:cut], "image[2].last", cut - SMALL.fwsec_blocks[0] * BLOCK + 0x40 + 0x0A)


PRE_KEPLER_SMALL = build_rom(
    RomSpec(era="pre_kepler", kind="option_rom", version="62.92.00.00.01", x86_blocks=4, subsystem_vendor=0x10DE)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x7FF), st.integers(0, 0xFF)), min_size=1, max_size=6))
def test_mutated_pre_kepler_roms(writes: list[tuple[int, int]]) -> None:
    """Mutations of the subsystem word, the version and the headers of a pre-Kepler ROM: a model or a ParseError."""
    data = bytearray(PRE_KEPLER_SMALL)
    for pos, value in writes:
        data[pos % len(data)] = value
    result = parse_or_error(bytes(data))
    if isinstance(result, RomImage) and result.subsystem_origin == "rom_strap_word":
        word = struct.unpack_from("<I", data, 0x54)[0]
        assert result.subsystem == f"{word & 0xFFFF:04x}:{word >> 16:04x}"
        assert result.subsystem_vendor_id not in ("0000", "ffff")


CONTAINER_SMALL = build_rom(
    RomSpec(**{**SMALL.__dict__, "kind": "container", "chain_offset": 0x1600, "dump_size": 0x1600 + 9 * BLOCK + 512})
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x3FFF), st.integers(0, 0xFF)), min_size=1, max_size=6), st.booleans())
def test_mutated_containers(writes: list[tuple[int, int]], near_chain: bool) -> None:
    """Mutations of the head, NVFW, RFRD and the chain of a container: a model or a ParseError."""
    data = bytearray(CONTAINER_SMALL)
    for pos, value in writes:
        data[(0x1400 + pos % 0x600) if near_chain else pos % len(data)] = value
    result = parse_or_error(bytes(data))
    if isinstance(result, RomImage) and result.kind is RomKind.CONTAINER:
        assert not result.flashable and result.chain_offset % BLOCK == 0


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(KINDS), st.integers(1, 0x6000), st.integers(0, 0xFFFF))
def test_any_cut_of_any_kind_with_any_vendor(kind: str, cut: int, vendor: int) -> None:
    """A file cut anywhere, of any vendor: a model (never flashable when cut short) or a ParseError."""
    data = build_rom(RomSpec(**{**SMALL.__dict__, "kind": kind, "vendor_id": vendor}))
    result = parse_or_error(data[: min(cut, len(data))])
    if vendor not in (0x10DE, 0x12D2):
        assert isinstance(result, ParseError)
    elif isinstance(result, RomImage) and result.kind is RomKind.TRUNCATED:
        assert not result.flashable and result.declared_size is not None and result.declared_size > result.size
