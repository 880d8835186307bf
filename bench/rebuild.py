"""Per-kernel rebuild with fwman's object cache against a clean full build (what DKMS does for every kernel).

All three builds run here, side by side, through `fwman modules build --json` on temp roots with the real Debian
headers (the pair of tests/support/kernels.py: a kernel whose pci_resize_resource() takes 3 arguments and one
whose takes 4), from the stand-in fork tree in fixtures/kmod-tree/fork, which calls the 3-argument form like the
real fork: fwman's compat patch (fwman/compat/) makes it build for the second kernel, as it does the fork
(`--port` instead ports the tree with a conftest and leaves the compat patch masked, as before issue 39):

1. clean full build for 6.1.0-50 (empty object cache): kernel-independent objects + kernel-open;
2. the second kernel, 6.1.0-53, in the same root: objects from the cache, kernel-open only (fwman's case);
3. clean full build for 6.1.0-53 in a fresh root (what DKMS does for a new kernel).

For each build it prints where the time went (the `phases` of the JSON: copy_tree, restore_objects, make,
store_objects, install, and the rest of the command: lockstep, initramfs, boot check). The ratio (3) / (2) is a
property of the tree: the stand-in's kernel-independent part is larger than its kernel-open part, the real
570.86.16-p2p branch's two parts are about equal (docs/kernel-modules.md of the design notes: ~270 s
kernel-independent, ~267 s kernel-open on 2 cores), so its ratio is at most (270 + 267) / 267 = 2.01x: whatever
the cached build spends outside make's kernel-open stage comes off that. The last line applies the overheads
measured here to those proportions. `--fork-dir DIR` measures a real fork checkout instead (no porting; pick two
kernels it builds for with `--kernels`).

`--via-fork` builds the tree as a fork branch (a git repository by file://: checkout, hard-linked build tree), as
the hook does, instead of as `--source` (copied). Run as root:
``.venv/bin/python bench/rebuild.py [--runs N] [--via-fork] [--fork-dir DIR --kernels K1 K2]``. Prints times and
ratios; exit 0 always.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PORT_CONFTEST = """probe pci_resize_resource_exclude_bars '#include <linux/pci.h>
int conftest(struct pci_dev *d) { return pci_resize_resource(d, 0, 0, 0); }'
"""


def port(tree: Path) -> None:
    """Port the stand-in tree to kernels whose pci_resize_resource() takes exclude_bars (conftest + #if)."""
    conftest = tree / "kernel-open/conftest.sh"
    text = conftest.read_text()
    conftest.write_text(text.replace('mv "$OUTDIR/headers.h.new"', PORT_CONFTEST + 'mv "$OUTDIR/headers.h.new"'))
    nv_pci = tree / "kernel-open/nvidia/nv-pci.c"
    nv_pci.write_text(
        nv_pci.read_text().replace(
            "    r = pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size);",
            "#if defined(NV_PCI_RESIZE_RESOURCE_EXCLUDE_BARS_PRESENT)\n"
            "    r = pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size, 0);\n"
            "#else\n"
            "    r = pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size);\n"
            "#endif",
        )
    )


def timed(*argv: str) -> float:
    """Run fwman ``argv`` in-process and return the wall time. Exits on failure (bench/bundle.py uses it too)."""
    from tests.support.env import FwmanEnv

    started = time.perf_counter()
    result = FwmanEnv()(*argv)
    elapsed = time.perf_counter() - started
    if result.code != 0:
        print(result.stdout + result.stderr, file=sys.stderr)
        raise SystemExit(f"fwman {' '.join(argv[:4])} failed (exit {result.code})")
    return elapsed


def build(root: Path, kver: str) -> float:
    """Run `fwman modules build` for ``kver`` in ``root`` and return the wall time. Exits on failure."""
    return timed("modules", "build", "--kernel", kver, "--source", "/src/fork", "--root", str(root))


def build_json(
    root: Path, kver: str, source: tuple[str, ...] = ("--source", "/src/fork")
) -> tuple[float, dict[str, float]]:
    """Run `fwman modules build --json` for ``kver`` in ``root`` from ``source`` (its options); return (wall time,
    phases with ``rest``: the command's time outside them). Exits on failure."""
    from tests.support.env import FwmanEnv

    argv = ("modules", "build", "--json", "--kernel", kver, *source, "--root", str(root))
    started = time.perf_counter()
    result = FwmanEnv()(*argv)
    elapsed = time.perf_counter() - started
    if result.code != 0:
        print(result.stdout + result.stderr, file=sys.stderr)
        raise SystemExit(f"fwman modules build --kernel {kver} failed (exit {result.code})")
    entry: dict[str, Any] = json.loads(result.stdout)["kernels"][0]
    phases = {str(k): float(v) for k, v in entry["phases"].items()}
    phases["rest"] = max(0.0, elapsed - sum(phases.values()))
    return elapsed, phases


def _median_phases(runs: list[dict[str, float]]) -> dict[str, float]:
    names = sorted({n for r in runs for n in r}, key=lambda n: min(list(r).index(n) for r in runs if n in r))
    return {n: statistics.median(r.get(n, 0.0) for r in runs) for n in names}


def _show(label: str, wall: float, phases: dict[str, float]) -> None:
    parts = ", ".join(f"{n} {s:.2f}" for n, s in phases.items() if s >= 0.005)
    print(f"{label:52s} {wall:7.1f} s   ({parts})")


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--fork-dir", type=Path, help="a checkout of a real fork to build instead of the stand-in")
    parser.add_argument("--kernels", nargs=2, metavar=("K1", "K2"), help="the two kernels (default: the test pair)")
    parser.add_argument("--port", action="store_true", help="port the stand-in with a conftest, compat patch masked")
    parser.add_argument(
        "--via-fork",
        action="store_true",
        help="build from the tree as a fork branch (a git repository reached by file://), as the hook does",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root (depmod and the temp roots need it)", file=sys.stderr)
        return 0

    from tests.support.modules import (
        FORK_TREE,
        KERNEL_BAD,
        KERNEL_OK,
        P2P_BRANCH,
        add_kernel,
        make_fork_repo,
        unmask_compat,
    )

    first, second = args.kernels or (KERNEL_OK, KERNEL_BAD)
    walls: dict[str, list[float]] = {"full_first": [], "cached_second": [], "full_second": []}
    phases: dict[str, list[dict[str, float]]] = {k: [] for k in walls}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
            tree = Path(tmp) / "fork"
            shutil.copytree(args.fork_dir or FORK_TREE, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            if args.fork_dir is None and args.port:
                port(tree)
            a, b = Path(tmp) / "a", Path(tmp) / "b"
            source: tuple[str, ...] = ("--source", "/src/fork")
            if args.via_fork:
                make_fork_repo(Path(tmp) / "fork.git", tree)
                source = ("--fork", f"file://{tmp}/fork.git", "--branch", P2P_BRANCH)
            for root in (a, b):
                for kver in (first, second):
                    add_kernel(root, kver)
                if not args.port:
                    unmask_compat(root)  # fwman's compat patch, applied by what the second kernel's headers declare
                shutil.copytree(tree, root / "src/fork", symlinks=True)
            for name, root, kver in (
                ("full_first", a, first),
                ("cached_second", a, second),
                ("full_second", b, second),
            ):
                wall, spent = build_json(root, kver, source)
                walls[name].append(wall)
                phases[name].append(spent)
    f1, c2, f2 = (statistics.median(walls[k]) for k in ("full_first", "cached_second", "full_second"))
    p1, pc, p2 = (_median_phases(phases[k]) for k in ("full_first", "cached_second", "full_second"))
    how = "as a fork branch (file://)" if args.via_fork else "as --source"
    tree_name = args.fork_dir or ("stand-in (ported)" if args.port else "stand-in + fwman's compat patch")
    print(f"cores: {os.cpu_count()}, runs: {args.runs} (medians), tree: {tree_name}, {how}")
    _show(f"clean full build, {first}:", f1, p1)
    _show(f"second kernel {second} with the object cache:", c2, pc)
    _show(f"clean full build, {second} (DKMS per kernel):", f2, p2)
    print(f"ratio full/cached for {second}: {f2 / c2:.2f}x")
    # the cached build beyond make's kernel-open stage, and the clean one beyond its two make stages
    kernel_open = pc["make"]
    cached_extra = c2 - kernel_open
    clean_extra = f2 - p2["make"]
    print(
        f"cached build: {kernel_open / c2:.0%} in make (kernel-open only), {cached_extra:.2f} s elsewhere; "
        f"kernel-independent part of the clean make: {max(0.0, p2['make'] - kernel_open):.1f} s"
    )
    ki_real, ko_real = 270.0, 267.0  # the real 570.86.16-p2p on 2 cores (design notes, docs/kernel-modules.md)
    predicted = (ki_real + ko_real + clean_extra) / (ko_real + cached_extra)
    print(
        f"with the real fork's proportions ({ki_real:.0f} s + {ko_real:.0f} s) and these overheads: {predicted:.2f}x "
        f"(bound {(ki_real + ko_real) / ko_real:.2f}x; work that grows with the real tree's size is not in the "
        "stand-in's overheads)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
