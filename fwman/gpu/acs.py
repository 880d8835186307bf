"""Pure parser for the PCIe Access Control Services (ACS) extended capability of a bridge or root port.

Layout (PCIe extended capability ID 0x000D): the ACS Capability register (16 bits) at +4 says which controls the
port implements, the ACS Control register (16 bits) at +6 which are enabled. Bits of both: 0 Source Validation,
1 Translation Blocking, 2 P2P Request Redirect, 3 P2P Completion Redirect, 4 Upstream Forwarding, 5 P2P Egress
Control, 6 Direct Translated P2P. Request Redirect or Completion Redirect on a port sends peer-to-peer traffic
up to the root complex (and through the IOMMU) instead of straight to the peer.

Only a root reader sees the extended configuration space (4096 bytes); others get 64 bytes, and the capability
cannot be read at all: :func:`parse_acs` says so rather than guessing. Every pointer is bounds-checked and
loops in the capability list are cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fwman.core.errors import ParseError
from fwman.gpu.config_space import read_le

EXT_CAP_ACS = 0x000D
EXTENDED_START = 0x100
_WHAT = "config space (ACS)"

#: (bit, short name as `lspci -vvv` prints it in ACSCap/ACSCtl, what it means)
ACS_BITS: tuple[tuple[int, str, str], ...] = (
    (0, "SrcValid", "Source Validation"),
    (1, "TransBlk", "Translation Blocking"),
    (2, "ReqRedir", "P2P Request Redirect"),
    (3, "CmpltRedir", "P2P Completion Redirect"),
    (4, "UpstreamFwd", "Upstream Forwarding"),
    (5, "EgressCtrl", "P2P Egress Control"),
    (6, "DirectTrans", "Direct Translated P2P"),
)
REQUEST_REDIRECT = 1 << 2
COMPLETION_REDIRECT = 1 << 3
#: the controls that send peer-to-peer traffic up to the root complex
REDIRECT_BITS = REQUEST_REDIRECT | COMPLETION_REDIRECT


class AcsState(StrEnum):
    """What could be read of a port's ACS capability."""

    PRESENT = "present"  # the capability was found and read
    ABSENT = "absent"  # the extended capability list was readable and holds no ACS capability
    UNREADABLE = "unreadable"  # only 64 or 256 bytes of config space were readable (not root)


@dataclass(frozen=True)
class AcsReading:
    """A port's ACS capability: ``capability`` and ``control`` are the raw 16-bit registers (0 unless present)."""

    state: AcsState
    config_bytes: int
    offset: int | None = None
    capability: int = 0
    control: int = 0

    @property
    def redirect(self) -> int:
        """Return the enabled redirect bits (Request and/or Completion Redirect), 0 for none."""
        return self.control & REDIRECT_BITS if self.state is AcsState.PRESENT else 0

    def describe(self) -> str:
        """Return ``ACSCtl: SrcValid+ TransBlk- ...`` as lspci prints the control register (or the state)."""
        if self.state is not AcsState.PRESENT:
            return f"ACS {self.state.value} ({self.config_bytes} bytes of config space)"
        return "ACSCtl: " + " ".join(f"{name}{'+' if self.control & (1 << bit) else '-'}" for bit, name, _ in ACS_BITS)


def bit_names(value: int) -> list[str]:
    """Return the lspci names of the ACS bits set in ``value``, in bit order."""
    return [name for bit, name, _ in ACS_BITS if value & (1 << bit)]


def bit_meanings(value: int) -> list[str]:
    """Return the spelled-out names (``P2P Request Redirect``) of the ACS bits set in ``value``."""
    return [meaning for bit, _, meaning in ACS_BITS if value & (1 << bit)]


def find_extended_capability(data: bytes, cap_id: int) -> int | None:
    """Return the offset of extended capability ``cap_id`` in config space ``data``, None when the list has none.

    The caller makes sure ``data`` holds the extended space (more than 256 bytes). A header of 0 or all ones
    ends the list (none, or hidden by a hypervisor). Raises ParseError for a pointer outside ``data``, a
    pointer back into the first 256 bytes, or a loop.
    """
    off = EXTENDED_START
    seen: set[int] = set()
    while off:
        if off in seen:
            raise ParseError(_WHAT, "extended capability list", "loop in the pointers", off)
        seen.add(off)
        if off < EXTENDED_START:
            raise ParseError(_WHAT, "extended capability pointer", "points into the first 256 bytes", off)
        header = read_le(data, off, 4, _WHAT, "extended capability header")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return off
        off = (header >> 20) & 0xFFC
    return None


def parse_acs(data: bytes) -> AcsReading:
    """Return the ACS capability of the port whose config space is ``data``.

    64 or 256 bytes (what a non-root reader gets) give state UNREADABLE: the capability lives in the
    extended space. Raises ParseError for fewer than 64 bytes or a broken extended capability list.
    """
    if len(data) < 0x40:
        raise ParseError(_WHAT, "header", f"only {len(data)} bytes; a PCI header has 64", 0)
    if len(data) <= EXTENDED_START:
        return AcsReading(state=AcsState.UNREADABLE, config_bytes=len(data))
    off = find_extended_capability(data, EXT_CAP_ACS)
    if off is None:
        return AcsReading(state=AcsState.ABSENT, config_bytes=len(data))
    return AcsReading(
        state=AcsState.PRESENT,
        config_bytes=len(data),
        offset=off,
        capability=read_le(data, off + 4, 2, _WHAT, "ACS capability register", "register"),
        control=read_le(data, off + 6, 2, _WHAT, "ACS control register", "register"),
    )
