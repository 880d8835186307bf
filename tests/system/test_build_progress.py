"""What a module build prints without a terminal (the kernel hook, the boot service): real make, real headers.

The stand-in fork tree prints what the real fork prints (utils.mk's quiet lines, the Kbuild's ``CONFTEST:`` lines,
kbuild's own), and make runs with ``-j2`` so that targets of different phases interleave as they do in the field.
A FixedClock set to now keeps the elapsed times at 0s (the object cache stamps its files with the clock, so it
must not lie about the date), which makes every line exact.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fwman.core.clock import FixedClock
from tests.support.env import FwmanEnv
from tests.support.modules import (
    FORK_TREE,
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    add_kernel,
    build_root,
    require_build_env,
    run_fwman,
)

#: the line of the stand-in's three-argument pci_resize_resource() call, where KERNEL_BAD's build fails
CALL_LINE = next(
    n
    for n, line in enumerate((FORK_TREE / "kernel-open/nvidia/nv-pci.c").read_text().splitlines(), 1)
    if "r = pci_resize_resource(" in line
)

pytestmark = pytest.mark.system


def _make_lines(err: str, root: Path) -> list[str]:
    """Return the lines from ``running make`` on, with the temp root written as ROOT."""
    lines = err.replace(str(root), "ROOT").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("running make"))
    return lines[start:]


def test_a_build_without_a_terminal_says_each_phase_once_and_where_it_failed(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK, KERNEL_BAD)
    root = build_root(tmp_path, (KERNEL_OK,))
    env = FwmanEnv(clock=FixedClock(at=datetime.now(UTC)), tty=False)
    ok = KERNEL_OK
    code, out, err = run_fwman(root, "modules", "build", "-j", "2", "--kernel", ok, "--source", SOURCE, env=env)
    assert code == 0, out + err
    lines = _make_lines(err, root)
    assert lines[:-1] == [
        f"running make -j2 --output-sync=target modules KERNEL_UNAME={ok} "
        f"SYSSRC=ROOT/usr/src/linux-headers-{ok.removesuffix('-amd64')}-common SYSOUT=ROOT/usr/src/linux-headers-{ok}",
        f"{ok}: kernel-independent objects started, 0s in",
        f"{ok}: kernel-independent objects done: 31 objects in 0s",  # 28 C, 1 C++, the two LD
        f"{ok}: conftest started, 0s in",
        f"{ok}: conftest done: 3 tests in 0s",
        f"{ok}: kernel-open started, 0s in",
        f"{ok}: kernel-open done: 11 objects in 0s",
        f"{ok}: linking started, 0s in",
        f"{ok}: linking done: 16 objects in 0s",
        f"{ok}: make finished in 0s",
        "kernel-independent objects stored in the object cache",
    ]
    assert lines[-1].startswith(f"removed the build tree /var/cache/fwman/build/{ok} ("), lines[-1]
    log = (root / f"var/log/fwman/build-{ok}.log").read_text()
    assert log.endswith("\n# make exited 0 after 0s\n")

    # the headers of the second kernel arrive: the hook builds from the remembered source and fails in nv-pci.c
    bad = KERNEL_BAD
    add_kernel(root, bad)
    code, out, err = run_fwman(root, "modules", "hook", "--kernel", bad, "--origin", "header_postinst", env=env)
    assert code == 0, out + err  # a hook never fails the kernel install
    lines = _make_lines(err, root)
    assert lines[1:5] == [
        f"{bad}: conftest started, 0s in",  # the kernel-independent objects came from the object cache
        f"{bad}: conftest done: 3 tests in 0s",
        f"{bad}: kernel-open started, 0s in",
        f"{bad}: make FAILED in the kernel-open phase after 0s (exit status 2)",
    ]
    assert "  failed in:     the kernel-open phase" in lines
    assert f"  failing file:  kernel-open/nvidia/nv-pci.c:{CALL_LINE}" in lines
    assert not any("expected" in line for line in err.splitlines())

    # retried by hand: the failed build's log promises nothing, and the lines stay the same facts
    code, out, err = run_fwman(root, "modules", "build", "-j", "2", "--kernel", bad, "--force", env=env)
    assert code == 4, out + err
    assert _make_lines(err, root)[1:5] == lines[1:5]
    assert f"build for {bad} FAILED in the kernel-open phase: kernel-open/nvidia/nv-pci.c:{CALL_LINE}" in err
