"""The real dkms (3.x) with a registered stand-in of NVIDIA's stock `nvidia` module, in a temp root.

dkms is pointed at the root with --dkmstree/--sourcetree/--installtree, told --no-depmod (its depmod would run
on this machine's /lib/modules; the tests run depmod -b on the root instead), and given a signing key path in
the root. Debian's dkms never moves an existing module aside; other distributions' dkms does (the Arch/Fedora
code path, which dkms also takes when ADDON_MODULES_DIR is set: here ADDON_MODULES_DIR=updates/dkms keeps the
Debian install location). That path is the one that silently takes the patched module away.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.modules import (
    KERNEL_OK,
    SOURCE,
    STOCK_DKMS,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)
from tests.support.tools import require_tools

pytestmark = pytest.mark.system


class Dkms:
    """The real dkms acting on a temp root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "var/lib/dkms").mkdir(parents=True, exist_ok=True)

    def __call__(self, *args: str, moves_originals: bool = False, check: bool = True) -> str:
        r = self.root
        env = {
            **os.environ,
            "mok_signing_key": str(r / "var/lib/dkms/mok.key"),
            "mok_certificate": str(r / "var/lib/dkms/mok.pub"),
        }
        if moves_originals:
            env["ADDON_MODULES_DIR"] = "updates/dkms"
        argv = [
            "dkms",
            *args,
            f"--dkmstree={r}/var/lib/dkms",
            f"--sourcetree={r}/usr/src",
            f"--installtree={r}/lib/modules",
            "--no-depmod",
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    def autoinstall(self, kver: str, moves_originals: bool = False) -> str:
        """Run `dkms autoinstall` for ``kver`` (what the dkms kernel hook and dkms.service run), then depmod."""
        out = self(
            "autoinstall",
            "-k",
            kver,
            f"--kernelsourcedir={self.root}/lib/modules/{kver}/build",
            moves_originals=moves_originals,
        )
        depmod(self.root, kver)
        return out


def depmod(root: Path, kver: str) -> None:
    subprocess.run(["depmod", "-a", "-b", str(root), "-C", str(root / "etc/depmod.d"), kver], check=True)


def register_stock(root: Path, version: str) -> None:
    """Put the stock stand-in's source at /usr/src/nvidia-VERSION (as a driver package would)."""
    dest = root / f"usr/src/nvidia-{version}"
    shutil.copytree(STOCK_DKMS, dest)
    for name in ("dkms.conf", "nvidia.c"):
        path = dest / name
        path.write_text(path.read_text().replace("570.86.16", version))


def resolved(root: Path, kver: str) -> str:
    out = subprocess.run(
        ["modinfo", "-b", str(root), "-k", kver, "-F", "filename", "nvidia"], capture_output=True, text=True
    ).stdout.strip()
    return out.removeprefix(str(root))


def test_dkms_replaces_unless_blocked_and_fwman_repairs(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK)
    require_tools("dkms")
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)[0] == 0
    ours = f"/lib/modules/{KERNEL_OK}/updates/fwman/nvidia.ko"
    dkms = Dkms(root)

    # a newer stock driver (a package upgrade) on the code path that moves originals aside: ours is gone
    register_stock(root, "570.86.16")
    dkms("add", "nvidia/570.86.16")
    register_stock(root, "575.51.02")
    dkms("add", "nvidia/575.51.02")
    out = dkms.autoinstall(KERNEL_OK, moves_originals=True)
    assert not (root / ours.lstrip("/")).exists(), out
    moved = list((root / "var/lib/dkms/nvidia/original_module").rglob("nvidia.ko"))
    assert moved, "dkms should have moved fwman's nvidia.ko into original_module"
    assert resolved(root, KERNEL_OK) == f"/lib/modules/{KERNEL_OK}/updates/dkms/nvidia.ko"
    code, out, _ = run_fwman(root, "modules", "check-boot")
    assert code == 4 and "updates/dkms/nvidia.ko" in out
    status = json.loads(run_fwman(root, "dkms", "status", "--json")[1])
    states = {(m["module"], m["version"], m["kernel"]): m["state"] for m in status["modules"]}
    assert states[("nvidia", "575.51.02", KERNEL_OK)].startswith("installed")
    assert status["blocked"] is False
    rows = json.loads(run_fwman(root, "modules", "status", "--json")[1])["kernels"]
    assert rows[0]["dkms_conflict"] and rows[0]["safe_to_boot"] is False

    # the boot-time catch-up notices and puts fwman's modules back (from its store, no rebuild)
    code, out, err = run_fwman(root, "modules", "catchup")
    assert code == 0, out + err
    assert "DKMS or a package replaced it" in err and "back in place and verified" in err
    assert resolved(root, KERNEL_OK) == ours
    assert run_fwman(root, "modules", "check-boot")[0] == 0

    # blocked: nothing registered any more, apt pinned, autoinstall has nothing to build
    code, out, err = run_fwman(root, "dkms", "block")
    assert code == 0, out + err
    assert "dkms remove nvidia/575.51.02 --all" in out and "dkms remove nvidia/570.86.16 --all" in out
    assert "nvidia" not in dkms("status")
    pin = (root / "etc/apt/preferences.d/fwman-nvidia-dkms").read_text()
    assert "Package: *nvidia*dkms*" in pin and "Pin-Priority: -1" in pin
    dkms.autoinstall(KERNEL_OK, moves_originals=True)
    assert resolved(root, KERNEL_OK) == ours
    assert run_fwman(root, "dkms", "block")[1].strip() == "DKMS already blocked: nothing to do"

    # replaced anyway (someone re-adds and force-installs): the kernel hook detects and repairs it
    dkms("add", "nvidia/575.51.02")
    dkms("install", "--force", "-k", KERNEL_OK, "nvidia/575.51.02", moves_originals=True)
    depmod(root, KERNEL_OK)
    assert resolved(root, KERNEL_OK) != ours
    code, out, err = run_fwman(root, "modules", "hook", "--kernel", KERNEL_OK, "--origin", "postinst")
    assert code == 0, out + err
    assert "WARNING" in err and "reinstalling fwman's modules" in err
    assert resolved(root, KERNEL_OK) == ours

    # unblock undoes block: the pin goes, the removed modules are registered again
    code, out, err = run_fwman(root, "dkms", "unblock")
    assert code == 0, out + err
    assert not (root / "etc/apt/preferences.d/fwman-nvidia-dkms").exists()
    listing = dkms("status")
    assert "nvidia/570.86.16: added" in listing and "nvidia/575.51.02" in listing
    assert json.loads(run_fwman(root, "dkms", "status", "--json")[1])["blocked"] is False


def test_debian_dkms_does_not_replace_an_equal_version(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """Debian's dkms 3.x refuses to install a module whose version string equals the installed one."""
    require_build_env(KERNEL_OK)
    require_tools("dkms")
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)[0] == 0
    dkms = Dkms(root)
    register_stock(root, "570.86.16")
    dkms("add", "nvidia/570.86.16")
    out = dkms.autoinstall(KERNEL_OK)
    assert "exactly matches what is already found" in out
    assert resolved(root, KERNEL_OK) == f"/lib/modules/{KERNEL_OK}/updates/fwman/nvidia.ko"
    assert run_fwman(root, "modules", "check-boot")[0] == 0
