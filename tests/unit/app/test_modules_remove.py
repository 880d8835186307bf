"""`fwman modules remove` on a temp root: fwman's installed modules, stored copy and manifest go, the real depmod
re-indexes, the override goes with the last kernel, and the boot pin to a kernel that loses its modules is undone.

Modules are installed the way a build installs them (fwman's own install actions, real depmod) from small ELF
modules with NVIDIA's .modinfo tags (fixtures/tinymod).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.modules import install_tiny_modules
from tests.support.tools import require_tools

OLD, NEW = "6.1.0-50-amd64", "6.1.0-53-amd64"


def _modules_dep(root: Path, kver: str) -> str:
    return (root / f"lib/modules/{kver}/modules.dep").read_text()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    require_tools("depmod")
    base = tmp_path / "root"
    for kver in (OLD, NEW):
        install_tiny_modules(base, kver)
    return base


def test_one_kernel_then_all(root: Path) -> None:
    run = FwmanEnv()
    dry = run("modules", "remove", "--kernel", OLD, "--dry-run", "--root", str(root))
    assert dry.code == 0 and f"would remove fwman's modules for {OLD}" in dry.stdout
    assert f"would run depmod -a {OLD}" in dry.stdout and "fwman.conf" not in dry.stdout  # NEW keeps them
    assert (root / f"lib/modules/{OLD}/updates/fwman/nvidia.ko").exists()  # a dry run changes nothing

    doc = run("modules", "remove", "--kernel", OLD, "--json", "--root", str(root)).json()
    assert doc["schema"] == "fwman.modules-remove/1" and doc["changed"] is True
    assert f"/lib/modules/{OLD}/updates/fwman" in doc["removed"]
    assert f"/var/lib/fwman/modules/{OLD}.json" in doc["removed"]
    assert not (root / f"lib/modules/{OLD}/updates/fwman").exists()
    assert not (root / f"var/lib/fwman/modules/{OLD}.d").exists()
    assert "updates/fwman" not in _modules_dep(root, OLD)  # the real depmod ran: no name resolves to fwman's
    assert "updates/fwman/nvidia.ko" in _modules_dep(root, NEW)
    assert (root / "etc/depmod.d/fwman.conf").exists()

    again = run("modules", "remove", "--kernel", OLD, "--json", "--root", str(root)).json()
    assert again["changed"] is False and again["actions"] == []

    out = run("modules", "remove", "--all", "--root", str(root))
    assert out.code == 0 and f"removed /lib/modules/{NEW}/updates/fwman" in out.stdout
    assert not (root / "etc/depmod.d/fwman.conf").exists()
    assert "updates/fwman" not in _modules_dep(root, NEW)
    assert run("modules", "remove", "--all", "--root", str(root)).stdout.startswith("nothing to remove")


def test_the_pin_to_a_kernel_that_loses_its_modules_is_undone(root: Path) -> None:
    loader = root / "boot/loader"
    (loader / "entries").mkdir(parents=True)
    (loader / "loader.conf").write_text("timeout 3\n")
    for kver in (OLD, NEW):
        (loader / f"entries/debian-{kver}.conf").write_text(f"title Debian\nversion {kver}\nlinux /vmlinuz-{kver}\n")
    host = LiveHost(str(root))
    from fwman.driver.boot.pin import pin

    pin(host, OLD, NEW, "test: pinned away from the new kernel")
    assert "default debian-6.1.0-50-amd64.conf" in (loader / "loader.conf").read_text()
    r = FwmanEnv()("modules", "remove", "--kernel", OLD, "--root", str(root))
    assert r.code == 0, r.stderr
    assert (loader / "loader.conf").read_text() == "timeout 3\n"  # the owner's file, byte for byte
    assert not (root / "var/lib/fwman/boot-pin.json").exists()
    assert json.loads(FwmanEnv()("modules", "status", "--json", "--root", str(root)).stdout)["pin"] is None


def test_neither_or_both_is_a_usage_error(root: Path) -> None:
    run = FwmanEnv()
    assert run("modules", "remove", "--root", str(root)).code == 2
    r = run("modules", "remove", "--all", "--kernel", OLD, "--root", str(root))
    assert r.code == 2 and "--kernel KVER" in r.stderr
    assert run("modules", "remove", "--kernel", "../etc", "--root", str(root)).code == 2
