"""Pure VBIOS parser: bytes in, :class:`RomImage` out, or a :class:`ParseError` naming the field and offset.

The layout is in ``shared/docs/vbios.md`` (sections 1-3) and ``docs/rom.md``. The parser does no I/O and is
linear in the file size: the chain walk moves strictly forward and reads a bounded number of images, every
read is bounds-checked first, and the only whole-range passes are the hashes (MD5 on a second thread), the x86 checksum,
the search for the chain and the BIT header, and the padding check after the chain (each C-speed).
"""

from __future__ import annotations

import hashlib
import re
import struct
import threading
import zlib
from dataclasses import dataclass, field

from fwman.core.errors import ParseError
from fwman.firmware.rom.model import (
    CODE_TYPE_NAMES,
    BitToken,
    ChainImage,
    RomImage,
    RomKind,
    RomNote,
)

__all__ = ["BLOCK", "ChainImage", "RomImage", "RomKind", "RomNote", "parse_rom"]

WHAT = "VBIOS image"
BLOCK = 512
MAX_IMAGES = 16  # real chains hold 4-6 images; more means garbage, and caps the work on hostile input
IMAGE_SIGNATURES = {b"\x55\xaa": "55aa", b"\x56\x4e": "564e", b"\x77\xbb": "77bb"}
PCIR_SIGNATURES = (b"PCIR", b"NPDS", b"RGIS")
NVGI_COPY_OFFSET = 0x2000
RFRD_OFFSETS = (0x5000, 0x4000)  # Ampere, Turing
BIT_SIGNATURE = b"\xff\xb8BIT\x00"
EFI_SIGNATURE = 0x0EF1
X86_MOD_DATE = 0x38
#: NV3 to Fermi: "subsystem will be read from 32-bit LE word at address 0x54 in the ROM" when the board's
#: strap says it has a ROM (envytools docs/hw/io/pstraps.rst); low half vendor, high half device, as PCI 0x2C
ROM_STRAP_SUBSYSTEM = 0x54
#: the first version byte names the GPU family; envytools nvbios/info.c maps 0x05..0x75 to NV40..GF119 and
#: 0x80 to Kepler (GK104/GK107), where the IFR header (NVGI) took over offset 0 of the ROM
KEPLER_FAMILY = 0x80
PADDING = (0x00, 0xFF)
#: files at least this large hash MD5 on a second thread (below it a thread costs more than it saves)
PARALLEL_HASH_MIN = 256 << 10
_DATE = re.compile(rb"\d\d/\d\d/\d\d")


class _Reader:
    """Bounds-checked little-endian reads from ``data``; every failure is a ParseError naming field and offset."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def need(self, off: int, size: int, field: str, limit: int | None = None, within: str = "file") -> None:
        """Raise ParseError unless ``size`` bytes at ``off`` lie inside the file (or before ``limit``)."""
        end = self.n if limit is None else min(limit, self.n)
        if off < 0 or off + size > end:
            raise ParseError(WHAT, field, f"needs {size} bytes but the {within} ends at 0x{end:X}", off)

    def u8(self, off: int, field: str) -> int:
        """Return the byte at ``off``."""
        self.need(off, 1, field)
        return self.data[off]

    def u16(self, off: int, field: str) -> int:
        """Return the little-endian u16 at ``off``."""
        self.need(off, 2, field)
        return int(struct.unpack_from("<H", self.data, off)[0])

    def u32(self, off: int, field: str) -> int:
        """Return the little-endian u32 at ``off``."""
        self.need(off, 4, field)
        return int(struct.unpack_from("<I", self.data, off)[0])

    def tag(self, off: int, size: int) -> bytes:
        """Return up to ``size`` bytes at ``off`` (fewer at the end of the file); for signature probes."""
        return self.data[off : off + size] if off >= 0 else b""


def _hex4(value: int) -> str:
    return f"{value:04x}"


def _sum8(data: bytes, start: int, end: int) -> int:
    """Return the 8-bit sum of ``data[start:end]``.

    zlib.adler32 sums bytes in C: with a start value of 0 its low half is the plain byte sum modulo 65521,
    exact for 256-byte chunks (256 * 255 < 65521), so the loop runs len/256 times instead of len times.
    """
    view = memoryview(data)
    total = 0
    for pos in range(start, end, 256):
        total += zlib.adler32(view[pos : min(pos + 256, end)], 0) & 0xFFFF
    return total & 0xFF


def _hashes(data: bytes, chain_start: int, chain_end: int) -> tuple[str, str, str]:
    """Return (md5, sha256, chain sha256) hex digests, hashing each byte range once per digest.

    hashlib releases the GIL on buffers over 2 KiB, so for files of PARALLEL_HASH_MIN bytes or more MD5 runs
    on a second thread while this one computes both SHA-256s: the wall time is that of the slower side, not
    the sum. Slices are memoryviews: nothing is copied.
    """
    view = memoryview(data)
    md5 = hashlib.md5(usedforsecurity=False)
    worker = None
    if len(data) >= PARALLEL_HASH_MIN:
        worker = threading.Thread(target=md5.update, args=(view,), name="fwman-md5", daemon=True)
        worker.start()
    else:
        md5.update(view)
    sha = hashlib.sha256(view)
    chain = hashlib.sha256(view[chain_start:chain_end])
    if worker is not None:
        worker.join()
    return md5.hexdigest(), sha.hexdigest(), chain.hexdigest()


def _find_chain(r: _Reader, start: int) -> int | None:
    """Return the first 512-aligned offset >= ``start`` holding ``55 AA`` whose +0x18 points at a PCIR.

    The documented way to find the chain. ``bytes.find`` jumps between candidates, so the scan is linear.
    """
    pos = start
    while True:
        pos = r.data.find(b"\x55\xaa", pos)
        if pos < 0:
            return None
        if pos % BLOCK == 0 and pos + 0x1A <= r.n:
            ptr = struct.unpack_from("<H", r.data, pos + 0x18)[0]
            if r.tag(pos + ptr, 4) in PCIR_SIGNATURES:
                return pos
        pos += 1


def _walk(r: _Reader, start: int) -> tuple[list[ChainImage], bool]:
    """Walk the chain from ``start`` with the NPDE rules (section 2).

    Returns the images and whether the file ended right after an image that only the PCI rule calls last
    (the sysfs truncation). Raises ParseError on any bad signature, pointer or length, or on a chain that
    runs past the end of the file or holds more than MAX_IMAGES images.
    """
    images: list[ChainImage] = []
    off = start
    for index in range(MAX_IMAGES):
        base = f"image[{index}]"
        r.need(off, 0x1A, f"{base}.header")
        sig = r.data[off : off + 2]
        if sig not in IMAGE_SIGNATURES:
            raise ParseError(WHAT, f"{base}.signature", f"expected 55 AA, found {sig.hex(' ').upper()}", off)
        pcir_ptr = r.u16(off + 0x18, f"{base}.pcir_pointer")
        pcir = off + pcir_ptr
        pcir_sig = r.tag(pcir, 4)
        if pcir_sig not in PCIR_SIGNATURES:
            raise ParseError(
                WHAT, f"{base}.pcir_pointer", f"points at 0x{pcir:X}, where there is no PCIR signature", off + 0x18
            )
        r.need(pcir, 0x18, f"{base}.pcir")
        vendor, device = struct.unpack_from("<HH", r.data, pcir + 4)
        pcir_len = r.u16(pcir + 0x0A, f"{base}.pcir.length")
        if not 0x18 <= pcir_len <= 0x100:
            raise ParseError(WHAT, f"{base}.pcir.length", f"0x{pcir_len:X} is not a PCIR length", pcir + 0x0A)
        pcir_rev = r.data[pcir + 0x0C]
        pcir_blocks, code_rev, code_type, indicator = struct.unpack_from("<HHBB", r.data, pcir + 0x10)
        pcir_last = bool(indicator & 0x80)

        npde = off + ((pcir_ptr + pcir_len + 0x0F) & ~0x0F)
        npde_rev = npde_blocks = None
        npde_last: bool | None = None
        if r.tag(npde, 4) == b"NPDE":
            r.need(npde, 0x10, f"{base}.npde")
            npde_rev, _npde_len, npde_blocks, npde_flag = struct.unpack_from("<HHHB", r.data, npde + 4)
            npde_last = bool(npde_flag & 0x80)
            length_field, blocks = npde + 0x08, npde_blocks
            last = npde_last
        else:
            length_field, blocks = pcir + 0x10, pcir_blocks
            last = pcir_last
        if blocks == 0:
            raise ParseError(WHAT, f"{base}.length", "image length is 0 (a chain that points at itself)", length_field)
        end = off + blocks * BLOCK
        if end > r.n:
            raise ParseError(
                WHAT,
                f"{base}.length",
                f"image of {blocks * BLOCK} bytes at 0x{off:X} runs past the end of the file (0x{r.n:X})",
                length_field,
            )
        if pcir + pcir_len > end or (npde_rev is not None and npde + 0x10 > end):
            raise ParseError(WHAT, f"{base}.pcir_pointer", "PCIR/NPDE lie outside their image", off + 0x18)
        images.append(
            ChainImage(
                index=index,
                offset=off,
                length=blocks * BLOCK,
                signature=IMAGE_SIGNATURES[sig],
                code_type=code_type,
                code_type_name=CODE_TYPE_NAMES.get(code_type, "unknown"),
                vendor_id=_hex4(vendor),
                device_id=_hex4(device),
                code_revision=code_rev,
                pcir_offset=pcir,
                pcir_signature=pcir_sig.decode("ascii"),
                pcir_revision=pcir_rev,
                pcir_length_blocks=pcir_blocks,
                pcir_last=pcir_last,
                npde_offset=npde if npde_rev is not None else None,
                npde_revision=npde_rev,
                npde_length_blocks=npde_blocks,
                npde_last=npde_last,
                last=last,
            )
        )
        if last:
            return images, False
        if end >= r.n:
            if pcir_last:  # the kernel's PCI-rule reader stopped here: the sysfs truncation
                return images, True
            last_field = npde + 0x0A if npde_rev is not None else pcir + 0x15
            raise ParseError(
                WHAT, f"{base}.last", f"more images should follow but the file ends at 0x{r.n:X}", last_field
            )
        off = end
    raise ParseError(WHAT, "chain", f"more than {MAX_IMAGES} images without a last-image flag", start)


def _date(raw: bytes) -> str | None:
    return raw.decode("ascii") if _DATE.fullmatch(raw) else None


def _string(r: _Reader, x86: ChainImage, entry: int, field: str) -> tuple[str | None, int | None]:
    """Return a BIT ``S`` string (pointer u16, size u8 at ``entry``) and its offset; None when empty."""
    ptr = r.u16(entry, f"{field}_pointer")
    size = r.u8(entry + 2, f"{field}_size")
    if ptr == 0 or size == 0:
        return None, None
    r.need(x86.offset + ptr, size, f"{field}_pointer", limit=x86.offset + x86.length, within="x86 image")
    raw = r.data[x86.offset + ptr : x86.offset + ptr + size].split(b"\x00", 1)[0]
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "?" for b in raw)
    return (text or None), x86.offset + ptr


class _Identity:
    """Fields read from the x86 image's BIT table (all optional: a missing token leaves them None)."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.build_date: str | None = None
        self.sign_on: str | None = None
        self.version_string: str | None = None
        self.bit_offset: int | None = None
        self.tokens: list[BitToken] = []


def _bit(r: _Reader, x86: ChainImage, offsets: dict[str, int], notes: list[RomNote]) -> _Identity:
    """Read the BIT header and tokens B, i, S of the x86 image. Raises ParseError on a corrupt header/token."""
    ident = _Identity()
    x_end = x86.offset + x86.length
    bit = r.data.find(BIT_SIGNATURE, x86.offset, x_end)
    if bit < 0:
        notes.append(RomNote(id="bit_missing", message="no BIT table in the x86 image", offset=x86.offset))
        return ident
    ident.bit_offset = bit
    offsets["bit"] = bit
    r.need(bit, 12, "bit.header", limit=x_end, within="x86 image")
    hdr_size, tok_size, count = r.data[bit + 8], r.data[bit + 9], r.data[bit + 10]
    if hdr_size < 12:
        raise ParseError(WHAT, "bit.header_size", f"{hdr_size} is smaller than 12", bit + 8)
    if tok_size < 6:
        raise ParseError(WHAT, "bit.token_size", f"{tok_size} is smaller than 6", bit + 9)
    r.need(bit, hdr_size, "bit.header", limit=x_end, within="x86 image")
    if sum(r.data[bit : bit + hdr_size]) & 0xFF:
        raise ParseError(WHAT, "bit.checksum", "BIT header bytes do not sum to 0", bit + 11)
    table = bit + hdr_size
    r.need(table, count * tok_size, "bit.token_count", limit=x_end, within="x86 image")
    found: dict[str, tuple[BitToken, int]] = {}
    for k in range(count):
        entry = table + k * tok_size
        tid, tver, tsize, tptr = struct.unpack_from("<BBHH", r.data, entry)
        token = BitToken(
            id=chr(tid) if 0x20 <= tid < 0x7F else f"0x{tid:02X}", version=tver, size=tsize, offset=x86.offset + tptr
        )
        ident.tokens.append(token)
        if token.id in ("B", "i", "S") and token.id not in found:
            # only the tokens fwman reads are required to point inside the x86 image
            r.need(token.offset, tsize, f"bit.token[{token.id}].pointer", limit=x_end, within="x86 image")
            found[token.id] = (token, entry)

    five: bytes | None = None
    if "B" in found:
        tok, entry = found["B"]
        if tok.size < 5:
            raise ParseError(WHAT, "bit.token[B].size", f"{tok.size} is smaller than 5", entry + 2)
        five = r.data[tok.offset : tok.offset + 5]
        ident.version = f"{five[3]:02X}.{five[2]:02X}.{five[1]:02X}.{five[0]:02X}.{five[4]:02X}"
        offsets["version"] = tok.offset
    else:
        notes.append(RomNote(id="token_missing", message="BIT token B (version) is missing", offset=bit))
    if "i" in found:
        tok, _ = found["i"]
        if five is not None and tok.size >= 5 and r.data[tok.offset : tok.offset + 5] != five:
            notes.append(
                RomNote(id="version_disagree", message="BIT tokens B and i hold different versions", offset=tok.offset)
            )
        if tok.size >= 0x17:
            raw = r.data[tok.offset + 0x0F : tok.offset + 0x17]
            ident.build_date = _date(raw)
            offsets["build_date"] = tok.offset + 0x0F
            if ident.build_date is None:
                notes.append(
                    RomNote(
                        id="build_date_format",
                        message=f"build date bytes {raw!r} are not MM/DD/YY",
                        offset=tok.offset + 0x0F,
                    )
                )
    if "S" in found:
        tok, entry = found["S"]
        if tok.size >= 3:
            ident.sign_on, where = _string(r, x86, tok.offset, "bit.token[S].sign_on")
            if where is not None:
                offsets["sign_on"] = where
        if tok.size >= 6:
            ident.version_string, where = _string(r, x86, tok.offset + 3, "bit.token[S].version_string")
            if where is not None:
                offsets["version_string"] = where
    return ident


@dataclass
class _Prefix:
    """What the NVGI prefix of a full dump says (all empty for files that start with the chain)."""

    is_nvgi: bool = False
    nvgi_subsystem: str | None = None
    nvgi_offsets: list[int] = field(default_factory=list)
    rfrd_offset: int | None = None
    rfrd_chain_offset: int | None = None
    rfrd_chain_length: int | None = None


def _prefix(r: _Reader, offsets: dict[str, int], notes: list[RomNote]) -> _Prefix:
    """Read the NVGI prefix when present. Raises ParseError when the file starts with neither NVGI nor 55 AA."""
    head = r.tag(0, 4)
    if head[:2] == b"\x55\xaa":
        return _Prefix()
    if head != b"NVGI":
        shown = head.hex(" ").upper() or "nothing"
        raise ParseError(WHAT, "signature", f"starts with {shown}: neither NVGI (a dump) nor 55 AA (an option ROM)", 0)
    sv = r.u16(0x0C, "nvgi.subsystem_vendor")
    sd = r.u16(0x0E, "nvgi.subsystem_device")
    pre = _Prefix(is_nvgi=True, nvgi_subsystem=f"{sv:04x}:{sd:04x}", nvgi_offsets=[0])
    offsets["nvgi_subsystem"] = 0x0C
    if r.tag(NVGI_COPY_OFFSET, 4) == b"NVGI":
        pre.nvgi_offsets.append(NVGI_COPY_OFFSET)
        if r.tag(NVGI_COPY_OFFSET + 0x0C, 4) != r.data[0x0C:0x10]:
            notes.append(
                RomNote(
                    id="nvgi_copy_disagree",
                    message="the NVGI copy at 0x2000 has another subsystem",
                    offset=NVGI_COPY_OFFSET + 0x0C,
                )
            )
    for rfrd in RFRD_OFFSETS:
        if r.tag(rfrd, 4) == b"RFRD":
            pre.rfrd_offset = rfrd
            pre.rfrd_chain_offset = r.u32(rfrd + 0x08, "rfrd.chain_offset")
            pre.rfrd_chain_length = r.u32(rfrd + 0x0C, "rfrd.chain_length")
            offsets["rfrd"] = rfrd
            break
    else:
        notes.append(RomNote(id="rfrd_missing", message="no RFRD block at 0x5000 or 0x4000"))
    return pre


def _strap_subsystem(
    r: _Reader, start: int, version: str | None, offsets: dict[str, int], notes: list[RomNote]
) -> tuple[str, str] | None:
    """Return (vendor, device) from the pre-Kepler subsystem word at ROM offset 0x54, or None.

    Only a ROM whose x86 image opens the file (no IFR prefix) and whose version names a family before Kepler
    holds that word. A zero or all-ones vendor is an unprogrammed word, noted and not used. A Kepler or later
    image without an NPDE subsystem is noted: only its full dump's IFR header carries one.
    """
    family = int(version[:2], 16) if version else None
    if start != 0 or family is None:
        return None
    if family >= KEPLER_FAMILY:
        notes.append(
            RomNote(
                id="subsystem_not_in_file",
                message="a Kepler or later x86 image without an NPDE subsystem: only a full dump's IFR header "
                "(NVGI +0x0C) carries it",
            )
        )
        return None
    word = r.u32(ROM_STRAP_SUBSYSTEM, "image[0].strap_subsystem")
    vendor, device = word & 0xFFFF, word >> 16
    if vendor in (0x0000, 0xFFFF):
        notes.append(
            RomNote(
                id="strap_subsystem_unset",
                message=f"the subsystem word at 0x54 is {vendor:04x}:{device:04x}: no vendor programmed",
                offset=ROM_STRAP_SUBSYSTEM,
            )
        )
        return None
    offsets["subsystem_vendor_id"] = ROM_STRAP_SUBSYSTEM
    offsets["subsystem_device_id"] = ROM_STRAP_SUBSYSTEM + 2
    return _hex4(vendor), _hex4(device)


def parse_rom(data: bytes) -> RomImage:
    """Parse a VBIOS file and return its model.

    Raises ParseError (naming the field and its offset) when the bytes are not a VBIOS image fwman can read:
    unknown start, no chain, a bad signature, pointer or length anywhere in the chain, a corrupt BIT header,
    a chain that runs off the end of the file. Non-fatal oddities become ``notes``.
    """
    data = bytes(data)
    r = _Reader(data)
    offsets: dict[str, int] = {}
    notes: list[RomNote] = []
    pre = _prefix(r, offsets, notes)
    start = 0
    if pre.is_nvgi:
        found = _find_chain(r, BLOCK)
        if found is None:
            raise ParseError(WHAT, "chain", "no 55 AA image with a PCIR on any 512-byte boundary from here", BLOCK)
        start = found
    images, sysfs_cut = _walk(r, start)
    chain_end = images[-1].offset + images[-1].length
    chain_length = chain_end - start

    x86 = images[0]
    if x86.code_type != 0x00:
        raise ParseError(
            WHAT,
            "image[0].code_type",
            f"0x{x86.code_type:02X}: the chain must open with the x86 image",
            x86.pcir_offset + 0x14,
        )
    offsets["device_id"] = x86.pcir_offset + 6
    offsets["vendor_id"] = x86.pcir_offset + 4
    checksum = _sum8(data, x86.offset, x86.offset + x86.length)
    offsets["x86_checksum"] = x86.offset
    mod_raw = data[x86.offset + X86_MOD_DATE : x86.offset + X86_MOD_DATE + 8]
    modification_date = _date(mod_raw)
    if modification_date is not None:
        offsets["modification_date"] = x86.offset + X86_MOD_DATE

    sub_v = sub_d = None
    if x86.npde_offset is not None and (x86.npde_revision or 0) >= 0x101:
        npde_len = r.u16(x86.npde_offset + 6, "image[0].npde.length")
        if npde_len >= 0x14:
            r.need(x86.npde_offset, 0x14, "image[0].npde.subsystem", limit=chain_end)
            sub_v = _hex4(r.u16(x86.npde_offset + 0x10, "image[0].npde.subsystem_vendor"))
            sub_d = _hex4(r.u16(x86.npde_offset + 0x12, "image[0].npde.subsystem_device"))
            offsets["subsystem_vendor_id"] = x86.npde_offset + 0x10
            offsets["subsystem_device_id"] = x86.npde_offset + 0x12
    ident = _bit(r, x86, offsets, notes)
    origin = "npde" if sub_v is not None else None
    if sub_v is None:
        strap = _strap_subsystem(r, start, ident.version, offsets, notes)
        if strap is not None:
            sub_v, sub_d = strap
            origin = "rom_strap_word"

    uefi_version = None
    efi = next((im for im in images if im.code_type == 0x03), None)
    if efi is not None:
        uefi_version = f"0x{efi.code_revision:04X}"
        offsets["uefi_version"] = efi.pcir_offset + 0x12
        if r.u32(efi.offset + 4, f"image[{efi.index}].efi_signature") != EFI_SIGNATURE:
            notes.append(
                RomNote(id="efi_signature", message="EFI image lacks the 0x0EF1 signature", offset=efi.offset + 4)
            )

    if pre.is_nvgi:
        if sysfs_cut:
            raise ParseError(WHAT, "chain", "an NVGI dump whose chain stops at the end of the file", chain_end)
        kind = RomKind.NVGI_DUMP
        rfrd_off, rfrd_len = pre.rfrd_chain_offset, pre.rfrd_chain_length
        if rfrd_off is not None and rfrd_off != start:
            notes.append(
                RomNote(
                    id="rfrd_offset_disagree",
                    offset=offsets.get("rfrd"),
                    message=f"RFRD says the chain is at 0x{rfrd_off:X}, found at 0x{start:X}",
                )
            )
        if rfrd_len is not None and rfrd_len != chain_length:
            notes.append(
                RomNote(
                    id="rfrd_length_disagree",
                    offset=offsets.get("rfrd"),
                    message=f"RFRD says the chain is {rfrd_len} bytes, walked {chain_length}",
                )
            )
    elif sysfs_cut:
        kind = RomKind.SYSFS_TRUNCATED
    else:
        # A plain option ROM carries nothing but padding after its chain; a stripped dump carries the card's
        # own data (NBSI, InfoROM) there. bytes.count runs in C, so this stays cheap on a 1 MiB file.
        tail = len(data) - chain_end
        padding = sum(data.count(bytes([p]), chain_end) for p in PADDING)
        kind = RomKind.OPTION_ROM if padding == tail else RomKind.STRIPPED

    nvgi_subsystem = pre.nvgi_subsystem
    subsystem = f"{sub_v}:{sub_d}" if sub_v is not None else None
    if nvgi_subsystem is not None and subsystem is not None and nvgi_subsystem != subsystem:
        notes.append(
            RomNote(
                id="subsystem_disagree",
                offset=0x0C,
                message=f"NVGI says {nvgi_subsystem}, the x86 image's NPDE says {subsystem}",
            )
        )
    md5, sha256, chain_sha256 = _hashes(data, start, chain_end)
    return RomImage(
        kind=kind,
        size=len(data),
        version=ident.version,
        vendor_id=x86.vendor_id,
        device_id=x86.device_id,
        subsystem_vendor_id=sub_v,
        subsystem_device_id=sub_d,
        subsystem_origin=origin,
        nvgi_subsystem=nvgi_subsystem,
        build_date=ident.build_date,
        modification_date=modification_date,
        sign_on=ident.sign_on,
        version_string=ident.version_string,
        uefi_version=uefi_version,
        images=images,
        x86_checksum_ok=checksum == 0,
        x86_checksum=checksum,
        chain_offset=start,
        chain_length=chain_length,
        md5=md5,
        sha256=sha256,
        chain_sha256=chain_sha256,
        nvgi_offsets=pre.nvgi_offsets,
        rfrd_offset=pre.rfrd_offset,
        rfrd_chain_offset=pre.rfrd_chain_offset,
        rfrd_chain_length=pre.rfrd_chain_length,
        bit_offset=ident.bit_offset,
        bit_tokens=ident.tokens,
        offsets=offsets,
        notes=notes,
    )
