"""What several checks say the same way: sizes, bus lists, GPU pairs."""

from __future__ import annotations

from fwman.core.units import human_bytes
from fwman.gpu.card import Card


def gib(n: int | None) -> str:
    """Return ``n`` bytes for people ("24 GiB"; "?" when unknown)."""
    return human_bytes(n)


def buses(cards: list[Card]) -> str:
    """Return the cards' bus ids, comma-separated."""
    return ", ".join(c.bus_id for c in cards)


def gpu_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Return every ordered pair of two different GPUs."""
    return [(a, b) for a in names for b in names if a != b]
