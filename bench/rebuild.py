"""Per-kernel rebuild with fwman's object cache against a clean full build (what DKMS does for every kernel).

All three builds run here, side by side, through `fwman modules build` on temp roots with the real Debian
headers (6.1.0-50-amd64 and 6.1.0-53-amd64), from the stand-in fork tree in fixtures/kmod-tree/fork *ported*
to the 4-argument pci_resize_resource() with a conftest (the way the fork would fix it), so that one tree builds
for both kernels:

1. clean full build for 6.1.0-50 (empty object cache): kernel-independent objects + kernel-open;
2. the second kernel, 6.1.0-53, in the same root: objects from the cache, kernel-open only (fwman's case);
3. clean full build for 6.1.0-53 in a fresh root (what DKMS does for a new kernel).

Target: (3) / (2) >= 5x. The ratio is a property of the tree: for the real 570.86.16-p2p branch
(docs: ~270 s kernel-independent, ~267 s kernel-open on 2 cores) the same measurement predicts ~2x.
Run as root: ``.venv/bin/python bench/rebuild.py [--runs N]``. Prints times and ratios; exit 0 always.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

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
            "    return pci_resize_resource(pdev, bar, size);",
            "#if defined(NV_PCI_RESIZE_RESOURCE_EXCLUDE_BARS_PRESENT)\n"
            "    return pci_resize_resource(pdev, bar, size, 0);\n"
            "#else\n"
            "    return pci_resize_resource(pdev, bar, size);\n"
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


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root (depmod and the temp roots need it)", file=sys.stderr)
        return 0

    from tests.support.modules import FORK_TREE, KERNEL_BAD, KERNEL_OK, add_kernel

    full_first: list[float] = []
    cached_second: list[float] = []
    full_second: list[float] = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
            tree = Path(tmp) / "fork"
            shutil.copytree(FORK_TREE, tree, symlinks=True)
            port(tree)
            a, b = Path(tmp) / "a", Path(tmp) / "b"
            for root in (a, b):
                for kver in (KERNEL_OK, KERNEL_BAD):
                    add_kernel(root, kver)
                shutil.copytree(tree, root / "src/fork", symlinks=True)
            full_first.append(build(a, KERNEL_OK))
            cached_second.append(build(a, KERNEL_BAD))
            full_second.append(build(b, KERNEL_BAD))
    f1, c2, f2 = (statistics.median(x) for x in (full_first, cached_second, full_second))
    print(f"cores: {os.cpu_count()}, runs: {args.runs} (medians)")
    print(f"clean full build, {KERNEL_OK}:                    {f1:7.1f} s")
    print(f"second kernel {KERNEL_BAD} with the object cache: {c2:7.1f} s")
    print(f"clean full build, {KERNEL_BAD} (DKMS per kernel): {f2:7.1f} s")
    print(f"ratio full/cached for {KERNEL_BAD}: {f2 / c2:.1f}x (target >= 5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
