"""Start-up of this tree against an older one, interleaved sample by sample, with the floors issue 34 names.

"No worse than today" is a comparison of two trees on one machine: this script runs the same commands from this
checkout and from ``--base`` (another checkout, e.g. ``git worktree add /tmp/base REV``), one sample of each in
turn, so that a machine that slows down mid-run slows both alike. Each tree runs as ``python -m fwman`` from its
own directory (that tree's package is the one imported). Printed: the medians, each tree's ratios to its floors
(``--version`` to a bare Python start and to ``import click``; ``scan --json`` to ``nvidia-smi -q -x`` plus
``import click, pydantic`` where nvidia-smi is, else to ``import click, pydantic`` over an 8-GPU snapshot), and
this tree's time over the base's.

Run: ``.venv/bin/python bench/startup_against.py --base /tmp/base [--runs N]``. Exits 0 always (a benchmark, not a
test); exits 2 when ``--base`` holds no fwman package.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _once(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
    return time.perf_counter() - start


def main() -> int:
    """Measure both trees and print medians and ratios; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the older revision")
    parser.add_argument("--runs", type=int, default=41)
    args = parser.parse_args()
    if not (args.base / "fwman/__main__.py").is_file():
        print(f"{args.base} holds no fwman package (fwman/__main__.py)", file=sys.stderr)
        return 2
    py = sys.executable
    trees = {"base": args.base.resolve(), "this": REPO}
    for tree in trees.values():  # as every installed copy is (see startup.py's compile_fwman)
        subprocess.run([py, "-m", "compileall", "-q", str(tree / "fwman")], check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        smi = shutil.which("nvidia-smi")
        if smi is not None:
            scan = ["scan", "--json"]
            scan_floor = ["sh", "-c", f"{smi} -q -x >/dev/null && {py} -c 'import click, pydantic'"]
        else:
            from fixtures.hostgen.rig import GpuSpec, build_rig

            gpus = [GpuSpec(bus=0x01 + 0x20 * i, subsystem_device=0x3987, vbios="94.02.26.48.15", iommu_group=10 + i)
                    for i in range(8)]  # fmt: skip
            snap = build_rig(gpus, note="8-GPU benchmark host").write(Path(tmp) / "rig8")
            scan = ["--snapshot", str(snap), "scan", "--json"]
            scan_floor = [py, "-c", "import click, pydantic"]
        cases: dict[str, tuple[list[str], Path]] = {
            "bare python": ([py, "-c", "pass"], REPO),
            "import click": ([py, "-c", "import click"], REPO),
            "scan floor": (scan_floor, REPO),
        }
        for name, tree in trees.items():
            cases[f"{name} --version"] = ([py, "-m", "fwman", "--version"], tree)
            cases[f"{name} scan --json"] = ([py, "-m", "fwman", *scan], tree)
        for argv, cwd in cases.values():  # warm the OS cache once for each
            _once(argv, cwd)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (argv, cwd) in cases.items():
                samples[name].append(_once(argv, cwd))
    m = {name: statistics.median(v) * 1000 for name, v in samples.items()}
    print(f"scan floor: {'nvidia-smi -q -x + import click, pydantic' if smi else 'import click, pydantic (snapshot)'}")
    for name, value in m.items():
        print(f"{name:<20} {value:8.1f} ms")
    for name in trees:
        print(
            f"{name}: --version {m[f'{name} --version'] / m['bare python']:.2f}x of a bare Python start, "
            f"{m[f'{name} --version'] / m['import click']:.2f}x of import click; "
            f"scan --json {m[f'{name} scan --json'] / m['scan floor']:.2f}x of its floor"
        )
    print(
        f"this / base: --version {m['this --version'] / m['base --version']:.2f}x, "
        f"scan --json {m['this scan --json'] / m['base scan --json']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
