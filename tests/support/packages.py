"""Vendor update packages for tests: four TUF-like images (two boards, an option ROM padded to 1 MiB, a dump).

Shared by the pure scan's tests (tests/unit/firmware/rom/test_package.py) and the unpacker's
(tests/unit/firmware/ops/test_unpack.py).
"""

from __future__ import annotations

from fixtures.romgen import RomSpec, build_rom

MIB = 1 << 20


def tuf(version: str, seed: int, sub: int = 0x87B0, kind: str = "option_rom") -> bytes:
    """Return a 10de:2206 image for subsystem 1043:``sub``: an option ROM padded to 1 MiB, or a ROM of ``kind``."""
    spec = RomSpec(kind=kind, version=version, device_id=0x2206, subsystem_vendor=0x1043,  # type: ignore[arg-type]
                   subsystem_device=sub, filler_seed=seed)  # fmt: skip
    rom = build_rom(spec)
    return rom.ljust(MIB, b"\xff") if kind == "option_rom" else rom


AS02 = tuf("94.02.42.40.66", 1)
AS03 = tuf("94.02.42.40.65", 2)
TURBO = tuf("94.02.42.40.70", 3, sub=0x87EB)
TURBO_DUMP = tuf("94.02.42.40.71", 4, sub=0x87EB, kind="nvgi_dump")
