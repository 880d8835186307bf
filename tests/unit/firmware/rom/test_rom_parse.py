"""parse_rom on well-formed images: inspect returns exactly what the image was built from."""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.romgen import BLOCK, RomSpec, build_chain, build_rom
from fwman.core.errors import ParseError
from fwman.firmware.rom.model import RomImage, RomKind
from fwman.firmware.rom.parse import _sum8, parse_rom

KIND_OF = {
    "nvgi_dump": RomKind.NVGI_DUMP,
    "option_rom": RomKind.OPTION_ROM,
    "stripped": RomKind.STRIPPED,
    "sysfs": RomKind.SYSFS_TRUNCATED,
}

hex_byte = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
date = st.builds(lambda m, d, y: f"{m:02d}/{d:02d}/{y:02d}", st.integers(1, 12), st.integers(1, 31), st.integers(0, 99))
printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=127)


@st.composite
def specs(draw: st.DrawFn) -> RomSpec:
    """Draw a valid RomSpec over every parameter the builder takes."""
    kind = draw(st.sampled_from(list(KIND_OF)))
    generation = draw(st.sampled_from(["ampere", "turing"]))
    x86 = draw(st.integers(2, 0xFF))
    efi = draw(st.integers(1, 0x90))
    fwsec = (draw(st.integers(1, 0x240)), draw(st.integers(1, 0x240)))
    chain_len = (x86 + efi + sum(fwsec)) * BLOCK
    first = 0x5200 if generation == "ampere" else 0x4200
    chain_offset = draw(st.integers(first // BLOCK, 0x30000 // BLOCK)) * BLOCK
    # stripped images are recognised by the card data after the chain, so they get at least some
    extra = draw(st.integers(64 if kind == "stripped" else 0, 0x20000))
    version = ".".join(f"{draw(hex_byte):02X}" for _ in range(5))
    return RomSpec(
        version=version,
        device_id=draw(u16),
        subsystem_vendor=draw(u16),
        subsystem_device=draw(u16),
        dump_size=chain_offset + chain_len + extra,
        chain_offset=chain_offset,
        build_date=draw(date),
        modification_date=draw(date),
        sign_on=draw(printable),
        uefi_version=draw(u16),
        kind=kind,  # type: ignore[arg-type]
        card_data=draw(st.integers(0, 2**16)),
        filler_seed=draw(st.integers(0, 2**16)),
        generation=generation,  # type: ignore[arg-type]
        x86_blocks=x86,
        efi_blocks=efi,
        fwsec_blocks=fwsec,
        fwsec_device_id=draw(u16),
        fwsec_private_signature=draw(st.booleans()),
        version_string=draw(st.none() | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=31)),
    )


def check_round_trip(spec: RomSpec, image: RomImage, data: bytes) -> None:
    """Assert every parameter of ``spec`` comes back from ``image``."""
    assert image.kind is KIND_OF[spec.kind]
    assert image.size == len(data)
    assert image.version == spec.version
    assert image.vendor_id == "10de"
    assert image.device_id == f"{spec.device_id:04x}"
    assert image.subsystem == f"{spec.subsystem_vendor:04x}:{spec.subsystem_device:04x}"
    assert image.build_date == spec.build_date
    assert image.modification_date == spec.modification_date
    assert image.sign_on == spec.sign_on
    assert image.version_string == (spec.version_string or f"Version {spec.version}")
    assert image.uefi_version == f"0x{spec.uefi_version:04X}"
    assert image.x86_checksum_ok
    assert image.notes == []
    full = spec.kind != "sysfs"
    blocks = spec.chain_blocks if full else spec.chain_blocks[:2]
    assert [im.length for im in image.images] == [b * BLOCK for b in blocks]
    assert [im.code_type_name for im in image.images] == ["x86", "efi", "fwsec", "fwsec"][: len(blocks)]
    assert image.chain_length == sum(blocks) * BLOCK
    chain = build_chain(spec)[: image.chain_length]
    assert image.chain_sha256 == hashlib.sha256(chain).hexdigest()
    assert image.md5 == hashlib.md5(data).hexdigest()
    assert image.sha256 == hashlib.sha256(data).hexdigest()
    if spec.kind == "nvgi_dump":
        assert image.chain_offset == spec.chain_offset
        assert image.nvgi_subsystem == image.subsystem and image.subsystems_agree
        assert image.rfrd_offset == (0x5000 if spec.generation == "ampere" else 0x4000)
        assert (image.rfrd_chain_offset, image.rfrd_chain_length) == (spec.chain_offset, spec.chain_length)
        assert image.nvgi_offsets == ([0, 0x2000] if spec.generation == "ampere" else [0])
    else:
        assert image.chain_offset == 0
        assert image.nvgi_subsystem is None and image.rfrd_offset is None
    assert image.flashable is (spec.kind in ("nvgi_dump", "option_rom"))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_round_trip_over_generated_images(spec: RomSpec) -> None:
    data = build_rom(spec)
    check_round_trip(spec, parse_rom(data), data)


@pytest.mark.parametrize("kind", list(KIND_OF))
def test_round_trip_defaults(kind: str) -> None:
    spec = RomSpec(kind=kind)  # type: ignore[arg-type]
    data = build_rom(spec)
    check_round_trip(spec, parse_rom(data), data)


def test_same_firmware_on_two_cards_has_one_chain_hash() -> None:
    a, b = parse_rom(build_rom(RomSpec(card_data=1))), parse_rom(build_rom(RomSpec(card_data=2)))
    assert a.md5 != b.md5 and a.sha256 != b.sha256
    assert a.chain_sha256 == b.chain_sha256
    # and a stripped copy or the plain option ROM of that firmware is recognised as the same chain
    assert parse_rom(build_rom(RomSpec(kind="stripped"))).chain_sha256 == a.chain_sha256
    assert parse_rom(build_rom(RomSpec(kind="option_rom"))).chain_sha256 == a.chain_sha256


def test_the_walk_follows_npde_not_pcir_past_the_efi_image() -> None:
    image = parse_rom(build_rom(RomSpec()))
    efi = image.images[1]
    assert efi.pcir_last and efi.npde_last is False and not efi.last
    assert image.pci_walk_images == 2 and len(image.images) == 4
    assert image.images[3].npde_last and image.images[3].last


def test_npde_length_overrides_pcir_length() -> None:
    spec = RomSpec(kind="option_rom")
    data = bytearray(build_rom(spec))
    pcir = 0x170
    struct.pack_into("<H", data, pcir + 0x10, 1)  # PCIR says 1 block; NPDE still says the real length
    image = parse_rom(bytes(data))
    assert image.images[0].pcir_length_blocks == 1
    assert image.images[0].length == spec.x86_blocks * BLOCK
    assert len(image.images) == 4


def test_disagreeing_nvgi_and_npde_are_reported_in_the_model() -> None:
    image = parse_rom(build_rom(RomSpec(nvgi_subsystem=(0x3842, 0x3982))))
    assert image.nvgi_subsystem == "3842:3982" and image.subsystem == "3842:3987"
    assert image.subsystems_agree is False
    note = image.note("subsystem_disagree")
    assert note is not None and note.offset == 0x0C


def test_bad_x86_checksum_is_reported_not_raised() -> None:
    data = bytearray(build_rom(RomSpec(kind="option_rom")))
    data[0x400] ^= 0x01
    image = parse_rom(bytes(data))
    assert not image.x86_checksum_ok and image.x86_checksum != 0


def test_rfrd_disagreement_becomes_a_note() -> None:
    data = bytearray(build_rom(RomSpec()))
    struct.pack_into("<I", data, 0x500C, 12345)
    image = parse_rom(bytes(data))
    assert image.chain_length == RomSpec().chain_length
    assert image.note("rfrd_length_disagree") is not None


def test_offsets_point_at_the_bytes_they_name() -> None:
    data = build_rom(RomSpec())
    image = parse_rom(data)
    off = image.offsets
    assert data[off["modification_date"] : off["modification_date"] + 8] == b"10/01/20"
    assert data[off["build_date"] : off["build_date"] + 8] == b"10/01/20"
    assert struct.unpack_from("<HH", data, off["nvgi_subsystem"]) == (0x3842, 0x3987)
    assert struct.unpack_from("<H", data, off["subsystem_device_id"])[0] == 0x3987
    assert struct.unpack_from("<H", data, off["device_id"])[0] == 0x2204
    assert data[off["version"] : off["version"] + 5] == bytes([0x48, 0x26, 0x02, 0x94, 0x15])
    assert data[off["sign_on"] :].startswith(RomSpec().sign_on.encode())


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.integers(0, 3000), st.integers(0, 3000))
def test_sum8_equals_the_plain_byte_sum(data: bytes, a: int, b: int) -> None:
    lo, hi = sorted((min(a, len(data)), min(b, len(data))))
    assert _sum8(data, lo, hi) == sum(data[lo:hi]) & 0xFF


# -- pre-Kepler ROMs: the subsystem word at ROM offset 0x54 ------------------------------------------------------
# envytools docs/hw/io/pstraps.rst (NV3 .. "G80+"): "subsystem will be read from 32-bit LE word at address 0x54
# in the ROM"; envytools nvbios/info.c: version family bytes 0x05..0x75 are NV40..GF119, 0x80 is Kepler.
PRE_KEPLER = RomSpec(
    era="pre_kepler",
    kind="option_rom",
    version="70.00.21.00.01",  # synthetic, of the GF100 family byte
    device_id=0x06C0,
    subsystem_vendor=0x1462,
    subsystem_device=0x1571,
    x86_blocks=0x7E,
)


def test_a_pre_kepler_rom_gives_its_subsystem_word() -> None:
    data = build_rom(PRE_KEPLER)
    assert struct.unpack_from("<I", data, 0x54)[0] == 0x1571_1462  # the builder put the documented word there
    image = parse_rom(data)
    assert image.subsystem == "1462:1571"
    assert image.subsystem_origin == "rom_strap_word"
    assert (image.offsets["subsystem_vendor_id"], image.offsets["subsystem_device_id"]) == (0x54, 0x56)
    assert image.kind is RomKind.OPTION_ROM and image.flashable
    assert [im.code_type_name for im in image.images] == ["x86"]
    assert image.images[0].npde_offset is None
    assert image.notes == [] and image.subsystems_agree is None


@pytest.mark.parametrize("vendor", [0x0000, 0xFFFF])
def test_an_unprogrammed_subsystem_word_is_unknown_and_noted(vendor: int) -> None:
    data = build_rom(RomSpec(**{**PRE_KEPLER.__dict__, "subsystem_vendor": vendor}))
    image = parse_rom(data)
    assert image.subsystem is None and image.subsystem_origin is None
    assert [n.id for n in image.notes] == ["strap_subsystem_unset"]
    assert image.notes[0].offset == 0x54


def test_a_word_at_0x54_without_a_checking_hwinfo_block_is_not_read() -> None:
    """A plausible word at +0x54 counts only when the block's signature and sum check, whatever the version."""
    spec = RomSpec(kind="option_rom", npde_subsystem=False, version="86.02.39.00.5A")
    data = bytearray(build_rom(spec))
    struct.pack_into("<I", data, 0x54, 0x3987_3842)  # a plausible word where Kepler+ documents none
    data[spec.x86_blocks * BLOCK - 1] = (data[spec.x86_blocks * BLOCK - 1] - 0x38 - 0x42 - 0x87 - 0x39) & 0xFF
    image = parse_rom(bytes(data))
    assert image.x86_checksum_ok
    assert image.subsystem is None and image.subsystem_origin is None
    assert [n.id for n in image.notes] == ["subsystem_not_in_file"]


def test_a_full_dump_without_a_checking_block_does_not_read_offset_0x54() -> None:
    """Zeros at +0x54 (as on Pascal) do not check: the subsystem stays unknown, the NVGI header is only shown."""
    image = parse_rom(build_rom(RomSpec(npde_subsystem=False)))
    assert image.subsystem is None and image.nvgi_subsystem == "3842:3987"
    assert [n.id for n in image.notes] == ["subsystem_not_in_file"]
    assert "signature 0x00 at +0x6A" in image.notes[0].message


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 0x7F), st.integers(1, 0xFFFE), u16, u16, st.integers(2, 0xFF))
def test_pre_kepler_round_trip(family: int, vendor: int, device: int, pci_device: int, blocks: int) -> None:
    spec = RomSpec(
        **{
            **PRE_KEPLER.__dict__,
            "version": f"{family:02X}.00.21.00.01",
            "subsystem_vendor": vendor,
            "subsystem_device": device,
            "device_id": pci_device,
            "x86_blocks": blocks,
        }
    )
    image = parse_rom(build_rom(spec))
    assert image.subsystem == f"{vendor:04x}:{device:04x}" and image.subsystem_origin == "rom_strap_word"
    assert image.device_id == f"{pci_device:04x}" and image.version == spec.version
    assert image.chain_length == blocks * BLOCK and image.x86_checksum_ok


def test_the_builder_refuses_a_pre_kepler_rom_it_cannot_be() -> None:
    with pytest.raises(ValueError, match="below 0x80"):
        build_rom(RomSpec(**{**PRE_KEPLER.__dict__, "version": "80.04.1A.00.01"}))
    with pytest.raises(ValueError, match="option ROM"):
        build_rom(RomSpec(**{**PRE_KEPLER.__dict__, "kind": "nvgi_dump"}))


# -- the HWINFO block decides, not the version (envytools nvbios/bios.c: sig 0xa5 at 0x6a, 0x58..0x6b sum 0) -----
KEPLER = RomSpec(
    kind="option_rom",
    version="80.07.2C.00.02",  # synthetic, of the Kepler family byte
    device_id=0x0FC6,
    subsystem_vendor=0x1458,
    subsystem_device=0x3656,
    npde_subsystem=False,
    hwinfo="block",
)


@pytest.mark.parametrize("kind", ["option_rom", "nvgi_dump"])
def test_a_kepler_image_gives_its_subsystem_where_its_hwinfo_block_checks(kind: str) -> None:
    spec = RomSpec(**{**KEPLER.__dict__, "kind": kind, "nvgi_subsystem": (0x1458, 0x3656)})
    data = build_rom(spec)
    x86 = spec.chain_offset if kind == "nvgi_dump" else 0
    assert data[x86 + 0x6A] == 0xA5 and sum(data[x86 + 0x58 : x86 + 0x6C]) & 0xFF == 0
    image = parse_rom(data)
    assert image.subsystem == "1458:3656" and image.subsystem_origin == "rom_strap_word"
    assert (image.offsets["subsystem_vendor_id"], image.offsets["subsystem_device_id"]) == (x86 + 0x54, x86 + 0x56)
    assert image.notes == [] and image.x86_checksum_ok


@pytest.mark.parametrize(("hwinfo", "why"), [("pmid", "signature 0x00"), ("zeros", "signature 0x00")])
def test_turing_pmid_and_pascal_zeros_are_never_a_subsystem(hwinfo: str, why: str) -> None:
    data = build_rom(RomSpec(**{**KEPLER.__dict__, "version": "86.04.50.00.70", "hwinfo": hwinfo}))
    if hwinfo == "pmid":
        assert data[0x54:0x58] == b"PMID"
    image = parse_rom(data)
    assert image.subsystem is None and image.subsystem_origin is None
    assert image.note("subsystem_not_in_file") is not None and why in image.notes[0].message


def test_a_block_whose_sum_is_off_is_not_trusted() -> None:
    data = bytearray(build_rom(KEPLER))
    data[0x60] ^= 0x01  # a strap byte inside the checked range
    data[KEPLER.x86_blocks * BLOCK - 1] ^= 0x01  # keep the x86 checksum (a different check) intact
    image = parse_rom(bytes(data))
    assert image.subsystem is None and "sum to 0x" in image.notes[0].message and image.x86_checksum_ok


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0x18, max_size=0x18))
def test_any_bytes_at_0x54_are_read_exactly_when_the_block_checks(block: bytes) -> None:
    data = bytearray(build_rom(KEPLER))
    data[0x54:0x6C] = block
    image = parse_rom(bytes(data))
    checks = block[0x16] == 0xA5 and sum(block[4:]) & 0xFF == 0
    vendor, device = struct.unpack_from("<HH", block)
    if checks and vendor not in (0, 0xFFFF):
        assert image.subsystem == f"{vendor:04x}:{device:04x}" and image.subsystem_origin == "rom_strap_word"
    else:
        assert image.subsystem is None


# -- the Blackwell container: unknown head, NVFW at 0x1000, RFRD, the PCI images further on (seen, vbios.md) --
BLACKWELL = RomSpec(
    kind="container",
    version="98.06.1F.40.45",
    device_id=0x2D04,
    subsystem_vendor=0x1043,
    subsystem_device=0x8A07,
    chain_offset=0x35400,
    dump_size=0x35400 + 0x3C0 * BLOCK + 0x10000,
    x86_blocks=0x80,
    efi_blocks=0x40,
    fwsec_blocks=(0x100, 0x140),
    sign_on="FWMAN SYNTHETIC GB206 BOARD",
)


def test_a_blackwell_container_is_walked_to_its_pci_images() -> None:
    data = build_rom(BLACKWELL)
    assert data[:4] == bytes.fromhex("4CC0E00C") and data[0x1000:0x1004] == b"NVFW"
    assert data[0x35200:0x35204] == b"RFRD" and data[0x35400:0x35402] == b"\x55\xaa"
    image = parse_rom(data)
    assert image.kind is RomKind.CONTAINER and not image.flashable
    assert image.container_head == "4C C0 E0 0C"
    assert (image.version, image.subsystem, image.device_id) == ("98.06.1F.40.45", "1043:8a07", "2d04")
    assert image.chain_offset == 0x35400 and image.chain_length == BLACKWELL.chain_length
    assert (image.rfrd_offset, image.rfrd_chain_offset, image.rfrd_chain_length) == (
        0x35200,
        0x35400,
        BLACKWELL.chain_length,
    )
    assert [n.id for n in image.notes] == ["container_prefix"]
    assert image.nvgi_subsystem is None
    assert image.chain_sha256 == hashlib.sha256(build_chain(BLACKWELL)).hexdigest()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=4, max_size=4), st.integers(0x10, 0x400), u16, u16, st.integers(0, 0x8000))
def test_container_round_trip(head: bytes, block: int, vendor: int, device: int, extra: int) -> None:
    """Any unknown head (not NVGI, not 55 AA), any chain position past NVFW: the same identity comes back."""
    if head == b"NVGI" or head[:2] == b"\x55\xaa":
        head = b"\x4c\xc0\xe0\x0c"
    spec = RomSpec(
        **{
            **BLACKWELL.__dict__,
            "chain_offset": block * BLOCK,
            "dump_size": block * BLOCK + BLACKWELL.chain_length + extra,
            "subsystem_vendor": vendor,
            "subsystem_device": device,
        }
    )
    data = bytearray(build_rom(spec))
    data[:4] = head
    image = parse_rom(bytes(data))
    assert image.kind is RomKind.CONTAINER and image.chain_offset == block * BLOCK
    assert image.subsystem == f"{vendor:04x}:{device:04x}" and image.rfrd_offset == block * BLOCK - BLOCK


def test_the_rfrd_nearest_the_chain_is_the_directory() -> None:
    """'RFRD' also at offset 0 (hypothesis found it as a head): the block just before the chain is the one read."""
    data = bytearray(build_rom(BLACKWELL))
    data[:4] = b"RFRD"
    image = parse_rom(bytes(data))
    assert image.kind is RomKind.CONTAINER and image.rfrd_offset == 0x35200 and image.rfrd_chain_offset == 0x35400


def test_an_unknown_head_without_a_chain_is_still_refused() -> None:
    with pytest.raises(ParseError, match=r"neither NVGI .* nor 55 AA .*, and no 55 AA image"):
        parse_rom(b"\x4c\xc0\xe0\x0c" + b"\xff" * 0x40000)


# -- a truncated dump: 56,320 bytes where the image header says 60,416 (the case, synthetic bytes) -------
def test_a_truncated_option_rom_shows_its_fields_and_says_how_short_it_is() -> None:
    spec = RomSpec(**{**KEPLER.__dict__, "x86_blocks": 60_416 // BLOCK, "truncate_to": 56_320})
    image = parse_rom(build_rom(spec))
    assert image.kind is RomKind.TRUNCATED and not image.flashable
    assert (image.version, image.subsystem, image.device_id) == ("80.07.2C.00.02", "1458:3656", "0fc6")
    assert (image.size, image.declared_size) == (56_320, 60_416)
    assert image.note("truncated").message == "truncated: the header says 60,416 bytes, the file has 56,320"  # type: ignore[union-attr]
    assert image.x86_checksum_ok is None


@settings(max_examples=80, deadline=None)
@given(st.integers(0x1B0 + 0x40, 0xBE * BLOCK - 1))
def test_any_cut_inside_the_x86_image_after_its_tables_keeps_the_identity(cut: int) -> None:
    data = build_rom(RomSpec(kind="option_rom"))[:cut]
    image = parse_rom(data)
    assert image.kind is RomKind.TRUNCATED and image.declared_size == 0xBE * BLOCK
    assert image.subsystem == "3842:3987" and image.device_id == "2204"


# -- another maker's option ROM is named as such ----------------------------------------------------------------
@pytest.mark.parametrize("vendor", [0x8086, 0x1002, 0x0000])
def test_a_non_nvidia_option_rom_is_named(vendor: int) -> None:
    with pytest.raises(ParseError, match=f"not an NVIDIA image \\(vendor {vendor:04x}\\)") as err:
        parse_rom(build_rom(RomSpec(kind="option_rom", vendor_id=vendor)))
    assert err.value.field == "image[0].pcir.vendor_id" and err.value.offset == 0x174


# -- chains that do not open with the x86 image (issue 36: the RTX 50 image that was refused) -----------------

_CHAIN_ORDERS = (
    st.lists(st.sampled_from(["x86", "efi", "fwsec"]), min_size=0, max_size=2)
    .flatmap(lambda lead: st.permutations(["x86", "efi", "fwsec", *[n for n in lead if n == "fwsec"]]))
    .filter(lambda order: order[-1] == "fwsec")
)


@given(order=_CHAIN_ORDERS, kind=st.sampled_from(["option_rom", "nvgi_dump", "container"]))
@settings(max_examples=25, deadline=None)
def test_the_x86_image_is_found_by_its_code_type_wherever_the_chain_puts_it(order: list[str], kind: str) -> None:
    fwsec_blocks = tuple([0x40] * order.count("fwsec"))
    spec = RomSpec(
        kind=kind,  # type: ignore[arg-type]
        chain_order=tuple(order),
        fwsec_blocks=fwsec_blocks,  # type: ignore[arg-type]
        device_id=0x2B85,
        version="98.02.2E.00.01",
        chain_offset=0x36000 if kind == "container" else 0x9400,
        dump_size=0x100000,
    )
    image = parse_rom(build_rom(spec))
    x86_at = order.index("x86")
    assert image.x86_index == x86_at
    assert [im.code_type_name for im in image.images] == list(order)
    assert (image.version, image.device_id, image.subsystem) == ("98.02.2E.00.01", "2b85", "3842:3987")
    assert image.x86_checksum_ok is True
    assert image.chain_sha256 == parse_rom(build_chain(spec)).chain_sha256  # the same chain in every kind
    not_first = any(n.id == "x86_not_first" for n in image.notes)
    assert not_first is (x86_at != 0)
    assert image.flashable is (x86_at == 0 and kind != "container")


def test_a_chain_with_no_x86_image_is_a_parse_error_naming_what_it_opens_with() -> None:
    data = bytearray(build_rom(RomSpec(kind="option_rom", chain_order=("fwsec", "x86", "efi", "fwsec"))))
    x86 = parse_rom(bytes(data)).images[1]
    data[x86.pcir_offset + 0x14] = 0xE0  # the x86 image now says FwSec: no PC-AT image is left
    with pytest.raises(ParseError, match=r"image\[0\]\.code_type.*no x86 \(PC-AT, code type 0x00\) image"):
        parse_rom(bytes(data))
