"""The option-ROM chain: finding its first image and walking it with NVIDIA's NPDE rules (vbios.md section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import ParseError
from fwman.firmware.rom.layout import IMAGE, NPDE, PCIR
from fwman.firmware.rom.model import CODE_TYPE_NAMES, ChainImage
from fwman.firmware.rom.reader import WHAT, Reader, hex4

BLOCK = 512
MAX_IMAGES = 16  # real chains hold 4-6 images; more means garbage, and caps the work on hostile input
#: PCI vendor IDs of NVIDIA option ROMs: 0x10de, and 0x12d2 (the SGS-Thomson/NVIDIA NV3), the two cases
#: envytools nvbios/bios.c (``envy_bios_parse``) reads as NVIDIA images
NVIDIA_VENDORS = (0x10DE, 0x12D2)
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
        if pos % BLOCK == 0 and pos + IMAGE.size <= r.n:
            ptr = IMAGE.read(r, pos, "pcir_pointer", "chain")
            if PCIR.raw(r, pos + ptr, "signature") in PCIR_SIGNATURES:
                return pos
        pos += 1


@dataclass
class Walk:
    """What the walk found: the images, and how the file ended."""

    images: list[ChainImage]
    #: the file ended right after an image that only the PCI rule calls last (the sysfs truncation)
    sysfs_cut: bool = False
    #: the file ends inside the last image: where that image's header says it ends (None when it does not)
    declared_end: int | None = None


def walk(r: Reader, start: int) -> Walk:
    """Walk the chain from ``start`` with the NPDE rules (section 2).

    An image whose header and PCIR (and NPDE) are in the file but whose length runs past its end ends the
    walk as a truncated file (``declared_end``): the fields before the cut can still be read. Raises
    ParseError on any bad signature or pointer, a zero length, a first image of another vendor than NVIDIA, a
    file that ends where more images should follow, or a chain of more than MAX_IMAGES images.
    """
    images: list[ChainImage] = []
    off = start
    for index in range(MAX_IMAGES):
        base = f"image[{index}]"
        r.need(off, IMAGE.size, f"{base}.header")
        sig = IMAGE.raw(r, off, "signature")
        if sig not in IMAGE_SIGNATURES:
            raise ParseError(WHAT, f"{base}.signature", f"expected 55 AA, found {sig.hex(' ').upper()}", off)
        pcir_ptr = IMAGE.read(r, off, "pcir_pointer", f"{base}.pcir_pointer")
        pcir = off + pcir_ptr
        pcir_sig = PCIR.raw(r, pcir, "signature")
        if pcir_sig not in PCIR_SIGNATURES:
            raise ParseError(
                WHAT,
                f"{base}.pcir_pointer",
                f"points at 0x{pcir:X}, where there is no PCIR signature",
                IMAGE.at(off, "pcir_pointer"),
            )
        r.need(pcir, PCIR.size, f"{base}.pcir")
        vendor = PCIR.read(r, pcir, "vendor_id", f"{base}.pcir.vendor_id")
        if index == 0 and vendor not in NVIDIA_VENDORS:
            # another maker's option ROM walks by the PCI rules too: name it before its chain confuses the walk
            raise ParseError(
                WHAT, f"{base}.pcir.vendor_id", f"not an NVIDIA image (vendor {vendor:04x})", PCIR.at(pcir, "vendor_id")
            )
        pcir_len = PCIR.read(r, pcir, "length", f"{base}.pcir.length")
        if not PCIR.size <= pcir_len <= 0x100:
            raise ParseError(
                WHAT, f"{base}.pcir.length", f"0x{pcir_len:X} is not a PCIR length", PCIR.at(pcir, "length")
            )
        pcir_blocks = PCIR.read(r, pcir, "blocks", f"{base}.pcir.blocks")
        code_type = PCIR.read(r, pcir, "code_type", f"{base}.pcir.code_type")
        pcir_last = bool(PCIR.read(r, pcir, "indicator", f"{base}.pcir.indicator") & 0x80)

        npde = off + ((pcir_ptr + pcir_len + 0x0F) & ~0x0F)
        npde_rev = npde_blocks = None
        npde_last: bool | None = None
        if NPDE.raw(r, npde, "signature") == b"NPDE":
            r.need(npde, NPDE.size, f"{base}.npde")
            npde_rev = NPDE.read(r, npde, "revision", f"{base}.npde.revision")
            npde_blocks = NPDE.read(r, npde, "blocks", f"{base}.npde.blocks")
            npde_last = bool(NPDE.read(r, npde, "indicator", f"{base}.npde.indicator") & 0x80)
            length_field, blocks, last = NPDE.at(npde, "blocks"), npde_blocks, npde_last
        else:
            length_field, blocks, last = PCIR.at(pcir, "blocks"), pcir_blocks, pcir_last
        if blocks == 0:
            raise ParseError(WHAT, f"{base}.length", "image length is 0 (a chain that points at itself)", length_field)
        end = off + blocks * BLOCK
        if pcir + pcir_len > end or (npde_rev is not None and npde + NPDE.size > end):
            raise ParseError(
                WHAT, f"{base}.pcir_pointer", "PCIR/NPDE lie outside their image", IMAGE.at(off, "pcir_pointer")
            )
        images.append(
            ChainImage(
                index=index,
                offset=off,
                length=blocks * BLOCK,
                signature=IMAGE_SIGNATURES[sig],
                code_type=code_type,
                code_type_name=CODE_TYPE_NAMES.get(code_type, "unknown"),
                vendor_id=hex4(vendor),
                device_id=hex4(PCIR.read(r, pcir, "device_id", f"{base}.pcir.device_id")),
                code_revision=PCIR.read(r, pcir, "code_revision", f"{base}.pcir.code_revision"),
                pcir_offset=pcir,
                pcir_signature=pcir_sig.decode("ascii"),
                pcir_revision=PCIR.read(r, pcir, "revision", f"{base}.pcir.revision"),
                pcir_length_blocks=pcir_blocks,
                pcir_last=pcir_last,
                npde_offset=npde if npde_rev is not None else None,
                npde_revision=npde_rev,
                npde_length_blocks=npde_blocks,
                npde_last=npde_last,
                last=last,
            )
        )
        if end > r.n:  # the file stops inside this image: a cut dump (or a length that lies): read what is there
            return Walk(images, declared_end=end)
        if last:
            return Walk(images)
        if end >= r.n:
            if pcir_last:  # the kernel's PCI-rule reader stopped here: the sysfs truncation
                return Walk(images, sysfs_cut=True)
            last_field = NPDE.at(npde, "indicator") if npde_rev is not None else PCIR.at(pcir, "indicator")
            raise ParseError(
                WHAT, f"{base}.last", f"more images should follow but the file ends at 0x{r.n:X}", last_field
            )
        off = end
    raise ParseError(WHAT, "chain", f"more than {MAX_IMAGES} images without a last-image flag", start)
