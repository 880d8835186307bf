"""Pure parsers for PCI sysfs attribute files (``resource``, link speed, hex IDs)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fwman.core.errors import ParseError

_HEX_ID = re.compile(r"^\s*0x([0-9a-fA-F]{1,4})\s*$")
_SPEED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s(?:\s+PCIe)?\s*$")


@dataclass(frozen=True)
class Bar:
    """One line of a sysfs ``resource`` file: a BAR's address range and flags."""

    index: int
    start: int
    end: int
    flags: int

    @property
    def size(self) -> int:
        """Return the BAR size in bytes (0 for an unused BAR)."""
        if self.start == 0 and self.end == 0:
            return 0
        return self.end - self.start + 1


def parse_hex_id(text: str, what: str = "id") -> str:
    """Return a sysfs hex ID (``0x10de``) as 4-digit lower-case hex (``10de``). Raises ParseError."""
    m = _HEX_ID.match(text)
    if not m:
        raise ParseError("sysfs", what, f"expected 0xNNNN, got {text.strip()[:40]!r}")
    return m.group(1).lower().zfill(4)


def parse_class(text: str) -> str:
    """Return a sysfs ``class`` value (``0x030000``) normalised to lower case. Raises ParseError."""
    value = text.strip().lower()
    if not re.fullmatch(r"0x[0-9a-f]{6}", value):
        raise ParseError("sysfs", "class", f"expected 0xCCSSPP, got {value[:40]!r}")
    return value


def parse_resource(text: str) -> list[Bar]:
    """Return the BARs of a sysfs ``resource`` file (``start end flags`` in hex per line).

    Raises ParseError naming the line for anything else (or an end before its start).
    """
    bars: list[Bar] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ParseError("sysfs resource", f"line {lineno}", f"expected 3 hex fields, got {len(parts)}")
        try:
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError as e:
            raise ParseError("sysfs resource", f"line {lineno}", "not hexadecimal") from e
        if not (start == 0 and end == 0) and end < start:
            raise ParseError("sysfs resource", f"line {lineno}", "end address before start address")
        bars.append(Bar(index=len(bars), start=start, end=end, flags=flags))
    return bars


def parse_link_speed(text: str) -> float | None:
    """Return a link speed in GT/s from ``16.0 GT/s PCIe``; None for ``Unknown`` or an empty value.

    Raises ParseError for anything else.
    """
    value = text.strip()
    if value in ("", "Unknown", "Unknown speed"):
        return None
    m = _SPEED.match(value)
    if not m:
        raise ParseError("sysfs", "link speed", f"expected 'N GT/s', got {value[:40]!r}")
    return float(m.group(1))


def parse_int(text: str, what: str) -> int:
    """Return a decimal integer attribute (``16``, ``-1``). Raises ParseError."""
    value = text.strip()
    if not re.fullmatch(r"-?[0-9]{1,10}", value):
        raise ParseError("sysfs", what, f"expected an integer, got {value[:40]!r}")
    return int(value)
