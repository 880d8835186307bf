"""The BIT table of the x86 image: version (token B), build date (token i), sign-on and version strings (S)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fwman.core.errors import ParseError
from fwman.firmware.rom.layout import BIT_HEADER, BIT_INFO, BIT_STRING, BIT_TOKEN
from fwman.firmware.rom.model import BitToken, ChainImage, RomNote, add_note
from fwman.firmware.rom.reader import WHAT, Reader

BIT_SIGNATURE = b"\xff\xb8BIT\x00"
_DATE = re.compile(rb"\d\d/\d\d/\d\d")


def date_text(raw: bytes) -> str | None:
    """Return ``raw`` as text when it is ``MM/DD/YY``, else None."""
    return raw.decode("ascii") if _DATE.fullmatch(raw) else None


def _string(r: Reader, x86: ChainImage, entry: int, field: str) -> tuple[str | None, int | None]:
    """Return a BIT ``S`` string (pointer u16, size u8 at ``entry``) and its offset; None when empty."""
    ptr = BIT_STRING.read(r, entry, "pointer", f"{field}_pointer")
    size = BIT_STRING.read(r, entry, "size", f"{field}_size")
    if ptr == 0 or size == 0:
        return None, None
    r.need(x86.offset + ptr, size, f"{field}_pointer", limit=x86.offset + x86.length, within="x86 image")
    raw = r.data[x86.offset + ptr : x86.offset + ptr + size].split(b"\x00", 1)[0]
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "?" for b in raw)
    return (text or None), x86.offset + ptr


@dataclass
class Identity:
    """Fields read from the x86 image's BIT table (all optional: a missing token leaves them None)."""

    version: str | None = None
    build_date: str | None = None
    sign_on: str | None = None
    version_string: str | None = None
    bit_offset: int | None = None
    tokens: list[BitToken] = field(default_factory=list)


def read_bit(r: Reader, x86: ChainImage, offsets: dict[str, int], notes: list[RomNote]) -> Identity:
    """Read the BIT header and tokens B, i, S of the x86 image. Raises ParseError on a corrupt header/token."""
    ident = Identity()
    x_end = x86.offset + x86.length
    bit = r.data.find(BIT_SIGNATURE, x86.offset, x_end)
    if bit < 0:
        add_note(notes, "bit_missing", "no BIT table in the x86 image", x86.offset)
        return ident
    ident.bit_offset = bit
    offsets["bit"] = bit
    r.need(bit, BIT_HEADER.size, "bit.header", limit=x_end, within="x86 image")
    hdr_size = BIT_HEADER.read(r, bit, "header_size", "bit.header_size")
    tok_size = BIT_HEADER.read(r, bit, "token_size", "bit.token_size")
    count = BIT_HEADER.read(r, bit, "token_count", "bit.token_count")
    if hdr_size < BIT_HEADER.size:
        raise ParseError(WHAT, "bit.header_size", f"{hdr_size} is smaller than 12", BIT_HEADER.at(bit, "header_size"))
    if tok_size < BIT_TOKEN.size:
        raise ParseError(WHAT, "bit.token_size", f"{tok_size} is smaller than 6", BIT_HEADER.at(bit, "token_size"))
    r.need(bit, hdr_size, "bit.header", limit=x_end, within="x86 image")
    if sum(r.data[bit : bit + hdr_size]) & 0xFF:
        raise ParseError(WHAT, "bit.checksum", "BIT header bytes do not sum to 0", BIT_HEADER.at(bit, "checksum"))
    table = bit + hdr_size
    r.need(table, count * tok_size, "bit.token_count", limit=x_end, within="x86 image")
    found: dict[str, tuple[BitToken, int]] = {}
    for k in range(count):
        entry = table + k * tok_size
        tid = BIT_TOKEN.read(r, entry, "id", "bit.token_count")
        tsize = BIT_TOKEN.read(r, entry, "size", "bit.token_count")
        token = BitToken(
            id=chr(tid) if 0x20 <= tid < 0x7F else f"0x{tid:02X}",
            version=BIT_TOKEN.read(r, entry, "version", "bit.token_count"),
            size=tsize,
            offset=x86.offset + BIT_TOKEN.read(r, entry, "pointer", "bit.token_count"),
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
            raise ParseError(WHAT, "bit.token[B].size", f"{tok.size} is smaller than 5", BIT_TOKEN.at(entry, "size"))
        five = r.data[tok.offset : tok.offset + 5]
        ident.version = f"{five[3]:02X}.{five[2]:02X}.{five[1]:02X}.{five[0]:02X}.{five[4]:02X}"
        offsets["version"] = tok.offset
    else:
        add_note(notes, "token_missing", "BIT token B (version) is missing", bit)
    if "i" in found:
        tok, _ = found["i"]
        agree = tok.size < BIT_INFO.width("version") or BIT_INFO.raw(r, tok.offset, "version") == five
        if five is not None and not agree:
            add_note(notes, "version_disagree", "BIT tokens B and i hold different versions", tok.offset)
        if tok.size >= BIT_INFO.size:
            raw = BIT_INFO.raw(r, tok.offset, "build_date")
            date_at = BIT_INFO.at(tok.offset, "build_date")
            ident.build_date = date_text(raw)
            offsets["build_date"] = date_at
            if ident.build_date is None:
                add_note(notes, "build_date_format", f"build date bytes {raw!r} are not MM/DD/YY", date_at)
    if "S" in found:
        tok, entry = found["S"]
        if tok.size >= BIT_STRING.size:
            ident.sign_on, where = _string(r, x86, tok.offset, "bit.token[S].sign_on")
            if where is not None:
                offsets["sign_on"] = where
        if tok.size >= 2 * BIT_STRING.size:
            ident.version_string, where = _string(r, x86, tok.offset + BIT_STRING.size, "bit.token[S].version_string")
            if where is not None:
                offsets["version_string"] = where
    return ident
