"""Issue 23 row 6: removing and purging the package gives back every boot-loader change fwman made, and purge
says what it leaves.

The package's own prerm and postrm (debian/) run under a temp root through ``DPKG_ROOT`` (what dpkg passes to
chrootless maintainer scripts): prerm's `fwman modules unpin` runs the real fwman (a root-local
``/usr/lib/fwman/bin/python`` that is this test's interpreter), GRUB's environment block is made and read with
the real grub-editenv, depmod is the real one. Nothing outside the temp directory is touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwman.driver.boot.pin import pin
from fwman.host.live import LiveHost
from tests.support.boot import update_grub
from tests.support.env import REPO
from tests.support.modules import install_tiny_modules
from tests.support.tools import require_tools

pytestmark = pytest.mark.system

OLD, NEW = "6.1.0-50-amd64", "6.1.0-53-amd64"


def _grubenv(root: Path) -> str:
    return subprocess.run(
        ["grub-editenv", str(root / "boot/grub/grubenv"), "list"], capture_output=True, text=True, check=True
    ).stdout


def _script(name: str, action: str, root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DPKG_ROOT": str(root), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        ["sh", str(REPO / "debian" / name), action], capture_output=True, text=True, env=env, timeout=300
    )


def _pinned_root(tmp_path: Path, with_fwman: bool, grub_default: str = "0") -> Path:
    require_tools("grub-editenv", "grub-reboot", "grub-set-default", "depmod", "python3")
    root = tmp_path / "root"
    for kver in (OLD, NEW):
        install_tiny_modules(root, kver)
        (root / "boot").mkdir(exist_ok=True)
        (root / f"boot/vmlinuz-{kver}").write_text("kernel image\n")
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text(f"GRUB_DEFAULT={grub_default}\n")
    update_grub(str(root))
    subprocess.run(["grub-editenv", str(root / "boot/grub/grubenv"), "create"], check=True)
    pin(LiveHost(str(root)), OLD, NEW, "test: the new kernel's build failed")
    assert "next_entry=" in _grubenv(root) or "saved_entry=" in _grubenv(root)
    (root / "var/lib/fwman/backups").mkdir(parents=True)
    (root / "var/lib/fwman/backups/card0.rom").write_bytes(b"\x55\xaa")
    if with_fwman:
        python = root / "usr/lib/fwman/bin/python"
        python.parent.mkdir(parents=True)
        python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
    return root


def test_remove_undoes_the_pin_and_purge_names_what_stays(tmp_path: Path) -> None:
    root = _pinned_root(tmp_path, with_fwman=True)
    upgrade = _script("fwman.prerm", "upgrade", root)
    assert upgrade.returncode == 0 and "next_entry=" in _grubenv(root)  # an upgrade keeps the pin

    removal = _script("fwman.prerm", "remove", root)
    assert removal.returncode == 0, removal.stdout + removal.stderr
    assert f"boot pin to {OLD} removed" in removal.stdout
    assert "next_entry" not in _grubenv(root)
    assert not (root / "var/lib/fwman/boot-pin.json").exists()

    purge = _script("fwman.postrm", "purge", root)
    assert purge.returncode == 0, purge.stdout + purge.stderr
    said = purge.stdout
    for kver in (OLD, NEW):
        assert f"the patched NVIDIA modules for {kver} stay in {root}/lib/modules/{kver}/updates/fwman" in said
        assert (root / f"lib/modules/{kver}/updates/fwman/nvidia.ko").exists()
    assert "fwman modules remove --all" in said and "depmod -a" in said
    assert "backups stay" in said and (root / "var/lib/fwman/backups/card0.rom").exists()
    assert sorted(p.name for p in (root / "var/lib/fwman").iterdir()) == ["backups"]
    assert not (root / "etc/depmod.d/fwman.conf").exists()
    assert "next_entry" not in _grubenv(root) and "saved_entry" not in _grubenv(root)


@pytest.mark.parametrize("grub_default", ["0", "saved"])
def test_purge_undoes_a_grub_pin_prerm_could_not(tmp_path: Path, grub_default: str) -> None:
    """fwman's interpreter was already gone at prerm (a broken install): the purge itself puts GRUB back."""
    root = _pinned_root(tmp_path, with_fwman=False, grub_default=grub_default)
    removal = _script("fwman.prerm", "remove", root)
    assert removal.returncode == 0 and "could not undo fwman's boot pin" in removal.stdout
    purge = _script("fwman.postrm", "purge", root)
    assert purge.returncode == 0, purge.stdout + purge.stderr
    assert f"undid fwman's GRUB boot pin to {OLD}" in purge.stdout
    env_block = _grubenv(root)
    assert "next_entry" not in env_block and "saved_entry" not in env_block
