"""The models a parsed VBIOS file becomes: :class:`RomImage` and its :class:`ChainImage` entries.

Kept apart from the parser so that readers (verify, flash, catalog) import the vocabulary without the parsing code. IDs
are lower-case 4-digit hex strings, as in :class:`fwman.gpu.card.Card`; offsets are absolute byte offsets in the file.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class RomKind(StrEnum):
    """What kind of file this is (``shared/docs/vbios.md`` section 1)."""

    NVGI_DUMP = "nvgi_dump"  # full `nvflash --save` dump (or vendor image) starting with NVGI
    OPTION_ROM = "option_rom"  # a plain option-ROM chain starting 55 AA, nothing but padding after it
    STRIPPED = "stripped"  # a dump with its NVGI prefix cut off: 55 AA, chain, then per-card data
    SYSFS_TRUNCATED = "sysfs_truncated"  # x86 + EFI only: what /sys/bus/pci/devices/*/rom returns
    TRUNCATED = "truncated"  # the file ends inside an image: a cut dump, read as far as it goes
    CONTAINER = "container"  # an unknown prefix (the Blackwell image seen in public), walked to its PCI images

    @property
    def description(self) -> str:
        """Return a short human description of the kind."""
        return {
            "nvgi_dump": "full nvflash dump (NVGI header)",
            "option_rom": "plain option-ROM chain",
            "stripped": "stripped dump (NVGI prefix removed)",
            "sysfs_truncated": "sysfs-truncated image (x86 + EFI only)",
            "truncated": "truncated file (it ends inside an image)",
            "container": "image behind a prefix fwman does not know (PCI images found by signature)",
        }[self.value]


CODE_TYPE_NAMES = {0x00: "x86", 0x03: "efi", 0x70: "nbsi", 0xE0: "fwsec"}


class ChainImage(BaseModel):
    """One image of the option-ROM chain, with the PCIR and NPDE fields that decided its size and lastness."""

    model_config = ConfigDict(frozen=True)

    index: int
    offset: int
    length: int  # bytes: NPDE sub-image length when an NPDE is present, else PCIR length
    signature: str  # "55aa", "564e", "77bb"
    code_type: int
    code_type_name: str  # "x86", "efi", "fwsec", "nbsi", "unknown"
    vendor_id: str
    device_id: str  # the card's on x86/EFI; a family ID on FwSec images (never compared)
    code_revision: int  # PCIR+0x12
    pcir_offset: int
    pcir_signature: str  # "PCIR", "NPDS", "RGIS"
    pcir_revision: int
    pcir_length_blocks: int
    pcir_last: bool  # PCIR+0x15 bit 7: where a PCI-rule walker (the kernel's sysfs reader) stops
    npde_offset: int | None = None
    npde_revision: int | None = None
    npde_length_blocks: int | None = None
    npde_last: bool | None = None
    last: bool  # what decided the walk: the NPDE bit when an NPDE is present, else the PCIR bit


class BitToken(BaseModel):
    """One BIT token entry: id character, version, data size and absolute data offset."""

    model_config = ConfigDict(frozen=True)

    id: str
    version: int
    size: int
    offset: int


class RomNote(BaseModel):
    """Something the parser noticed that is not fatal (verify turns some notes into findings)."""

    model_config = ConfigDict(frozen=True)

    id: str
    message: str
    offset: int | None = None


def add_note(notes: list[RomNote], note_id: str, message: str, offset: int | None = None) -> None:
    """Append to ``notes`` the note ``note_id`` saying ``message`` (about the bytes at ``offset``)."""
    notes.append(RomNote(id=note_id, message=message, offset=offset))


class RomImage(BaseModel):
    """Everything fwman reads from a VBIOS file. Produced only by :func:`fwman.firmware.rom.parse.parse_rom`."""

    model_config = ConfigDict(frozen=True)

    kind: RomKind
    size: int
    version: str | None  # upper-case "94.02.26.48.15", from BIT token B
    vendor_id: str
    device_id: str
    subsystem_vendor_id: str | None  # from ``subsystem_origin``
    subsystem_device_id: str | None
    #: where the subsystem was read: "npde" (x86 image NPDE rev 0x101, +0x10/+0x12), "rom_strap_word"
    #: (the x86 image's +0x54/+0x56 where its HWINFO block checks: envytools nvbios/bios.c), None when neither
    subsystem_origin: str | None = None
    nvgi_subsystem: str | None  # "3842:3987" from NVGI+0x0C (full dumps only)
    build_date: str | None  # BIT token i +0x0F, "MM/DD/YY"
    modification_date: str | None  # x86 image +0x38, "MM/DD/YY"
    sign_on: str | None  # BIT token S entry 0
    version_string: str | None  # BIT token S entry 1, "Version 94.02.26.48.15"
    uefi_version: str | None  # EFI image PCIR code revision, "0x0001"
    images: list[ChainImage]
    x86_checksum_ok: bool | None  # None: the x86 image is cut off, its sum cannot be taken
    x86_checksum: int | None  # 8-bit sum of the x86 image (0 when intact)
    chain_offset: int
    chain_length: int  # bytes walked (x86 + EFI only on a sysfs-truncated file; up to the end on a truncated one)
    #: a truncated file: the size its headers call for (where the image that runs off the end would end)
    declared_size: int | None = None
    #: a container: its first four bytes, upper-case hex ("4C C0 E0 0C"); their meaning is not documented
    container_head: str | None = None
    #: which chain image is the x86 (PC-AT) one: 0 on every layout documented; another index is read (found by
    #: code type, as nova-core does) but the file is never a flash source
    x86_index: int = 0
    md5: str
    sha256: str
    chain_sha256: str
    nvgi_offsets: list[int] = Field(default_factory=list)
    rfrd_offset: int | None = None
    rfrd_chain_offset: int | None = None
    rfrd_chain_length: int | None = None
    bit_offset: int | None = None
    bit_tokens: list[BitToken] = Field(default_factory=list)
    #: field name -> absolute offset it was read from (what `fwman rom inspect` shows next to each value)
    offsets: dict[str, int] = Field(default_factory=dict)
    notes: list[RomNote] = Field(default_factory=list)

    @property
    def subsystem(self) -> str | None:
        """Return the image's subsystem as ``vvvv:dddd`` (the catalog key), None when the image has none.

        It is the NPDE's, or the x86 image's +0x54 word where its HWINFO block checks; never the NVGI header's alone
        (only seen on dumps, so a cross-check, never the gate).
        """
        if self.subsystem_vendor_id is None or self.subsystem_device_id is None:
            return None
        return f"{self.subsystem_vendor_id}:{self.subsystem_device_id}"

    @property
    def flashable(self) -> bool:
        """Return True for the kinds that may be a flash source (full dumps and complete option ROMs) whose chain
        opens with the x86 image (the only order a public source documents)."""
        return self.kind in (RomKind.NVGI_DUMP, RomKind.OPTION_ROM) and self.x86_index == 0

    @property
    def subsystems_agree(self) -> bool | None:
        """Return whether the NVGI and the image's subsystems agree; None when either is absent."""
        if self.nvgi_subsystem is None or self.subsystem is None:
            return None
        return self.nvgi_subsystem == self.subsystem

    @property
    def pci_walk_images(self) -> int:
        """Return how many images a PCI-rule walker (PCIR last bit only) would read: where sysfs stops."""
        for image in self.images:
            if image.pcir_last:
                return image.index + 1
        return len(self.images)

    def note(self, note_id: str) -> RomNote | None:
        """Return the first note with ``note_id``, or None."""
        return next((n for n in self.notes if n.id == note_id), None)
