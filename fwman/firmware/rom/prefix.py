"""The prefix of a full dump: the NVGI (IFR) header, its Ampere copy, and the RFRD block (vbios.md section 1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import ParseError
from fwman.firmware.rom.model import RomNote
from fwman.firmware.rom.reader import WHAT, Reader

NVGI_COPY_OFFSET = 0x2000
RFRD_OFFSETS = (0x5000, 0x4000)  # Ampere, Turing


@dataclass
class Prefix:
    """What the NVGI prefix of a full dump says (all empty for files that start with the chain)."""

    is_nvgi: bool = False
    nvgi_subsystem: str | None = None
    nvgi_offsets: list[int] = field(default_factory=list)
    rfrd_offset: int | None = None
    rfrd_chain_offset: int | None = None
    rfrd_chain_length: int | None = None


def read_prefix(r: Reader, offsets: dict[str, int], notes: list[RomNote]) -> Prefix:
    """Read the NVGI prefix when present. Raises ParseError when the file starts with neither NVGI nor 55 AA."""
    head = r.tag(0, 4)
    if head[:2] == b"\x55\xaa":
        return Prefix()
    if head != b"NVGI":
        shown = head.hex(" ").upper() or "nothing"
        raise ParseError(WHAT, "signature", f"starts with {shown}: neither NVGI (a dump) nor 55 AA (an option ROM)", 0)
    sv = r.u16(0x0C, "nvgi.subsystem_vendor")
    sd = r.u16(0x0E, "nvgi.subsystem_device")
    pre = Prefix(is_nvgi=True, nvgi_subsystem=f"{sv:04x}:{sd:04x}", nvgi_offsets=[0])
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
