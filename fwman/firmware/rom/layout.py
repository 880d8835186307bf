"""The VBIOS structures fwman reads, as named layouts: one table per structure instead of offsets in the code.

Each offset is relative to the structure's start, little-endian, from ``shared/docs/vbios.md`` (sections 1-3) and the
sources cited beside the field. Code reads ``PCIR.read(r, base, "length", label)`` and reports ``PCIR.at(base,
"length")`` as the offset of a bad value, so an error and ``rom inspect`` name the same place."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from fwman.firmware.rom.reader import Reader

_SIZES = {"B": 1, "H": 2, "I": 4}


@dataclass(frozen=True)
class Layout:
    """One structure: its name (for messages), its fixed size, and its fields as name -> (offset, format).

    A format is a struct letter (``B`` u8, ``H`` u16, ``I`` u32) or a byte count for raw bytes.
    """

    name: str
    size: int
    fields: dict[str, tuple[int, str | int]]

    def at(self, base: int, field: str) -> int:
        """Return the absolute offset of ``field`` of the structure at ``base``. Raises KeyError for a typo."""
        return base + self.fields[field][0]

    def width(self, field: str) -> int:
        """Return the size of ``field`` in bytes."""
        fmt = self.fields[field][1]
        return fmt if isinstance(fmt, int) else _SIZES[fmt]

    def read(self, r: Reader, base: int, field: str, label: str) -> int:
        """Return the integer ``field`` of the structure at ``base``, bounds-checked.

        Raises ParseError naming ``label`` when the field lies outside the file; TypeError for a bytes field.
        """
        offset, fmt = self.fields[field]
        if isinstance(fmt, int):
            raise TypeError(f"{self.name}.{field} is {fmt} raw bytes, not an integer")
        r.need(base + offset, _SIZES[fmt], label)
        return int(struct.unpack_from("<" + fmt, r.data, base + offset)[0])

    def raw(self, r: Reader, base: int, field: str) -> bytes:
        """Return the bytes of ``field`` at ``base`` (fewer at the end of the file): for probes and text."""
        return r.tag(base + self.fields[field][0], self.width(field))


#: every image of the chain: signature, (x86) init size, pointer to the PCI data structure
IMAGE = Layout("image header", 0x1A, {"signature": (0x00, 2), "init_size": (0x02, "B"), "pcir_pointer": (0x18, "H")})
#: the x86 (code type 0x00) image's own fields
X86 = Layout(
    "x86 image",
    0x58,
    {
        "modification_date": (0x38, 8),  # MM/DD/YY, seen
        # NV3..Fermi: "subsystem will be read from 32-bit LE word at address 0x54 in the ROM" (envytools
        # docs/hw/io/pstraps.rst); low half vendor, high half device, as PCI config 0x2C (rnndb/bus/pci.xml).
        # Read only where the HWINFO block below checks.
        "strap_subsystem": (0x54, "I"),
    },
)
#: the HWINFO block of the x86 image at its +0x54 (envytools nvbios/bios.c, commit f01f978, the 0x10de case):
#: ``bios_u16(bios, 0x54, &bios->subsystem_vendor)``, ``bios_u16(bios, 0x56, &bios->subsystem_device)``; the
#: extended part is valid when ``sig`` (the byte at 0x6a) is ``0xa5`` and the bytes 0x58..0x6b sum to zero
#: (``for (i = 0x58; i <= 0x6b; i++) sum += byte``); then straps0/1 select and value at 0x58..0x67 and the
#: MMIOINIT offset (u16, in 4-byte units) at 0x68. Offsets here are relative to 0x54.
HWINFO = Layout(
    "HWINFO",
    0x18,
    {
        "subsystem_vendor": (0x00, "H"),
        "subsystem_device": (0x02, "H"),
        "straps0_select": (0x04, "I"),
        "straps0_value": (0x08, "I"),
        "straps1_select": (0x0C, "I"),
        "straps1_value": (0x10, "I"),
        "mmioinit_offset": (0x14, "H"),
        "signature": (0x16, "B"),  # 0xa5
    },
)
HWINFO_OFFSET = 0x54  # in the x86 image
HWINFO_SUM_START = 0x04  # the checked bytes: image +0x58 ..
HWINFO_SIGNATURE = 0xA5
#: the EFI (code type 0x03) image header
EFI = Layout("EFI image", 0x0E, {"efi_signature": (0x04, "I"), "machine_type": (0x0A, "H")})
#: PCI data structure (PCI Firmware Specification), signature PCIR (NVIDIA also NPDS, RGIS)
PCIR = Layout(
    "PCIR",
    0x18,
    {
        "signature": (0x00, 4),
        "vendor_id": (0x04, "H"),
        "device_id": (0x06, "H"),
        "length": (0x0A, "H"),
        "revision": (0x0C, "B"),
        "blocks": (0x10, "H"),
        "code_revision": (0x12, "H"),
        "code_type": (0x14, "B"),
        "indicator": (0x15, "B"),  # bit 7: last image (the PCI rule)
    },
)
#: NVIDIA PCI data extension, at (pcir + pcir length + 0x0F) & ~0x0F
NPDE = Layout(
    "NPDE",
    0x10,
    {
        "signature": (0x00, 4),
        "revision": (0x04, "H"),  # 0x100 / 0x101
        "length": (0x06, "H"),  # 0x10 / 0x14
        "blocks": (0x08, "H"),  # overrides the PCIR's
        "indicator": (0x0A, "B"),  # bit 7: private last image, overrides the PCIR's
        "flags": (0x0B, "B"),
        "subsystem_vendor": (0x10, "H"),  # rev 0x101, length >= 0x14, x86 image (seen)
        "subsystem_device": (0x12, "H"),
    },
)
#: the IFR header that opens a full dump (Kepler and later); FIXED0..2 documented by nova-core
NVGI = Layout(
    "NVGI",
    0x10,
    {"signature": (0x00, 4), "subsystem_vendor": (0x0C, "H"), "subsystem_device": (0x0E, "H")},  # 0x0C: seen
)
#: the ROM directory of Turing and later dumps: signature RFRD; +0x08 the PCI option ROM's offset (nova-core
#: drivers/gpu/nova-core/vbios.rs: NV_ROM_DIRECTORY_IDENTIFIER "RFRD", PCI_OPTION_ROM_OFFSET = 8); +0x0C the
#: chain's length (seen)
RFRD = Layout("RFRD", 0x10, {"signature": (0x00, 4), "chain_offset": (0x08, "I"), "chain_length": (0x0C, "I")})
#: the BIOS Information Table header inside the x86 image
BIT_HEADER = Layout(
    "BIT header",
    0x0C,
    {
        "signature": (0x00, 6),  # FF B8 'BIT' 00
        "version": (0x06, "H"),
        "header_size": (0x08, "B"),
        "token_size": (0x09, "B"),
        "token_count": (0x0A, "B"),
        "checksum": (0x0B, "B"),  # the header bytes sum to 0
    },
)
#: one BIT token; its pointer is relative to the x86 image
BIT_TOKEN = Layout(
    "BIT token", 0x06, {"id": (0x00, "B"), "version": (0x01, "B"), "size": (0x02, "H"), "pointer": (0x04, "H")}
)
#: BIT token i: the version again, and the 8-character build date
BIT_INFO = Layout("BIT token i", 0x17, {"version": (0x00, 5), "build_date": (0x0F, 8)})
#: one entry of BIT token S (sign-on first, version string second): pointer relative to the x86 image, size
BIT_STRING = Layout("BIT string", 0x03, {"pointer": (0x00, "H"), "size": (0x02, "B")})
