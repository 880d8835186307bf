"""Bounds-checked reads over a VBIOS file (the integers through :class:`fwman.firmware.rom.layout.Layout`): every
failure a ParseError naming field and offset."""

from __future__ import annotations

from fwman.core.errors import ParseError

WHAT = "VBIOS image"


class Reader:
    """Bounds checks and signature probes over ``data``; every failure is a ParseError naming field and offset."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.n = len(data)

    def need(self, off: int, size: int, field: str, limit: int | None = None, within: str = "file") -> None:
        """Raise ParseError unless ``size`` bytes at ``off`` lie inside the file (or before ``limit``)."""
        end = self.n if limit is None else min(limit, self.n)
        if off < 0 or off + size > end:
            raise ParseError(WHAT, field, f"needs {size} bytes but the {within} ends at 0x{end:X}", off)

    def tag(self, off: int, size: int) -> bytes:
        """Return up to ``size`` bytes at ``off`` (fewer at the end of the file); for signature probes."""
        return self.data[off : off + size] if off >= 0 else b""


def hex4(value: int) -> str:
    """Return ``value`` as four lower-case hex digits (how IDs are written everywhere in fwman)."""
    return f"{value:04x}"
