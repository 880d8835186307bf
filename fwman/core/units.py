"""Formatting sizes for people."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    """Return ``n`` bytes as ``256 MiB`` / ``32 GiB`` / ``1.5 KiB`` ("?" for None)."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - loop always returns
