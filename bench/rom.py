"""ROM inspect + verify of a 1 MiB image against its floor, hashlib MD5 + SHA-256 of the same bytes.

Both run in this one process, interleaved round by round, on the same bytes (a generated NVGI dump of
exactly 1 MiB from ``fixtures.romgen``). The parse must hash the file twice (MD5 and SHA-256, as the catalog
publishes them) and the option-ROM chain once more (SHA-256: the identity of the firmware), so the floor is
the two whole-file hashes. Target: ratio <= 1.5x. Also printed: the same parse with MD5 kept on the calling
thread, to show what the second thread buys.

Run: ``.venv/bin/python bench/rom.py [--rounds N]``. Prints medians, best times and the ratio; exits 0
always (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    """Measure and print the ratio."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    from fixtures.romgen import RomSpec, build_rom
    from fwman.core.findings import Severity
    from fwman.firmware.rom import parse as rom
    from fwman.firmware.rom.parse import parse_rom
    from fwman.firmware.verify.compatible import check_compatible
    from fwman.gpu.card import Card

    data = build_rom(RomSpec(version="94.02.42.80.27", dump_size=1 << 20))
    card = Card(
        bus_id="0000:41:00.0",
        vendor_id="10de",
        device_id="2204",
        subsystem_vendor_id="3842",
        subsystem_device_id="3987",
        vbios_version="94.02.26.48.15",
    )

    def ours() -> None:
        findings = check_compatible(parse_rom(data), card, None, catalog=False)
        assert not [f for f in findings if f.severity is Severity.BLOCK]

    def floor() -> None:
        hashlib.md5(data, usedforsecurity=False).hexdigest()
        hashlib.sha256(data).hexdigest()

    def single_thread() -> None:
        rom.PARALLEL_HASH_MIN = 1 << 62  # what the parse costs when MD5 does not get its own thread
        try:
            ours()
        finally:
            rom.PARALLEL_HASH_MIN = parallel_min

    parallel_min = rom.PARALLEL_HASH_MIN
    runs = (("inspect+verify", ours), ("inspect+verify, one thread", single_thread), ("floor", floor))
    samples: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _, fn in runs:
        fn()  # warm up imports and caches
    for _ in range(args.rounds):
        for name, fn in runs:
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    base = statistics.median(samples["floor"])
    print(f"image: {len(data):,} bytes, {args.rounds} rounds, interleaved")
    for name, _ in runs:
        label = "hashlib MD5 + SHA-256 (floor)" if name == "floor" else name
        med = statistics.median(samples[name])
        print(f"  {label:<32} median {med * 1e3:7.3f} ms   ratio {med / base:.2f}x")
    print("target: inspect+verify <= 1.5x the floor (MD5 runs on a second thread; hashlib releases the GIL)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
