"""The PCI bridges that matter for peer-to-peer, read from a Host: the ports between every GPU pair (with their
ACS capability) and the port above each card whose link is below its maximum (with its link capability).

Pure parsing lives in :mod:`fwman.gpu.acs`, :mod:`fwman.gpu.config_space` and :mod:`fwman.gpu.pci_path`; this
module only reads the files they parse, and never raises: what it cannot read is kept as a problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fwman.core.errors import MissingError, NotRecordedError, ParseError
from fwman.gpu.acs import AcsReading, parse_acs
from fwman.gpu.card import Card
from fwman.gpu.config_space import parse_config_space
from fwman.gpu.pci_path import bridge_dir, crossed_bridges, device_path, upstream_bridge
from fwman.gpu.sysfs import parse_int, parse_link_speed
from fwman.host.base import Host


@dataclass
class AcsFacts:
    """Per GPU pair the bridges between them; per bridge its ACS reading (or why it could not be read)."""

    pairs: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    readings: dict[str, AcsReading] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)  # bridge or GPU -> what could not be read


def gather_acs(host: Host, cards: list[Card]) -> AcsFacts:
    """Return the bridges between every pair of ``cards`` and each bridge's ACS reading. Never raises."""
    out = AcsFacts()
    where: dict[str, str] = {}
    for c in cards:
        try:
            where[c.bus_id] = device_path(host, c.bus_id)
        except (MissingError, NotRecordedError) as e:
            out.problems[c.bus_id] = e.message
    buses = sorted(where)
    dirs: dict[str, str] = {}
    for i, a in enumerate(buses):
        for b in buses[i + 1 :]:
            crossed = crossed_bridges(where[a], where[b])
            out.pairs[(a, b)] = crossed
            for bridge in crossed:
                d = bridge_dir(where[a], bridge) or bridge_dir(where[b], bridge)
                if d:
                    dirs[bridge] = d
    for bridge, d in sorted(dirs.items()):
        try:
            out.readings[bridge] = parse_acs(host.read_bytes(f"{d}/config"))
        except (MissingError, NotRecordedError, ParseError) as e:
            out.problems[bridge] = e.message
    return out


@dataclass(frozen=True)
class SlotFacts:
    """One card's link and the link capability of the port above it (None when unknown)."""

    bus_id: str
    card: Card
    port: str | None = None
    port_max_width: int | None = None
    port_max_speed_gts: float | None = None
    problem: str | None = None


def _port_capability(host: Host, port_dir: str) -> tuple[int | None, float | None]:
    """Return the port's maximum width and speed: sysfs (readable by anyone), else its config space."""
    width = speed = None
    try:
        width = parse_int(host.read_text(f"{port_dir}/max_link_width"), "max_link_width") or None
        speed = parse_link_speed(host.read_text(f"{port_dir}/max_link_speed"))
    except (MissingError, NotRecordedError, ParseError):
        pass
    if width is None or speed is None:
        try:
            cfg = parse_config_space(host.read_bytes(f"{port_dir}/config"))
            width = width or cfg.link_max_width
            speed = speed or cfg.link_max_speed_gts
        except (MissingError, NotRecordedError, ParseError):
            pass
    return width, speed


def gather_slots(host: Host, cards: list[Card]) -> list[SlotFacts]:
    """Return, for each card below its link maximum, the link capability of the port above it. Never raises."""
    out = []
    for c in cards:
        if not c.link.downtrained:
            continue
        try:
            path = device_path(host, c.bus_id)
        except (MissingError, NotRecordedError) as e:
            out.append(SlotFacts(c.bus_id, c, problem=e.message))
            continue
        port = upstream_bridge(path)
        d = bridge_dir(path, port) if port else None
        if port is None or d is None:
            out.append(SlotFacts(c.bus_id, c, problem="the card sits on a root bus: no port above it to read"))
            continue
        width, speed = _port_capability(host, d)
        out.append(SlotFacts(c.bus_id, c, port, width, speed))
    return out
