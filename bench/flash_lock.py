"""The host-wide flash lock's cost against a whole stand-in flash, measured side by side in one run.

A flash on the stand-in rig (fixtures/nvflash: the example 4x3090 host under a temp root, the stand-in nvflash
first on PATH, no write delay) runs gates, backups of all four cards, protect-off, the write and the read-back:
the least a flash takes, so the lock's share is the largest it can be. The lock's cost is what a flash adds:
one take (open, ``flock``, read the old record, write and fsync ours) and one release (truncate, fsync,
unlock), timed on the same root. Target: under 1% of the flash.

Run: ``.venv/bin/python bench/flash_lock.py [--rounds N]``. Prints medians and the ratio; exits 0 always.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    """Measure and print the ratio."""
    from fixtures.nvflash.rig import REBAR_3987, build_rig
    from fwman.host.hostlock import exclusive
    from fwman.host.live import LiveHost

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    flashes, locks = [], []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            rig = build_rig(Path(tmp))
            t = time.perf_counter()
            r = rig("flash", "--card", "41:00.0", "--image", f"3842:3987/{REBAR_3987}")
            flashes.append(time.perf_counter() - t)
            assert r.code == 0, r.stderr  # type: ignore[attr-defined]
            host = LiveHost(str(rig.root))
            cycles = []
            for _ in range(50):
                t = time.perf_counter()
                with exclusive(host, "fwman flash --card 41:00.0"):
                    pass
                cycles.append(time.perf_counter() - t)
            locks.append(statistics.median(cycles))
        print(f"  round {i + 1}: flash {flashes[-1] * 1000:.0f} ms, lock take+release {locks[-1] * 1e6:.0f} us")
    flash, lock = statistics.median(flashes), statistics.median(locks)
    print(
        f"stand-in flash {flash * 1000:.0f} ms; the lock {lock * 1e6:.0f} us: {100 * lock / flash:.3f}% of the flash "
        "(target < 1%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
