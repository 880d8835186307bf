"""Boot-time catch-up with every kernel current: `fwman modules catchup` against `dkms autoinstall`.

One temp root with the two real Debian kernels (6.1.0-50-amd64, 6.1.0-53-amd64): fwman's modules built for
both from the stand-in fork tree (ported to both kernels, see bench/rebuild.py), and the stand-in stock
`nvidia` module registered with the real dkms and already installed for both kernels. Then, interleaved round
by round, each as the process the boot would start:

- fwman: ``python -m fwman modules catchup --root ROOT`` (what fwman-catchup.service runs);
- the boot unit's command, ``/usr/local/lib/fwman/fwman-catchup`` (installed by ``fwman hooks install``; a
  shell fast path that starts Python only when the kernels or module files changed since the last full check);
- DKMS: ``dkms autoinstall -k KVER`` for each kernel (what dkms.service / the dkms hook run), tree options
  pointing at the root.

Target: DKMS / fwman >= 10x. The Python CLI cannot reach it on its own: the interpreter start is ~30 ms here
(printed), and DKMS's no-op autoinstall is ~100-150 ms per kernel, so the boot unit runs the shell fast path.
Run as root: ``.venv/bin/python bench/catchup.py [--rounds N]``; exit 0 always.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Run ``argv`` and return its wall time. Exits when it fails."""
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stdout}{proc.stderr}")
    return elapsed


def main() -> int:
    """Set up, measure and print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("dkms") is None:
        print("run as root with dkms installed", file=sys.stderr)
        return 0

    from bench.rebuild import build, port
    from tests.support.modules import FORK_TREE, KERNELS, add_kernel
    from tests.system.test_dkms_real import Dkms, register_stock

    with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
        root = Path(tmp) / "root"
        for kver in KERNELS:
            add_kernel(root, kver)
        shutil.copytree(FORK_TREE, root / "src/fork", symlinks=True)
        port(root / "src/fork")
        for kver in KERNELS:
            build(root, kver)
        dkms = Dkms(root)
        register_stock(root, "575.51.02")  # a stock version DKMS installs (an equal one it would retry forever)
        dkms("add", "nvidia/575.51.02")
        for kver in KERNELS:
            dkms.autoinstall(kver)
        env = {**os.environ}
        python = sys.executable
        from tests.support.env import FwmanEnv

        assert FwmanEnv()("hooks", "install", "--root", str(root)).code == 0
        unit_argv = [str(root / "usr/local/lib/fwman/fwman-catchup")]
        unit_env = {**env, "FWMAN_ROOT": str(root)}
        fwman_argv = [python, "-m", "fwman", "modules", "catchup", "--root", str(root)]
        check = subprocess.run(fwman_argv, capture_output=True, text=True)
        assert check.stdout.strip() == "every kernel has current patched modules", check.stdout + check.stderr
        dkms_argvs = [
            [
                "dkms",
                "autoinstall",
                "-k",
                kver,
                f"--dkmstree={root}/var/lib/dkms",
                f"--sourcetree={root}/usr/src",
                f"--installtree={root}/lib/modules",
                f"--kernelsourcedir={root}/lib/modules/{kver}/build",
                "--no-depmod",
            ]
            for kver in KERNELS
        ]
        fwman_times: list[float] = []
        unit_times: list[float] = []
        dkms_times: list[float] = []
        for _ in range(args.rounds):
            fwman_times.append(timed(fwman_argv, env))
            unit_times.append(timed(unit_argv, unit_env))
            dkms_times.append(sum(timed(argv, env) for argv in dkms_argvs))
        fast = subprocess.run(unit_argv, capture_output=True, text=True, env=unit_env).stdout
        assert "nothing changed" in fast, fast
    f, u, d = statistics.median(fwman_times), statistics.median(unit_times), statistics.median(dkms_times)
    print(f"kernels: {', '.join(KERNELS)}; rounds: {args.rounds} (medians, best in brackets)")
    print(f"fwman modules catchup (all current):   {f * 1000:7.1f} ms  [{min(fwman_times) * 1000:.1f}]")
    print(f"boot unit command (shell fast path):   {u * 1000:7.1f} ms  [{min(unit_times) * 1000:.1f}]")
    print(f"dkms autoinstall, each kernel, summed: {d * 1000:7.1f} ms  [{min(dkms_times) * 1000:.1f}]")
    print(f"python -c pass floor, for reference:   {timed([python, '-c', 'pass'], env) * 1000:7.1f} ms")
    print(f"ratio dkms / boot unit command: {d / u:.1f}x (target >= 10x)")
    print(f"ratio dkms / fwman modules catchup (Python CLI): {d / f:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
