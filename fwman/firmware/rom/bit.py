"""The BIT table of the x86 image: version (token B), build date (token i), sign-on and version strings (S)."""

from __future__ import annotations

import re
import struct

from fwman.core.errors import ParseError
from fwman.firmware.rom.model import BitToken, ChainImage, RomNote
from fwman.firmware.rom.reader import WHAT, Reader

BIT_SIGNATURE = b"\xff\xb8BIT\x00"
_DATE = re.compile(rb"\d\d/\d\d/\d\d")


def date_text(raw: bytes) -> str | None:
    """Return ``raw`` as text when it is ``MM/DD/YY``, else None."""
    return raw.decode("ascii") if _DATE.fullmatch(raw) else None


def _string(r: Reader, x86: ChainImage, entry: int, field: str) -> tuple[str | None, int | None]:
    """Return a BIT ``S`` string (pointer u16, size u8 at ``entry``) and its offset; None when empty."""
    ptr = r.u16(entry, f"{field}_pointer")
    size = r.u8(entry + 2, f"{field}_size")
    if ptr == 0 or size == 0:
        return None, None
    r.need(x86.offset + ptr, size, f"{field}_pointer", limit=x86.offset + x86.length, within="x86 image")
    raw = r.data[x86.offset + ptr : x86.offset + ptr + size].split(b"\x00", 1)[0]
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "?" for b in raw)
    return (text or None), x86.offset + ptr


class Identity:
    """Fields read from the x86 image's BIT table (all optional: a missing token leaves them None)."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.build_date: str | None = None
        self.sign_on: str | None = None
        self.version_string: str | None = None
        self.bit_offset: int | None = None
        self.tokens: list[BitToken] = []


def read_bit(r: Reader, x86: ChainImage, offsets: dict[str, int], notes: list[RomNote]) -> Identity:
    """Read the BIT header and tokens B, i, S of the x86 image. Raises ParseError on a corrupt header/token."""
    ident = Identity()
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
            ident.build_date = date_text(raw)
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
