"""The pre-flight of one kernel against a full install-and-build of it, and the second pre-flight, side by side.

One real Debian 12 root (tests/support/debroot.py: the story suite's owner layer, fwman's .deb installed, the
story's fork served by git daemon and built once for the owner's first kernel, so the object cache holds the
kernel-independent objects as on any machine that runs fwman), offered the story's update kernel by a kernel
track (tests/support/kerneltracks.py). Measured in that root, in this order:

1. ``fwman modules preflight``: download the kernel's header packages, unpack them, build against them;
2. ``fwman modules preflight`` again: the same kernel, commit and patches (answered from the record), beside
   its floor: ``fwman --version`` (the interpreter and the CLI) and ``apt-get -s dist-upgrade`` alone;
3. the install-and-build it spares: ``apt-get install`` of the kernel's image and headers (fwman's kernel hook
   builds the modules in it, with initramfs and update-grub as on any kernel install), then
   ``fwman modules build --kernel KVER``, what an owner runs by hand.

Target (issue 26): (1) costs no more than (3), and (2) costs nothing next to (1). ``apt-get install`` takes its
packages from the story suite's shared archive cache when they are there; ``apt-get download`` always fetches
from the mirror, so (1) includes a download that (3) may not. Run as root, under the roots lock:
``flock /tmp/fwman-roots.lock .venv/bin/python bench/preflight.py`` (``FWMAN_DEB=dist/fwman_*.deb`` reuses a
built package). Exit 0 always.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    """Measure and print."""
    if os.geteuid() != 0:
        print("run as root (the Debian root needs loop devices and namespaces)", file=sys.stderr)
        return 0

    from tests.support.debpkg import bench_deb
    from tests.support.debroot import DebRoot, install_deb, kernel_packages, owner_layer
    from tests.support.forkrepo import BRANCH, git_daemon, make_fork
    from tests.support.kerneltracks import offer_kernels

    deb = bench_deb()
    if deb is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="fwman-bench-") as tmp:
        tarball, kernels = owner_layer(Path(tmp) / "layer")
        make_fork(Path(tmp) / "forge", [kernels.broken])
        with git_daemon(Path(tmp) / "forge") as daemon:
            root = DebRoot.create(Path(tmp) / "root", tarball)
            try:
                root.sh("apt-get update -q")
                install_deb(root, deb)
                offer_kernels(root, kernels.first, {"story-kernel-update": kernels.update})
                config = root.read_text("/etc/fwman/config.toml")
                root.write_text(
                    "/etc/fwman/config.toml",
                    config + f'\n[forks]\nstory = "{daemon.url()}"\n\n[modules]\nfork = "story"\nbranch = "{BRANCH}"\n',
                )
                root.run("fwman", "modules", "build", "--kernel", kernels.first)

                def timed(script: str) -> float:
                    started = time.monotonic()
                    proc = root.sh(script, check=False, timeout=3600)
                    seconds = time.monotonic() - started
                    if proc.returncode != 0:
                        print(f"`{script}` exit {proc.returncode}:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
                    return seconds

                update = kernels.update
                first = timed("fwman modules preflight")
                second = timed("fwman modules preflight")
                # the floor of a pre-flight that builds nothing: the interpreter and apt's own simulation
                cli = timed("fwman --version >/dev/null")
                sim = timed("apt-get -s -o Debug::NoLocking=1 dist-upgrade >/dev/null")
                install = timed(f"apt-get install -y -q {shlex.join(kernel_packages(update))}")
                build = timed(f"fwman modules build --kernel {update}")
            finally:
                root.close()
    full = install + build
    print(f"cores: {os.cpu_count()}, kernel {update} (Debian's real packages), fork {BRANCH} (stand-in tree)")
    print(f"pre-flight (download + unpack + build, object cache):        {first:7.2f} s")
    print(f"second pre-flight (same kernel, commit, patches):            {second:7.2f} s")
    print(f"  its floor: fwman --version {cli:.2f} s + apt-get -s dist-upgrade {sim:.2f} s = {cli + sim:.2f} s")
    print(f"apt-get install image+headers (the hook builds in it):       {install:7.2f} s")
    print(f"fwman modules build --kernel {update}:                {build:7.2f} s")
    print(f"ratio pre-flight / (install + build): {first / full:.2f}x (target <= 1)")
    print(f"ratio pre-flight / modules build alone: {first / build:.2f}x")
    print(f"ratio second / first pre-flight: {second / first:.3f}x (target: nothing next to a build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
