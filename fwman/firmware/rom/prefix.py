"""The prefix of a full dump: the NVGI (IFR) header, its Ampere copy, and the RFRD block (vbios.md section 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import ParseError
from fwman.firmware.rom.layout import NVGI, RFRD
from fwman.firmware.rom.model import RomNote, add_note
from fwman.firmware.rom.reader import WHAT, Reader

NVGI_COPY_OFFSET = 0x2000
RFRD_OFFSETS = (0x5000, 0x4000)  # Ampere, Turing


@dataclass
class Prefix:
    """What the NVGI prefix of a full dump says (all empty for files that start with the chain)."""

    is_nvgi: bool = False
    #: the file opens with neither NVGI nor 55 AA (the Blackwell image seen in public): its first four bytes
    #: as upper-case hex, a layout no public source documents; the chain is found by its signature
    container_head: str | None = None
    nvgi_subsystem: str | None = None
    nvgi_offsets: list[int] = field(default_factory=list)
    rfrd_offset: int | None = None
    rfrd_chain_offset: int | None = None
    rfrd_chain_length: int | None = None


def find_rfrd(r: Reader, before: int) -> int | None:
    """Return the 512-byte boundary nearest below ``before`` that holds the RFRD signature, or None.

    For a file whose prefix fwman does not know: nova-core finds the ROM directory through the IFR header,
    which such a file lacks, so the directory is looked for by its signature, as a cross-check only. The nearest
    one to the chain is taken (in the Blackwell file the issue describes it sits just before the chain, at 0x35200
    for a chain at 0x35400): the same four bytes earlier in the file are more likely data than a second directory.
    """
    pos = r.data.rfind(b"RFRD", 0, before)
    while pos >= 0:
        if pos % 0x200 == 0:
            return pos
        pos = r.data.rfind(b"RFRD", 0, pos)
    return None


def read_rfrd(r: Reader, rfrd: int, pre: Prefix, offsets: dict[str, int]) -> None:
    """Record the RFRD block at ``rfrd`` in ``pre``: its chain offset (+0x08) and length (+0x0C)."""
    pre.rfrd_offset = rfrd
    pre.rfrd_chain_offset = RFRD.read(r, rfrd, "chain_offset", "rfrd.chain_offset")
    pre.rfrd_chain_length = RFRD.read(r, rfrd, "chain_length", "rfrd.chain_length")
    offsets["rfrd"] = rfrd


def read_prefix(r: Reader, offsets: dict[str, int], notes: list[RomNote]) -> Prefix:
    """Read the NVGI prefix when present; name an unknown one (``container_head``) for the caller to search.

    Raises ParseError only for an empty file: whether an unknown start holds a chain is the caller's search.
    """
    head = r.tag(0, 4)
    if head[:2] == b"\x55\xaa":
        return Prefix()
    if head != b"NVGI":
        if len(head) < 4:
            shown = head.hex(" ").upper() or "nothing"
            why = f"starts with {shown}: neither NVGI (a dump) nor 55 AA (an option ROM)"
            raise ParseError(WHAT, "signature", why, 0)
        return Prefix(container_head=head.hex(" ").upper())
    sv = NVGI.read(r, 0, "subsystem_vendor", "nvgi.subsystem_vendor")
    sd = NVGI.read(r, 0, "subsystem_device", "nvgi.subsystem_device")
    pre = Prefix(is_nvgi=True, nvgi_subsystem=f"{sv:04x}:{sd:04x}", nvgi_offsets=[0])
    offsets["nvgi_subsystem"] = NVGI.at(0, "subsystem_vendor")
    if NVGI.raw(r, NVGI_COPY_OFFSET, "signature") == b"NVGI":
        pre.nvgi_offsets.append(NVGI_COPY_OFFSET)
        ids = NVGI.at(0, "subsystem_vendor")
        if r.tag(NVGI_COPY_OFFSET + ids, 4) != r.tag(ids, 4):
            why = "the NVGI copy at 0x2000 has another subsystem"
            add_note(notes, "nvgi_copy_disagree", why, NVGI_COPY_OFFSET + ids)
    for rfrd in RFRD_OFFSETS:
        if RFRD.raw(r, rfrd, "signature") == b"RFRD":
            read_rfrd(r, rfrd, pre, offsets)
            break
    else:
        add_note(notes, "rfrd_missing", "no RFRD block at 0x5000 or 0x4000")
    return pre
