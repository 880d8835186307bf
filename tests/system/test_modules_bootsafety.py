"""Issue 10: a kernel update that breaks the patched driver must not become the next boot.

Two real Debian kernels: the stand-in fork builds for 6.1.0-50 and fails for 6.1.0-53 (pci_resize_resource got
a fourth argument). In a temp root with a Debian-style grub.cfg (GRUB_DEFAULT=saved) and a GRUB environment
block made by the real grub-editenv, the real run-parts runs the installed kernel hook for 6.1.0-53: the build
fails, the hook exits 0, and the boot default is pinned to 6.1.0-50 with grub-set-default; check-boot tells the
truth before and after, unpin undoes it, and a later successful build releases the pin by itself.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.boot import UUID, grub_cfg
from tests.support.env import FwmanEnv
from tests.support.modules import (
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    add_kernel,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)
from tests.support.tools import require_tools

pytestmark = pytest.mark.system


def grubenv(root: Path) -> dict[str, str]:
    """Return the GRUB environment block of ``root`` as the real grub-editenv lists it."""
    out = subprocess.run(
        ["grub-editenv", str(root / "boot/grub/grubenv"), "list"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def recording_logger(tmp: Path) -> Path:
    """Return a directory with a `logger` that appends its arguments to tmp/logger.log (what would be journaled)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    script = bin_dir / "logger"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {tmp / "logger.log"}\n')
    script.chmod(0o755)
    return bin_dir


def test_a_kernel_whose_build_fails_is_not_booted(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK, KERNEL_BAD)
    require_tools("grub-editenv", "grub-set-default", "run-parts")
    bin_dir = recording_logger(tmp_path)
    env = FwmanEnv(path_prepend=[bin_dir])
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").write_text(grub_cfg([KERNEL_OK]))
    subprocess.run(["grub-editenv", str(root / "boot/grub/grubenv"), "create"], check=True)

    assert run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE, env=env)[0] == 0
    code, out, _ = run_fwman(root, "modules", "check-boot", env=env)
    assert code == 0 and f"next boot: {KERNEL_OK}" in out
    assert run_fwman(root, "hooks", "install", env=env)[0] == 0

    # the kernel update: 6.1.0-53 (with headers) is installed and update-grub puts it first
    add_kernel(root, KERNEL_BAD)
    (root / "boot/grub/grub.cfg").write_text(grub_cfg([KERNEL_BAD, KERNEL_OK]))
    code, out, err = run_fwman(root, "modules", "check-boot", env=env)
    assert code == 4, out + err
    assert f"next boot: {KERNEL_BAD}" in out and "NOT SAFE" in out

    # what the kernel package runs: run-parts over the installed hook directory
    proc = subprocess.run(
        [
            "run-parts",
            "--exit-on-error",
            f"--arg={KERNEL_BAD}",
            f"--arg=/boot/vmlinuz-{KERNEL_BAD}",
            str(root / "etc/kernel/postinst.d"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "FWMAN_ROOT": str(root), "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""  # hooks keep stdout clean (exec >&2)
    said = proc.stderr
    assert "failing file:  kernel-open/nvidia/nv-pci.c" in said
    assert "too few arguments to function" in said
    assert f"boot default pinned to {KERNEL_OK} (grub-saved)" in said

    env_block = grubenv(root)
    assert env_block["saved_entry"] == f"gnulinux-advanced-{UUID}>gnulinux-{KERNEL_OK}-advanced-{UUID}"
    code, out, _ = run_fwman(root, "modules", "check-boot", env=env)
    assert code == 0 and f"next boot: {KERNEL_OK}" in out
    motd = (root / "etc/motd.d/fwman").read_text()
    assert KERNEL_BAD in motd and "NO working patched NVIDIA modules" in motd and "fwman modules unpin" in motd
    # a temp root is another machine's tree: its warnings go to its motd, never to this machine's journal
    assert not (tmp_path / "logger.log").exists()
    status = json.loads(run_fwman(root, "modules", "status", "--json", env=env)[1])
    assert status["pin"]["kernel"] == KERNEL_OK and status["pin"]["avoided"] == KERNEL_BAD
    rows = {r["kernel"]: r for r in status["kernels"]}
    assert rows[KERNEL_BAD]["safe_to_boot"] is False and "nv-pci.c" in rows[KERNEL_BAD]["why"]
    assert rows[KERNEL_OK]["next_boot"] is True

    # unpin restores GRUB's own default, and check-boot says so
    code, out, _ = run_fwman(root, "modules", "unpin", env=env)
    assert code == 0 and "NO working patched modules" in out
    assert "saved_entry" not in grubenv(root)
    assert not (root / "etc/motd.d/fwman").exists()
    assert run_fwman(root, "modules", "check-boot", env=env)[0] == 4

    # the boot-time catch-up skips the known failure (same source, same kernel) and pins again
    code, out, err = run_fwman(root, "modules", "catchup", env=env)
    assert code == 0, out + err
    assert "not retried" in err
    assert grubenv(root)["saved_entry"].endswith(f"gnulinux-{KERNEL_OK}-advanced-{UUID}")

    # a fixed source (the fork ported nv-pci.c to the 4-argument call) builds, and the pin is released
    nv_pci = root / SOURCE.lstrip("/") / "kernel-open/nvidia/nv-pci.c"
    nv_pci.write_text(
        nv_pci.read_text().replace(
            "pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size)",
            "pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size, 0)",
        )
    )
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_BAD, env=env)
    assert code == 0, out + err
    assert "boot pin to" in err and "released" in err
    assert "saved_entry" not in grubenv(root)
    code, out, _ = run_fwman(root, "modules", "check-boot", env=env)
    assert code == 0 and f"next boot: {KERNEL_BAD}" in out
