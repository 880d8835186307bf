"""The whole P2P verification against its own parts run alone: what the child processes and deadlines cost.

Whole: what ``fwman p2p`` and ``fwman p2p --nccl`` do, in this process (no interpreter start): the copy
test with one child per GPU pair plus one that lists the GPUs (:func:`run_isolated_copy_test`), then the NCCL
tier as configured and its ``NCCL_P2P_DISABLE=1`` control (:func:`run_nccl_comparison`: the torch runner with
its launcher, deadline and step lines, the reports parsed).

Parts alone: the same copy work in one child with no per-pair isolation (:func:`run_copy_test` on one driver
opened once: the floor, since some process must initialise CUDA), and the torch runner's command run twice
straight through ``subprocess`` (P2P allowed, then the control), nothing parsed.

Target: whole / parts - 1 under 10%. Needs a GPU, libcuda.so.1 and PyTorch with NCCL (``python3``):
``python3 bench/p2p_verification.py [--runs N] [--size MB]``. Exit 0 always.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fwman.host.isolate import run_isolated  # noqa: E402  (after the path is set)
from fwman.host.live import LiveHost  # noqa: E402
from fwman.p2p.copytest import DEFAULT_WARMUP, MIB, run_copy_test, run_isolated_copy_test  # noqa: E402
from fwman.p2p.cuda import open_driver  # noqa: E402
from fwman.p2p.nccl import CONTROL_ENV, DEBUG_ENV, DEFAULT_SIZES, run_nccl_comparison, torch_argv  # noqa: E402


def whole(size: int) -> tuple[float, bool]:
    """Return (seconds, every step verified) of the copy test and the NCCL comparison as fwman runs them."""
    start = time.perf_counter()
    copy = run_isolated_copy_test(open_driver, size, 5, warmup=DEFAULT_WARMUP)
    nccl = run_nccl_comparison(LiveHost(), runner="torch")
    return time.perf_counter() - start, copy.ok and nccl.ok


def parts(size: int) -> tuple[float, float, float]:
    """Return the seconds of the copy work in one child, of the P2P NCCL run and of the control run, alone."""

    def copy_alone(step: object) -> bool:
        layer = open_driver()
        try:
            return run_copy_test(layer, size, 5, warmup=DEFAULT_WARMUP).ok
        finally:
            layer.close()

    start = time.perf_counter()
    run_isolated(copy_alone, 600)
    copy = time.perf_counter() - start
    times = []
    for env in (DEBUG_ENV, {**DEBUG_ENV, **CONTROL_ENV}):
        start = time.perf_counter()
        subprocess.run(torch_argv([], env, "python3", DEFAULT_SIZES, 300), capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return copy, times[0], times[1]


def main() -> int:
    """Run the comparison ``--runs`` times (after one untimed round) and print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", type=int, default=64, help="MiB per copy")
    args = ap.parse_args()
    size = args.size * MIB
    whole(size)  # untimed: the first torch import and CUDA start read from a cold disk cache
    parts(size)
    ratios = []
    for i in range(args.runs):
        w, ok = whole(size)
        c, p2p, control = parts(size)
        alone = c + p2p + control
        ratios.append(w / alone)
        print(
            f"run {i + 1}: whole {w:.2f} s (verified: {ok}); parts alone {alone:.2f} s "
            f"(copy {c:.2f}, NCCL {p2p:.2f}, control {control:.2f}); overhead {(w / alone - 1) * 100:+.1f}%"
        )
    print(f"overhead median {(statistics.median(ratios) - 1) * 100:+.1f}% (target < 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
