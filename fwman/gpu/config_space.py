"""Pure parser for PCI configuration space: IDs, PCIe link capability/status, Resizable BAR capability.

Layout: capabilities list from the pointer at 0x34 (PCIe capability id 0x10: Link Capabilities at +0x0C, Link
Status at +0x12); extended capabilities from 0x100 (Resizable BAR id 0x15: per BAR a capability dword of
supported sizes and a control dword with the current size). Non-root readers see only 64 bytes; virtual
machines may hide entries (id 0). Every pointer is bounds-checked and loops are cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import ParseError

# Link speed codes of the PCIe Link Capabilities/Status registers, in GT/s.
LINK_SPEEDS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

CAP_PCIE = 0x10
EXT_CAP_REBAR = 0x15
_WHAT = "config space"


@dataclass(frozen=True)
class RebarEntry:
    """One resizable BAR: its index, the sizes it supports and the size currently programmed (bytes)."""

    bar_index: int
    supported_bytes: list[int]
    current_bytes: int


@dataclass(frozen=True)
class ConfigSpace:
    """What fwman reads from a function's configuration space."""

    length: int
    vendor_id: str
    device_id: str
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    link_max_speed_gts: float | None = None
    link_max_width: int | None = None
    link_speed_gts: float | None = None
    link_width: int | None = None
    rebar: list[RebarEntry] = field(default_factory=list)
    extended_visible: bool = False  # False when only 64/256 bytes were readable

    def rebar_for(self, bar_index: int) -> RebarEntry | None:
        """Return the Resizable BAR entry for ``bar_index``, or None."""
        return next((e for e in self.rebar if e.bar_index == bar_index), None)


def read_le(data: bytes, off: int, width: int, what: str, field: str, thing: str = "pointer") -> int:
    """Return the little-endian ``width``-byte register at ``off`` in config space ``data``. Raises ParseError
    (``what``, ``field``: "``thing`` outside the readable config space") when it does not lie wholly in ``data``."""
    if off < 0 or off + width > len(data):
        raise ParseError(what, field, f"{thing} outside the readable config space", off)
    return int.from_bytes(data[off : off + width], "little")


def _u16(data: bytes, off: int, field: str) -> int:
    return read_le(data, off, 2, _WHAT, field)


def _u32(data: bytes, off: int, field: str) -> int:
    return read_le(data, off, 4, _WHAT, field)


def parse_config_space(data: bytes) -> ConfigSpace:
    """Return the parsed configuration space ``data`` (64, 256 or 4096 bytes).

    Raises ParseError for a header shorter than 64 bytes or a pointer outside the data.
    """
    if len(data) < 0x40:
        raise ParseError(_WHAT, "header", f"only {len(data)} bytes; a PCI header has 64", 0)
    vendor = _u16(data, 0x00, "vendor id")
    device = _u16(data, 0x02, "device id")
    header_type = data[0x0E] & 0x7F
    status = _u16(data, 0x06, "status")
    svid = sdid = None
    if header_type == 0:
        svid = f"{_u16(data, 0x2C, 'subsystem vendor id'):04x}"
        sdid = f"{_u16(data, 0x2E, 'subsystem id'):04x}"
    max_speed = max_width = speed = width = None
    # Non-root readers get only the 64-byte header: the capability list lies beyond it.
    if status & 0x10 and len(data) > 0x40:
        ptr = data[0x34] & 0xFC
        seen: set[int] = set()
        while ptr:
            if ptr in seen:
                raise ParseError(_WHAT, "capability list", "loop in the capability pointers", ptr)
            seen.add(ptr)
            if ptr < 0x40 or ptr + 2 > min(len(data), 0x100):
                raise ParseError(_WHAT, "capability pointer", "points outside the capability area", ptr)
            if data[ptr] == CAP_PCIE and ptr + 0x14 <= len(data):
                lnkcap = _u32(data, ptr + 0x0C, "PCIe link capabilities")
                lnksta = _u16(data, ptr + 0x12, "PCIe link status")
                max_speed = LINK_SPEEDS.get(lnkcap & 0xF)
                max_width = (lnkcap >> 4) & 0x3F or None
                speed = LINK_SPEEDS.get(lnksta & 0xF)
                width = (lnksta >> 4) & 0x3F or None
            ptr = data[ptr + 1] & 0xFC
    rebar: list[RebarEntry] = []
    extended_visible = len(data) > 0x100
    if extended_visible:
        off = 0x100
        seen_ext: set[int] = set()
        while off:
            if off in seen_ext:
                raise ParseError(_WHAT, "extended capability list", "loop in the pointers", off)
            seen_ext.add(off)
            if off < 0x100 or off + 4 > len(data):
                raise ParseError(_WHAT, "extended capability pointer", "points outside config space", off)
            header = _u32(data, off, "extended capability header")
            if header in (0, 0xFFFFFFFF):
                break  # none, or hidden by a hypervisor
            if header & 0xFFFF == EXT_CAP_REBAR:
                rebar = _parse_rebar(data, off)
            off = (header >> 20) & 0xFFC
    return ConfigSpace(
        length=len(data),
        vendor_id=f"{vendor:04x}",
        device_id=f"{device:04x}",
        subsystem_vendor_id=svid,
        subsystem_device_id=sdid,
        rebar=rebar,
        extended_visible=extended_visible,
        link_max_speed_gts=max_speed,
        link_max_width=max_width,
        link_speed_gts=speed,
        link_width=width,
    )


def _parse_rebar(data: bytes, off: int) -> list[RebarEntry]:
    """Return the entries of a Resizable BAR capability at ``off``. Raises ParseError when out of bounds."""
    first_ctrl = _u32(data, off + 8, "Resizable BAR control")
    count = (first_ctrl >> 5) & 0x7
    entries: list[RebarEntry] = []
    for i in range(min(count, 6)):
        cap = _u32(data, off + 4 + 8 * i, "Resizable BAR capability")
        ctrl = _u32(data, off + 8 + 8 * i, "Resizable BAR control")
        # Capability bits 4..31: bit n set = 2^(n+16) bytes supported (1 MiB .. 128 TiB).
        supported = [1 << (n + 16) for n in range(4, 32) if cap & (1 << n)]
        current = 1 << (((ctrl >> 8) & 0x3F) + 20)
        entries.append(RebarEntry(bar_index=ctrl & 0x7, supported_bytes=supported, current_bytes=current))
    return entries
