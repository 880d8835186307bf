"""The prefetchable bridge window of the port above each GPU, against the BAR1 the card asks for.

"The bridge window is the real diagnostic" on headless server boards, and "Above 4G Decoding being on is not the
same as ReBAR being on" (noonghunna/club-3090 docs/PCIE_P2P.md section 4a): a card can offer a 32 GiB BAR1 and
still get 256 MiB when the root port's prefetchable window is smaller. ``pci=realloc`` (xCuri0/ReBarUEFI issue
119) and ``pci=realloc,hpmemsize=8G`` make the kernel grow the windows.

A bridge's sysfs ``resource`` file lists its own BARs and ROM first, then its windows (how many lines come
between depends on the kernel's configuration), so the window is found by its flags, not its line: memory
(``IORESOURCE_MEM`` 0x200) and prefetchable (``IORESOURCE_PREFETCH`` 0x2000), Linux include/linux/ioport.h.
"""

from __future__ import annotations

from dataclasses import dataclass

from fwman.core.errors import FwmanError, MissingError, NotRecordedError
from fwman.gpu.card import Card
from fwman.gpu.pci_path import bridge_dir, device_path, upstream_bridge
from fwman.gpu.sysfs import Bar, parse_resource
from fwman.host.base import Host

IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
#: a bridge's windows come after its two BARs and its ROM (lines 0-6 are BARs 0-5 and the ROM on every device)
FIRST_WINDOW_LINE = 7


@dataclass(frozen=True)
class BridgeWindow:
    """The port above one card: its prefetchable window and what the card asks for."""

    bus_id: str  # the card
    port: str | None
    window_bytes: int | None  # None: not read (see problem)
    bar1_bytes: int | None  # what the card has now
    wanted_bytes: int | None  # the largest BAR1 the card offers (Resizable BAR), else its BAR1
    problem: str | None = None

    @property
    def limits(self) -> bool:
        """Return True when the window is smaller than the BAR1 the card could have."""
        return self.window_bytes is not None and self.wanted_bytes is not None and self.window_bytes < self.wanted_bytes


def prefetch_window(bars: list[Bar]) -> Bar | None:
    """Return the largest memory+prefetchable window of a bridge's ``resource`` lines, None when it has none."""
    both = IORESOURCE_MEM | IORESOURCE_PREFETCH
    windows = [b for b in bars if b.index >= FIRST_WINDOW_LINE and b.size and b.flags & both == both]
    return max(windows, key=lambda b: b.size, default=None)


def gather_windows(host: Host, cards: list[Card]) -> list[BridgeWindow]:
    """Return the window above each card. Never raises: what could not be read is the entry's ``problem``."""
    out = []
    for c in cards:
        wanted = max(c.rebar_sizes_bytes, default=None) or c.bar1_bytes
        try:
            path = device_path(host, c.bus_id)
            port = upstream_bridge(path)
            d = bridge_dir(path, port) if port else None
            if port is None or d is None:
                out.append(BridgeWindow(c.bus_id, None, None, c.bar1_bytes, wanted, "on a root bus: no port above"))
                continue
            window = prefetch_window(parse_resource(host.read_text(f"{d}/resource")))
        except (MissingError, NotRecordedError) as e:
            out.append(BridgeWindow(c.bus_id, None, None, c.bar1_bytes, wanted, e.message))
            continue
        except FwmanError as e:
            out.append(BridgeWindow(c.bus_id, port, None, c.bar1_bytes, wanted, e.message))
            continue
        if window is None:
            out.append(BridgeWindow(c.bus_id, port, None, c.bar1_bytes, wanted, "the port has no prefetchable window"))
            continue
        out.append(BridgeWindow(c.bus_id, port, window.size, c.bar1_bytes, wanted))
    return out
