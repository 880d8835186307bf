"""Startup cost of fwman against its floor, measured side by side in one run.

1. ``fwman --version``                      vs ``python -c "import click"``           (target <= 1.3x)
2. ``fwman scan --json --snapshot <8 GPUs>`` vs ``python -c "import click, pydantic"`` (target <= 1.5x)

Run: ``.venv/bin/python bench/startup.py [--runs N]``. Prints medians and ratios; exits 0 always (a benchmark,
not a test).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _time(argv: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def compile_fwman() -> None:
    """Byte-compile fwman's modules, as every installed copy is (pip and Debian's dh_python3 compile at install).

    Without it an editable checkout run where PYTHONDONTWRITEBYTECODE is set (this workplace sets it) compiles
    every module it imports from source on every run, which the floor (installed, compiled packages) never
    does: that is not fwman's start, and it made up a large part of what the first measurements blamed on it.
    """
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(REPO / "fwman")], check=True, stdout=subprocess.DEVNULL
    )


def main() -> int:
    """Measure and print the two ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    from fixtures.hostgen.rig import GpuSpec, build_rig

    py = sys.executable
    # the console script a user runs; `python -m fwman` where it is not installed
    script = Path(py).with_name("fwman")
    fwman = [str(script)] if script.exists() else [py, "-m", "fwman"]
    compile_fwman()
    with tempfile.TemporaryDirectory() as tmp:
        gpus = [
            GpuSpec(bus=0x01 + 0x20 * i, subsystem_device=0x3987, vbios="94.02.26.48.15", iommu_group=10 + i)
            for i in range(8)
        ]
        snap = build_rig(gpus, note="8-GPU benchmark host").write(Path(tmp) / "rig8")
        # warm the OS cache once for each
        for argv in ([*fwman, "--version"], [py, "-c", "import click, pydantic"]):
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
        pairs = [
            ("fwman --version", [*fwman, "--version"], 'python -c "import click"', [py, "-c", "import click"], 1.3),
            (
                "fwman scan --json --snapshot rig8",
                [*fwman, "--snapshot", str(snap), "scan", "--json"],
                'python -c "import click, pydantic"',
                [py, "-c", "import click, pydantic"],
                1.5,
            ),
        ]
        print(f"{'command':<40} {'median':>9} {'floor':>9} {'ratio':>7} target")
        for name, argv, floor_name, floor_argv, target in pairs:
            t_cmd = _time(argv, args.runs)
            t_floor = _time(floor_argv, args.runs)
            ratio = t_cmd / t_floor
            verdict = "ok" if ratio <= target else "OVER"
            print(
                f"{name:<40} {t_cmd * 1000:8.1f}ms {t_floor * 1000:8.1f}ms {ratio:6.2f}x <= {target}x {verdict}"
                f"   (floor: {floor_name})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
