"""The installed kernel hook under the real run-parts, the boot-time catch-up, and the unit under systemd-analyze.

A kernel without headers is marked pending and the hook exits 0; once the headers exist, `fwman modules catchup`
builds it; with everything current, catch-up takes its fast path. The hook runs after `dkms` and before
`initramfs-tools` (real run-parts ordering, recorded by neighbour hooks).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.modules import (
    KERNEL_OK,
    SOURCE,
    add_kernel,
    give_headers,
    object_cache,  # noqa: F401  (fixture)
    put_source,
    require_build_env,
    run_fwman,
    seed_objects,
)
from tests.support.tools import require_tools

pytestmark = pytest.mark.system


def _run_parts(root: Path, directory: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["run-parts", "--exit-on-error", *(f"--arg={a}" for a in args), str(root / directory.lstrip("/"))],
        capture_output=True,
        text=True,
        env={**os.environ, "FWMAN_ROOT": str(root)},
        timeout=900,
    )


def _neighbour(root: Path, directory: str, name: str, log: Path) -> None:
    hook = root / directory.lstrip("/") / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho {name} >> {log}\n")
    hook.chmod(0o755)


def test_pending_without_headers_then_catchup_builds(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK)
    require_tools("run-parts")
    root = tmp_path / "root"
    add_kernel(root, KERNEL_OK, headers=False)
    put_source(root)
    seed_objects(root, object_cache)
    (root / "etc/fwman").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True)  # apt: its boot check too
    (root / "etc/fwman/config.toml").write_text(f'[modules]\nsource = "{SOURCE}"\n')
    order = tmp_path / "order.log"
    for name in ("dkms", "initramfs-tools", "zz-update-grub"):
        _neighbour(root, "/etc/kernel/postinst.d", name, order)

    code, out, err = run_fwman(root, "hooks", "install")
    assert code == 0, out + err
    hook = root / "etc/kernel/postinst.d/fwman"
    assert os.access(hook, os.X_OK) and (root / "etc/kernel/header_postinst.d/fwman").read_bytes() == hook.read_bytes()
    unit_link = root / "etc/systemd/system/multi-user.target.wants/fwman-catchup.service"
    assert os.readlink(unit_link) == "/etc/systemd/system/fwman-catchup.service"
    assert run_fwman(root, "hooks", "install")[1].strip() == "hook and service already installed and current"
    status = json.loads(run_fwman(root, "hooks", "status", "--json")[1])
    assert status["installed"] is True
    in_order = ["dkms", "fwman", "initramfs-tools", "zz-update-grub", "zzz-fwman"]  # the final check: after the loader
    assert status["order"]["/etc/kernel/postinst.d"] == in_order

    # the image is configured before its headers: pending, exit 0, the kernel install goes on
    proc = _run_parts(root, "/etc/kernel/postinst.d", KERNEL_OK, f"/boot/vmlinuz-{KERNEL_OK}")
    assert proc.returncode == 0, proc.stderr
    assert order.read_text().split() == ["dkms", "initramfs-tools", "zz-update-grub"]
    assert "marked pending" in proc.stderr and "the kernel install goes on" in proc.stderr, proc.stderr
    marker = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.pending").read_text())
    assert marker["reason"] == "no headers"
    rows = json.loads(run_fwman(root, "modules", "status", "--json")[1])["kernels"]
    assert rows[0]["pending"] == "no headers" and rows[0]["headers"] is False

    # the headers arrive later (Proxmox never runs header_postinst.d): the boot-time catch-up builds
    give_headers(root, KERNEL_OK)
    code, out, err = run_fwman(root, "modules", "catchup")
    assert code == 0, out + err
    assert f"built and installed for {KERNEL_OK}" in err
    assert (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").exists()
    assert not (root / f"var/lib/fwman/modules/{KERNEL_OK}.pending").exists()
    code, out, err = run_fwman(root, "modules", "catchup")
    assert code == 0 and out.strip() == "every kernel has current patched modules" and err == ""

    # the header hook for an up-to-date kernel changes nothing
    mtime = (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").stat().st_mtime_ns
    proc = _run_parts(root, "/etc/kernel/header_postinst.d", KERNEL_OK)
    assert proc.returncode == 0 and "already current" in proc.stderr
    assert (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").stat().st_mtime_ns == mtime

    code, out, _ = run_fwman(root, "hooks", "remove")
    assert code == 0 and not hook.exists() and not unit_link.is_symlink()


def test_strict_mode_fails_the_kernel_install(tmp_path: Path) -> None:
    require_tools("run-parts")
    if os.geteuid() != 0:
        pytest.skip("needs root")
    root = tmp_path / "root"
    add_kernel(root, KERNEL_OK, headers=False)
    (root / "etc/fwman").mkdir(parents=True, exist_ok=True)
    (root / "etc/fwman/config.toml").write_text(f'[modules]\nsource = "{SOURCE}"\nstrict = true\n')
    assert run_fwman(root, "hooks", "install")[0] == 0
    proc = _run_parts(root, "/etc/kernel/postinst.d", KERNEL_OK, f"/boot/vmlinuz-{KERNEL_OK}")
    assert proc.returncode != 0
    assert "strict = true" in proc.stderr


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    require_tools("systemd-analyze")
    root = tmp_path / "root"
    root.mkdir()
    assert run_fwman(root, "hooks", "install")[0] == 0
    installed = (root / "etc/systemd/system/fwman-catchup.service").read_text()
    script = "/usr/local/lib/fwman/fwman-catchup"
    assert f"ExecStart={script}\n" in installed
    # systemd checks that ExecStart is executable on this machine: point it at the copy in the temp root
    unit = tmp_path / "fwman-catchup.service"
    unit.write_text(installed.replace(f"ExecStart={script}", f"ExecStart={root}{script}"))
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "fwman-catchup.service" not in proc.stderr  # no complaint about our unit
