"""Build once per fleet: importing a bundle against a clean build of the same modules, side by side.

Both run through fwman on temp roots with the real Debian headers of 6.1.0-50-amd64 and the stand-in fork tree
(fixtures/kmod-tree/fork, see bench/rebuild.py):

1. clean build: `fwman modules build` in a fresh root with an empty object cache (what every host of a fleet
   does without bundles; DKMS does the same);
2. `fwman modules export` of those modules (once, on the build host);
3. `fwman modules import` in a fresh root with only the kernel's module directory (every other host): all the
   checks (hashes, vermagic, signature state), staged install, real depmod, verification, manifest, boot check.

Target: (1) / (3) >= 20x. On the real 570.86.16-p2p branch the build takes minutes (docs: ~270 s
kernel-independent plus ~267 s kernel-open on 2 cores) while the import costs about the same as here plus the
copy of ~100 MiB of modules. Run as root: ``.venv/bin/python bench/bundle.py [--runs N]``. Exit 0 always.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.rebuild import timed  # noqa: E402  (after the path is set)


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("run as root (depmod and the temp roots need it)", file=sys.stderr)
        return 0

    from tests.support.modules import KERNEL_OK, SOURCE, add_kernel, build_root

    builds: list[float] = []
    exports: list[float] = []
    imports: list[float] = []
    size = 0
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
            builder = build_root(Path(tmp) / "builder", (KERNEL_OK,))  # empty object cache: a clean build
            other = Path(tmp) / "other"
            add_kernel(other, KERNEL_OK, headers=False)
            bundle = str(Path(tmp) / "p2p.fwbundle")
            builds.append(timed("modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE, "--root", str(builder)))
            exports.append(timed("modules", "export", "--kernel", KERNEL_OK, "-o", bundle, "--root", str(builder)))
            imports.append(timed("modules", "import", bundle, "--root", str(other)))
            size = os.path.getsize(bundle)
    b, e, i = (statistics.median(x) for x in (builds, exports, imports))
    print(f"cores: {os.cpu_count()}, runs: {args.runs} (medians), kernel {KERNEL_OK}, bundle {size} bytes")
    print(f"clean build (fwman modules build, empty object cache): {b:7.2f} s")
    print(f"export once on the build host (fwman modules export):  {e:7.2f} s")
    print(f"import on another host (fwman modules import):         {i:7.2f} s")
    print(f"ratio build/import: {b / i:.1f}x (target >= 20x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
