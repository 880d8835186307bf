"""A driver version move's own time, beyond the module builds and the package installs it runs.

On a Debian root (the story suite's owner layer, fwman's .deb installed with apt) with the stand-in fork served by
git daemon (565.77-p2p built for the first kernel) and the stand-in NVIDIA user-space packages at 565.77 (installed,
held) and 570.86.16 in a local apt repository (tests/support/nvpackages.py), it runs `fwman driver move --to
570.86.16 --json` and prints where the time went, from the move's own `phases`: `builds` (the module build per
kernel: tree, patches, make), `packages` (apt-get download of both versions, apt-get install), `own` (the rest:
listing the fork's branches, reading the host, staging, keeping the previous set, installing the modules with
depmod, the hold, the records) beside `fwman --version` (the floor of any fwman command). Then the rollback's wall
time. Run as root: ``.venv/bin/python bench/move.py``; with ``FWMAN_DEB=path`` the package is not rebuilt. Prints
times; exit 0 always.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
V1, V2 = "565.77", "570.86.16"


def main() -> int:
    """Measure and print."""
    if os.geteuid() != 0:
        print("run as root (the Debian root needs loop devices and namespaces)", file=sys.stderr)
        return 0
    from tests.support.debpkg import bench_deb
    from tests.support.debroot import DebRoot, install_deb, owner_layer
    from tests.support.forkrepo import git_daemon, make_fork
    from tests.support.nvpackages import NAMES, offer_user_space

    deb = bench_deb()
    if deb is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
        tarball, kernels = owner_layer(Path(tmp) / "layer")
        make_fork(Path(tmp) / "forge", [])
        with git_daemon(Path(tmp) / "forge") as daemon:
            root = DebRoot.create(Path(tmp) / "root", tarball)
            try:
                root.sh("apt-get update -q")
                install_deb(root, deb)
                config = root.read_text("/etc/fwman/config.toml")
                root.write_text("/etc/fwman/config.toml", config + f'\n[forks]\nstory = "{daemon.url()}"\n')
                root.sh(f"fwman modules build --kernel {kernels.first} --fork story --branch {V1}-p2p", timeout=3600)
                offer_user_space(root, V1, [V2])
                root.sh("fwman userspace hold")

                def timed(script: str) -> tuple[float, str]:
                    started = time.monotonic()
                    proc = root.sh(script, check=False, timeout=3600)
                    seconds = time.monotonic() - started
                    if proc.returncode != 0:
                        print(f"`{script}` exit {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
                    return seconds, proc.stdout

                floor, _ = timed("fwman --version")
                wall, out = timed(f"fwman driver move --to {V2} --json")
                phases = json.loads(out)["phases"] if out.strip().startswith("{") else {}
                back, _ = timed("fwman driver move --rollback --json")
            finally:
                root.close()
    if not phases:
        return 0
    print(f"move {V1} -> {V2}, 1 kernel ({kernels.first}), {len(NAMES)} packages:")
    print(f"  wall (the command)       {wall:7.2f} s")
    print(f"  inside the move          {phases['total']:7.2f} s")
    print(f"    module builds (make)   {phases['builds']:7.2f} s")
    print(f"    apt (download, install){phases['packages']:7.2f} s")
    print(f"    the move's own         {phases['own']:7.2f} s  ({phases['own'] / phases['total']:.1%} of the move)")
    print(f"  fwman --version (floor)  {floor:7.2f} s")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print(f"rollback (apt install of the kept packages, files back, depmod): {back:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
