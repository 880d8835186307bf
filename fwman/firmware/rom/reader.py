"""Bounds-checked little-endian reads over a VBIOS file: every failure a ParseError naming field and offset."""

from __future__ import annotations

import struct

from fwman.core.errors import ParseError

WHAT = "VBIOS image"


class Reader:
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


def hex4(value: int) -> str:
    """Return ``value`` as four lower-case hex digits (how IDs are written everywhere in fwman)."""
    return f"{value:04x}"
