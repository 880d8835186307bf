"""`fwman audit` on an Ubuntu-shaped root with Ubuntu's prebuilt NVIDIA module packages (unpacked by the real
dpkg, laid out like the real packages: tests/support/ubuntu.py): the rows, the fix, and the block that clears
half of the fix."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from tests.support import ubuntu
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

KVER = ubuntu.NEW_ABI
PATCHED = "580.105.08"


def _root(tmp: Path) -> Path:
    require_tools("dpkg", "dpkg-deb")
    root = ubuntu.ubuntu_root(tmp / "root")
    pkgs = [
        ubuntu.kernel_image(KVER, ubuntu.NEW_VERSION),
        ubuntu.prebuilt_modules(KVER, ubuntu.NEW_VERSION),
        ubuntu.prebuilt_meta(KVER, ubuntu.NEW_VERSION),
    ]
    ubuntu.unpack_into(root, pkgs, tmp / "work")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(KVER + "\n")
    return root


def _fwman_module(root: Path) -> None:
    """fwman's patched modules in updates/fwman, their depmod overrides and fwman's install manifest."""
    entries = {}
    for name in ubuntu.MODULE_NAMES:
        raw = build_module(nvidia_tags(PATCHED, KVER, name=name.replace("-", "_")))
        target = root / f"lib/modules/{KVER}/updates/fwman/{name}.ko"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
        path = str(target).removeprefix(str(root))
        entries[name] = {"path": path, "sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}
    (root / "etc/depmod.d").mkdir(parents=True)
    overrides = "".join(f"override {n} * updates/fwman\n" for n in ubuntu.MODULE_NAMES)
    (root / "etc/depmod.d/fwman.conf").write_text(overrides)
    doc = {
        "kernel": KVER,
        "fork": "aikitoria",
        "branch": f"{PATCHED}-p2p",
        "commit": "0" * 40,
        "modules": entries,
        "built_at": "2026-11-29T08:00:00+00:00",
    }
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / f"var/lib/fwman/modules/{KVER}.json").write_text(json.dumps(doc))


def _prebuilt_rows(doc: dict) -> list[dict]:
    return [r for r in doc["rows"] if r["component"].startswith("Ubuntu prebuilt NVIDIA modules")]


def test_prebuilt_modules_that_depmod_picks_are_a_mismatch_with_the_fix(tmp_path: Path) -> None:
    root = _root(tmp_path)
    run = FwmanEnv(variables={"PATH": "/nonexistent"})
    r = run("audit", "--json", "--offline", "--root", str(root))
    assert r.code == 4  # a mismatch
    doc = r.json()
    kernel_row, meta_row = _prebuilt_rows(doc)
    assert kernel_row["component"] == f"Ubuntu prebuilt NVIDIA modules ({KVER})" and kernel_row["status"] == "mismatch"
    assert kernel_row["version"] == ubuntu.DRIVER
    assert (
        "depmod picks nvidia-drm.ko, nvidia-modeset.ko, nvidia-peermem.ko, nvidia-uvm.ko, nvidia.ko from "
        f"/lib/modules/{KVER}/kernel/nvidia-580-open for {KVER}: they replace fwman's patched modules"
    ) in kernel_row["detail"]
    assert kernel_row["fix"].startswith(
        f"apt-get purge {ubuntu.META} linux-modules-nvidia-580-open-{KVER}; then `fwman dkms block` (apt pin -1 on "
        "linux-modules-nvidia-*, linux-objects-nvidia-*, linux-signatures-nvidia-*"
    )
    assert (
        meta_row["where"] == ubuntu.META
        and "provides nvidia-dkms-580-open, nvidia-prebuilt-kernel" in meta_row["detail"]
    )
    module = next(r for r in doc["rows"] if r["component"] == f"nvidia.ko ({KVER})")
    assert f"stock, from Ubuntu's linux-modules-nvidia-580-open-{KVER}" in module["detail"]
    assert (
        next(m for m in doc["modules"] if m["name"] == "nvidia")["package"] == f"linux-modules-nvidia-580-open-{KVER}"
    )
    packages = {p["name"]: p for p in doc["prebuilt_modules"]}
    assert packages[f"linux-modules-nvidia-580-open-{KVER}"]["module_dirs"] == [
        f"/lib/modules/{KVER}/kernel/nvidia-580-open"
    ]
    text = run("audit", "--offline", "--root", str(root)).stdout
    assert f"apt-get purge {ubuntu.META}" in text


def test_with_fwman_module_winning_the_row_says_the_risk_and_block_drops_from_the_fix(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _fwman_module(root)
    run = FwmanEnv(variables={"PATH": "/nonexistent"})
    kernel_row, _ = _prebuilt_rows(run("audit", "--json", "--offline", "--root", str(root)).json())
    assert "fwman's build wins for now" in kernel_row["detail"] and kernel_row["status"] == "mismatch"
    assert kernel_row["version"] is None  # depmod does not pick the prebuilt file
    assert "`fwman dkms block`" in kernel_row["fix"]
    require_tools("dkms")
    (root / "var/lib/dkms").mkdir(parents=True)  # dkms itself, pointed at the root, finds nothing registered
    assert FwmanEnv()("dkms", "block", "--root", str(root)).code == 0
    pin = (root / "etc/apt/preferences.d/fwman-nvidia-dkms").read_text()
    assert "Package: linux-modules-nvidia-*\nPin: release *\nPin-Priority: -1\n" in pin
    kernel_row, meta_row = _prebuilt_rows(run("audit", "--json", "--offline", "--root", str(root)).json())
    assert kernel_row["fix"].startswith(f"apt-get purge {ubuntu.META} linux-modules-nvidia-580-open-{KVER};")
    assert "fwman dkms block" not in kernel_row["fix"] and "fwman dkms block" not in meta_row["fix"]


def test_a_debian_host_without_prebuilt_packages_has_no_such_rows(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path / "root")
    doc = FwmanEnv(variables={"PATH": "/nonexistent"})("audit", "--json", "--offline", "--root", str(root)).json()
    assert _prebuilt_rows(doc) == [] and "prebuilt_modules" not in doc


def test_an_unreadable_dpkg_status_is_said_not_hidden(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path / "root")
    (root / "var/lib/dpkg/status").write_text("Package: x\nthis is not dpkg's format\n")
    doc = FwmanEnv(variables={"PATH": "/nonexistent"})("audit", "--json", "--offline", "--root", str(root)).json()
    assert any(u.startswith("dpkg status (dpkg status: line at offset 0x2") for u in doc["unreadable"])


def test_a_prebuilt_file_where_fwman_installed_is_named_in_the_module_row(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _fwman_module(root)
    for ko in (root / f"lib/modules/{KVER}/updates/fwman").iterdir():  # fwman's files gone: depmod finds Ubuntu's
        ko.unlink()
    doc = FwmanEnv(variables={"PATH": "/nonexistent"})("audit", "--json", "--offline", "--root", str(root)).json()
    row = next(r for r in doc["rows"] if r["component"] == f"nvidia.ko ({KVER})")
    assert row["status"] == "mismatch" and row["where"] == f"/lib/modules/{KVER}/kernel/nvidia-580-open/nvidia.ko"
    assert (
        row["fix"]
        == f"Ubuntu's linux-modules-nvidia-580-open-{KVER} replaced fwman's module for {KVER}: see its row below"
    )


def test_audit_of_prebuilt_packages_imports_no_pydantic_and_no_host_actions(tmp_path: Path) -> None:
    # the prebuilt rows are on audit's start path (bench/containers.py): a fresh interpreter reading the packages,
    # their file lists and fwman's apt pin loads neither pydantic nor the actions a `dkms block` plans
    import subprocess
    import sys

    root = _root(tmp_path)
    code = (
        "import sys\nfrom fwman.cli.app import run\n"
        f"rc = run(['--root', {str(root)!r}, 'audit', '--offline', '--json'])\n"
        "print(rc, sorted(m for m in ('pydantic', 'fwman.host.actions') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    doc = json.loads(out.stdout.rsplit("\n", 2)[0])
    assert _prebuilt_rows(doc), "the packages were not read"  # the path under test ran
    assert out.stdout.splitlines()[-1] == "4 []", out.stderr
