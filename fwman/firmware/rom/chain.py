"""The option-ROM chain: finding its first image and walking it with NVIDIA's NPDE rules (vbios.md section 2)."""

from __future__ import annotations

import struct

from fwman.core.errors import ParseError
from fwman.firmware.rom.model import CODE_TYPE_NAMES, ChainImage
from fwman.firmware.rom.reader import WHAT, Reader, hex4

BLOCK = 512
MAX_IMAGES = 16  # real chains hold 4-6 images; more means garbage, and caps the work on hostile input
IMAGE_SIGNATURES = {b"\x55\xaa": "55aa", b"\x56\x4e": "564e", b"\x77\xbb": "77bb"}
PCIR_SIGNATURES = (b"PCIR", b"NPDS", b"RGIS")


def find_chain(r: Reader, start: int) -> int | None:
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


def walk(r: Reader, start: int) -> tuple[list[ChainImage], bool]:
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
                vendor_id=hex4(vendor),
                device_id=hex4(device),
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
