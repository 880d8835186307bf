"""Pure VBIOS parser: bytes in, :class:`RomImage` out, or a :class:`ParseError` naming the field and offset.

The layout is in ``shared/docs/vbios.md`` (sections 1-3) and ``docs/rom.md``; its tables are
:mod:`fwman.firmware.rom.layout`. The parser does no I/O and is linear in the file size: the chain walk moves strictly
forward and reads a bounded number of images, every read is bounds-checked first, and the only whole-range passes are
the hashes (MD5 on a second thread), the x86 checksum, the search for the chain and the BIT header, and the padding
check after the chain (each C-speed)."""

from __future__ import annotations

import hashlib
import threading
import zlib

from fwman.core.errors import ParseError
from fwman.firmware.rom.bit import Identity, date_text, read_bit
from fwman.firmware.rom.chain import BLOCK, Walk, find_chain, walk
from fwman.firmware.rom.layout import EFI, HWINFO, HWINFO_OFFSET, HWINFO_SIGNATURE, HWINFO_SUM_START, NPDE, PCIR, X86
from fwman.firmware.rom.model import ChainImage, RomImage, RomKind, RomNote, add_note
from fwman.firmware.rom.prefix import Prefix, find_rfrd, read_prefix, read_rfrd
from fwman.firmware.rom.reader import WHAT, Reader, hex4

__all__ = ["BLOCK", "ChainImage", "RomImage", "RomKind", "RomNote", "parse_rom"]

EFI_SIGNATURE = 0x0EF1
PADDING = (0x00, 0xFF)
#: files at least this large hash MD5 on a second thread (below it a thread costs more than it saves)
PARALLEL_HASH_MIN = 256 << 10


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


def _hwinfo_subsystem(
    r: Reader, x86: ChainImage, offsets: dict[str, int], notes: list[RomNote]
) -> tuple[str, str] | None:
    """Return (vendor, device) from the x86 image's +0x54/+0x56 when its HWINFO block checks, else None.

    envytools nvbios/bios.c reads the subsystem there for every NVIDIA image and trusts the extended block
    when the byte at +0x6A is 0xA5 and the bytes +0x58..+0x6B sum to zero: that test, not the BIT version,
    decides (Pascal images hold zeros there, Turing and later the text ``PMID``). A zero or all-ones vendor
    in a checking block is an unprogrammed word, noted and not used. When nothing gives a subsystem the note
    ``subsystem_not_in_file`` says why.
    """
    base = x86.offset + HWINFO_OFFSET
    block_end = base + HWINFO.size
    if block_end > min(x86.offset + x86.length, r.n):
        add_note(notes, "subsystem_not_in_file", "no NPDE subsystem, and the x86 image is too short for HWINFO")
        return None
    sig = HWINFO.read(r, base, "signature", "image[0].hwinfo.signature")
    total = sum(r.data[base + HWINFO_SUM_START : block_end]) & 0xFF
    if sig != HWINFO_SIGNATURE or total:
        why = (
            f"signature 0x{sig:02X} at +0x6A" if sig != HWINFO_SIGNATURE else f"bytes +0x58..+0x6B sum to 0x{total:02X}"
        )
        add_note(
            notes,
            "subsystem_not_in_file",
            f"no NPDE subsystem, and the HWINFO block at +0x54 does not check ({why}); a full dump "
            "(nvflash --save) carries the subsystem in its IFR header (NVGI +0x0C)",
            HWINFO.at(base, "signature"),
        )
        return None
    vendor = HWINFO.read(r, base, "subsystem_vendor", "image[0].hwinfo.subsystem_vendor")
    device = HWINFO.read(r, base, "subsystem_device", "image[0].hwinfo.subsystem_device")
    if vendor in (0x0000, 0xFFFF):
        why = f"the subsystem word at +0x54 is {vendor:04x}:{device:04x}: no vendor programmed"
        add_note(notes, "strap_subsystem_unset", why, base)
        return None
    offsets["subsystem_vendor_id"] = HWINFO.at(base, "subsystem_vendor")
    offsets["subsystem_device_id"] = HWINFO.at(base, "subsystem_device")
    return hex4(vendor), hex4(device)


def _chain_start(r: Reader, pre: Prefix, offsets: dict[str, int], notes: list[RomNote]) -> int:
    """Return where the PCI image chain starts: 0 in an option ROM, the first 55 AA image on a 512-byte boundary
    after an NVGI or unknown prefix (whose RFRD, when found, is read too). Raises ParseError when there is none."""
    if not (pre.is_nvgi or pre.container_head is not None):
        return 0
    start = find_chain(r, BLOCK)
    if start is None:
        if pre.container_head is not None:
            raise ParseError(
                WHAT,
                "signature",
                f"starts with {pre.container_head}: neither NVGI (a dump) nor 55 AA (an option ROM), and no "
                "55 AA image with a PCIR on any 512-byte boundary",
                0,
            )
        raise ParseError(WHAT, "chain", "no 55 AA image with a PCIR on any 512-byte boundary from here", BLOCK)
    if pre.container_head is not None:
        add_note(
            notes,
            "container_prefix",
            f"starts with {pre.container_head}, a prefix no public source documents: the PCI images "
            f"were found by their 55 AA signature on a 512-byte boundary, at 0x{start:X}",
            0,
        )
        rfrd = find_rfrd(r, start)
        if rfrd is not None:
            read_rfrd(r, rfrd, pre, offsets)
    return start


def _x86_image(images: list[ChainImage], notes: list[RomNote]) -> ChainImage:
    """Return the x86 (PC-AT, code type 0) image, noting when it is not the first. Raises ParseError without one.

    It is found by its type, as nova-core finds it (drivers/gpu/nova-core/vbios.rs, Vbios::new: `BiosImage::PciAt
    (image) => pci_at_image = Some(image)` wherever it sits in the chain); its GA102 layout
    (Documentation/gpu/nova/core/vbios.rst) opens with it, "could vary for future or other GPUs".
    """
    x86 = next((im for im in images if im.code_type == 0x00), None)
    if x86 is None:
        first = images[0]
        raise ParseError(
            WHAT,
            "image[0].code_type",
            f"0x{first.code_type:02X}: no x86 (PC-AT, code type 0x00) image in the chain of {len(images)}",
            PCIR.at(first.pcir_offset, "code_type"),
        )
    if x86.index != 0:
        opener = images[0]
        add_note(
            notes,
            "x86_not_first",
            f"the chain opens with a {opener.code_type_name} image (code type 0x{opener.code_type:02X}); "
            f"the x86 image is image[{x86.index}] at 0x{x86.offset:X}, found by its code type: no public source "
            "documents this order, so the file is read but never a flash source",
            opener.offset,
        )
    return x86


def _npde_subsystem(r: Reader, x86: ChainImage, chain_end: int, offsets: dict[str, int]) -> tuple[str, str] | None:
    """Return (vendor, device) from the x86 image's NPDE (revision 0x101 and long enough), else None. Raises
    ParseError when the NPDE's subsystem words lie past the chain."""
    if x86.npde_offset is None or (x86.npde_revision or 0) < 0x101:
        return None
    npde = x86.npde_offset
    with_ids = NPDE.at(0, "subsystem_device") + NPDE.width("subsystem_device")  # 0x14: revision 0x101's length
    if NPDE.read(r, npde, "length", "image[0].npde.length") < with_ids:
        return None
    r.need(npde, with_ids, "image[0].npde.subsystem", limit=chain_end)
    sub_v = hex4(NPDE.read(r, npde, "subsystem_vendor", "image[0].npde.subsystem_vendor"))
    sub_d = hex4(NPDE.read(r, npde, "subsystem_device", "image[0].npde.subsystem_device"))
    offsets["subsystem_vendor_id"] = NPDE.at(npde, "subsystem_vendor")
    offsets["subsystem_device_id"] = NPDE.at(npde, "subsystem_device")
    return sub_v, sub_d


def _identity(r: Reader, x86: ChainImage, offsets: dict[str, int], notes: list[RomNote], cut: bool) -> Identity:
    """Return what the BIT table says; in a ``cut`` (truncated) file an unreadable table is a note and an empty
    Identity, since what lies past the cut is missing, not malformed. Raises ParseError otherwise."""
    try:
        return read_bit(r, x86, offsets, notes)
    except ParseError as e:
        if not cut:
            raise
        add_note(notes, "bit_unreadable", f"BIT table not read: {e.detail}", e.offset)
        return Identity()


def _uefi_version(r: Reader, images: list[ChainImage], offsets: dict[str, int], notes: list[RomNote]) -> str | None:
    """Return the EFI image's code revision ("0x....") or None without one; an EFI image without its 0x0EF1
    signature is noted."""
    efi = next((im for im in images if im.code_type == 0x03), None)
    if efi is None:
        return None
    offsets["uefi_version"] = PCIR.at(efi.pcir_offset, "code_revision")
    if EFI.read(r, efi.offset, "efi_signature", f"image[{efi.index}].efi_signature") != EFI_SIGNATURE:
        add_note(notes, "efi_signature", "EFI image lacks the 0x0EF1 signature", EFI.at(efi.offset, "efi_signature"))
    return f"0x{efi.code_revision:04X}"


def _kind(
    data: bytes, pre: Prefix, walked: Walk, start: int, chain_end: int, offsets: dict[str, int], notes: list[RomNote]
) -> RomKind:
    """Return what kind of file this is (truncated, NVGI dump, container, sysfs cut, option ROM or stripped),
    noting a truncation and an RFRD that disagrees with the walk. Raises ParseError for an NVGI dump whose chain
    stops at the end of the file."""
    chain_length = chain_end - start
    if walked.declared_end is not None:
        why = f"truncated: the header says {walked.declared_end:,} bytes, the file has {len(data):,}"
        add_note(notes, "truncated", why, chain_end)
        return RomKind.TRUNCATED
    if pre.is_nvgi or pre.container_head is not None:
        if walked.sysfs_cut:
            raise ParseError(WHAT, "chain", "an NVGI dump whose chain stops at the end of the file", chain_end)
        rfrd_off, rfrd_len = pre.rfrd_chain_offset, pre.rfrd_chain_length
        if rfrd_off is not None and rfrd_off != start:
            why = f"RFRD says the chain is at 0x{rfrd_off:X}, found at 0x{start:X}"
            add_note(notes, "rfrd_offset_disagree", why, offsets.get("rfrd"))
        if rfrd_len is not None and rfrd_len != chain_length:
            why = f"RFRD says the chain is {rfrd_len} bytes, walked {chain_length}"
            add_note(notes, "rfrd_length_disagree", why, offsets.get("rfrd"))
        return RomKind.NVGI_DUMP if pre.is_nvgi else RomKind.CONTAINER
    if walked.sysfs_cut:
        return RomKind.SYSFS_TRUNCATED
    # A plain option ROM carries nothing but padding after its chain; a stripped dump carries the card's
    # own data (NBSI, InfoROM) there. bytes.count runs in C, so this stays cheap on a 1 MiB file.
    padding = sum(data.count(bytes([p]), chain_end) for p in PADDING)
    return RomKind.OPTION_ROM if padding == len(data) - chain_end else RomKind.STRIPPED


def parse_rom(data: bytes) -> RomImage:
    """Parse a VBIOS file and return its model.

    Raises ParseError (naming the field and its offset) when the bytes are not a VBIOS image fwman can read:
    no chain where one must be, a first image of another vendor than NVIDIA, a bad signature, pointer or zero
    length anywhere in the chain, a corrupt BIT header (in a whole file), a file that ends where more images
    should follow. A file that ends inside an image is a ``truncated`` model, read as far as it goes; one with
    an unknown prefix before a chain is a ``container``. Non-fatal oddities become ``notes``.
    """
    data = bytes(data)
    r = Reader(data)
    offsets: dict[str, int] = {}
    notes: list[RomNote] = []
    pre = read_prefix(r, offsets, notes)
    start = _chain_start(r, pre, offsets, notes)
    walked = walk(r, start)
    images = walked.images
    chain_end = min(images[-1].offset + images[-1].length, r.n)
    x86 = _x86_image(images, notes)
    offsets["device_id"] = PCIR.at(x86.pcir_offset, "device_id")
    offsets["vendor_id"] = PCIR.at(x86.pcir_offset, "vendor_id")
    x86_whole = x86.offset + x86.length <= r.n
    checksum = _sum8(data, x86.offset, x86.offset + x86.length) if x86_whole else None
    if x86_whole:
        offsets["x86_checksum"] = x86.offset
    modification_date = date_text(X86.raw(r, x86.offset, "modification_date"))
    if modification_date is not None:
        offsets["modification_date"] = X86.at(x86.offset, "modification_date")
    word = _npde_subsystem(r, x86, chain_end, offsets)
    ident = _identity(r, x86, offsets, notes, cut=walked.declared_end is not None)
    origin = "npde" if word is not None else None
    if word is None:
        word = _hwinfo_subsystem(r, x86, offsets, notes)
        origin = "rom_strap_word" if word is not None else None
    sub_v, sub_d = word if word is not None else (None, None)
    uefi_version = _uefi_version(r, images, offsets, notes)
    kind = _kind(data, pre, walked, start, chain_end, offsets, notes)
    nvgi_subsystem = pre.nvgi_subsystem
    subsystem = f"{sub_v}:{sub_d}" if sub_v is not None else None
    if nvgi_subsystem is not None and subsystem is not None and nvgi_subsystem != subsystem:
        why = f"NVGI says {nvgi_subsystem}, the x86 image's NPDE says {subsystem}"
        add_note(notes, "subsystem_disagree", why, offsets.get("nvgi_subsystem"))
    md5, sha256, chain_sha256 = _hashes(data, start, chain_end)
    # the prefix's and the BIT table's facts, under the names the model gives them too
    prefix = {name: value for name, value in vars(pre).items() if name != "is_nvgi"}
    bit = {name: value for name, value in vars(ident).items() if name != "tokens"}
    return RomImage(
        **prefix,
        **bit,
        kind=kind,
        size=len(data),
        vendor_id=x86.vendor_id,
        device_id=x86.device_id,
        subsystem_vendor_id=sub_v,
        subsystem_device_id=sub_d,
        subsystem_origin=origin,
        modification_date=modification_date,
        uefi_version=uefi_version,
        images=images,
        x86_checksum_ok=None if checksum is None else checksum == 0,
        x86_checksum=checksum,
        chain_offset=start,
        chain_length=chain_end - start,
        declared_size=walked.declared_end,
        x86_index=x86.index,
        md5=md5,
        sha256=sha256,
        chain_sha256=chain_sha256,
        bit_tokens=ident.tokens,
        offsets=offsets,
        notes=notes,
    )
