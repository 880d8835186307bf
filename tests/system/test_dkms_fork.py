"""The owner's P2P fork registered in DKMS (issue 40): told from NVIDIA's stock module by its tree, named as such
by ``dkms status``, and left registered by ``fwman dkms block`` while the stock module is removed.

The host is the bundled 4x3090 rig materialised into a temp root; the real dkms (3.x) acts on it
(--dkmstree/--sourcetree/--installtree); the modules are only registered (``dkms add``), nothing is built. The
stock module is the stand-in of fixtures/kmod-tree/stock-dkms; the fork is the stand-in fork tree
(fixtures/kmod-tree/fork: its version.mk at the root, kernel-open/ beside it) with a dkms.conf and a
dkms-setup.sh at its root, as the fork's 2026 trees are reported to ship (field-late-2026.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from fwman.driver import dkms
from fwman.driver.dkms import DkmsEntry
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.modules import FORK_TREE, STOCK_DKMS
from tests.support.tools import require_tools

STOCK_V, FORK_V = "575.51.02", "570.86.16"


def _dkms(root: Path, *args: str) -> str:
    argv = ["dkms", *args, f"--dkmstree={root}/var/lib/dkms", f"--sourcetree={root}/usr/src",
            f"--installtree={root}/lib/modules", "--no-depmod"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _root(tmp_path: Path) -> Path:
    """The bundled 4x3090 rig (doctor needs GPUs) with the stock module and the fork registered."""
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import build_rig, rig_4x3090

    build_rig(rig_4x3090(), note="dkms fork", driver_flavour="open").write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    (root / "var/lib/dkms").mkdir(parents=True)
    (root / "lib/modules/6.1.0-50-amd64").mkdir(parents=True)
    stock = root / f"usr/src/nvidia-{STOCK_V}"
    shutil.copytree(STOCK_DKMS, stock)
    conf = stock / "dkms.conf"
    conf.write_text(conf.read_text().replace("570.86.16", STOCK_V))
    fork = root / f"usr/src/nvidia-{FORK_V}"
    shutil.copytree(FORK_TREE, fork, symlinks=True)
    (fork / "dkms.conf").write_text(
        f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{FORK_V}"\nBUILT_MODULE_NAME[0]="nvidia"\n'
        'DEST_MODULE_LOCATION[0]="/kernel/drivers/video"\nAUTOINSTALL="yes"\n'
    )
    (fork / "dkms-setup.sh").write_text("#!/bin/sh\n# the fork's DKMS set-up (stand-in)\n")
    _dkms(root, "add", f"nvidia/{STOCK_V}")
    _dkms(root, "add", f"nvidia/{FORK_V}")
    return root


def test_the_fork_in_dkms_is_named_and_left_alone_by_the_block(tmp_path: Path) -> None:
    require_tools("dkms")
    root = _root(tmp_path)
    env = FwmanEnv()
    status = env("dkms", "status", "--json", "--root", str(root)).json()
    kinds = {(m["module"], m["version"]): (m["kind"], m["tree_version"]) for m in status["modules"]}
    assert kinds == {("nvidia", STOCK_V): ("stock", None), ("nvidia", FORK_V): ("fork", FORK_V)}
    [fork] = [m for m in status["modules"] if m["version"] == FORK_V]
    assert any("dkms-setup.sh" in e for e in fork["fork_evidence"])
    text = env("dkms", "status", "--root", str(root)).stdout
    assert f"nvidia/{FORK_V} is the P2P fork" in text and "`fwman dkms block` leaves it registered" in text

    doctor = env("doctor", "--json", "--root", str(root)).json()
    found = [(f["id"], f["severity"], f["message"]) for step in doctor["steps"] for f in step["findings"]
             if f["id"].startswith("driver.dkms")]  # fmt: skip
    assert [(i, sev) for i, sev, _ in found] == [("driver.dkms.fork", "info"), ("driver.dkms", "warn")]
    assert found[0][2].startswith(f"nvidia/{FORK_V} registered with DKMS is the P2P fork")
    assert found[1][2].startswith(f"NVIDIA's stock module nvidia/{STOCK_V} is registered with DKMS")

    # audit reads DKMS's tree (no dkms run): the install link dkms makes says which kernel it is installed for
    (root / f"var/lib/dkms/nvidia/{FORK_V}/6.1.0-50-amd64/x86_64/module").mkdir(parents=True)
    (root / "var/lib/dkms/nvidia/kernel-6.1.0-50-amd64-x86_64").symlink_to(f"{FORK_V}/6.1.0-50-amd64/x86_64")
    audit = env("audit", "--offline", "--json", "--root", str(root)).json()
    rows = {r["component"]: r for r in audit["rows"] if r["component"].startswith("DKMS ")}
    assert rows[f"DKMS nvidia/{STOCK_V}"]["status"] == "mismatch"
    assert "registered, installed for no kernel" in rows[f"DKMS nvidia/{STOCK_V}"]["detail"]
    fork_row = rows[f"DKMS nvidia/{FORK_V}"]
    assert fork_row["status"] == "info" and "installed for 6.1.0-50-amd64" in fork_row["detail"]
    assert fork_row["fix"].startswith("let fwman build 6.1.0-50-amd64")
    assert dkms.read_tree(LiveHost(str(root))) == [
        DkmsEntry("nvidia", FORK_V, "6.1.0-50-amd64", "x86_64", "installed"),
        DkmsEntry("nvidia", STOCK_V, None, None, "added"),
    ]

    dry = env("dkms", "block", "--dry-run", "--root", str(root))
    assert f"dkms remove nvidia/{STOCK_V} --all" in dry.stdout
    assert f"nvidia/{FORK_V} --all" not in dry.stdout
    assert f"leave nvidia/{FORK_V} registered (the P2P fork)" in dry.stdout

    done = env("dkms", "block", "--root", str(root))
    assert done.code == 0, done.stdout + done.stderr
    assert f"left alone: nvidia/{FORK_V}, the P2P fork" in done.stdout
    listing = _dkms(root, "status")
    assert f"nvidia/{FORK_V}: added" in listing and STOCK_V not in listing
    record = json.loads((root / "var/lib/fwman/dkms-block.json").read_text())
    assert record["removed"] == [{"module": "nvidia", "version": STOCK_V}]
    # blocked again: the fork is still not touched, and nothing else is left to do
    again = env("dkms", "block", "--root", str(root))
    assert again.code == 0 and f"nvidia/{FORK_V}: added" in _dkms(root, "status")


def test_the_srcversion_of_fwmans_build_names_a_fork_whatever_its_tree(tmp_path: Path) -> None:
    """A DKMS build whose nvidia.ko has the srcversion of fwman's build for that kernel is the same patched
    source, even in a tree without the fork's marks."""
    from fixtures.tinymod.elfgen import build_module, nvidia_tags
    from tests.support.boot import install_safe_modules

    kver = "6.1.0-50-amd64"
    host = LiveHost(str(tmp_path), env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    install_safe_modules(host, tmp_path, kver)  # fwman's nvidia.ko: srcversion 0123456789ABCDEF0123456
    built = tmp_path / f"var/lib/dkms/nvidia/{FORK_V}/{kver}/x86_64/module"
    built.mkdir(parents=True)
    (tmp_path / f"usr/src/nvidia-{FORK_V}").mkdir(parents=True)
    entry = DkmsEntry("nvidia", FORK_V, kver, "x86_64", "installed")
    (built / "nvidia.ko").write_bytes(build_module(nvidia_tags(FORK_V, kver, srcversion="FFFFFFFFFFFFFFFFFFFFFFF")))
    assert dkms.classify(host, "nvidia", FORK_V, [entry]).kind == dkms.STOCK
    (built / "nvidia.ko").write_bytes(build_module(nvidia_tags(FORK_V, kver)))
    found = dkms.classify(host, "nvidia", FORK_V, [entry])
    assert found.kind == dkms.FORK and "srcversion of fwman's build" in found.evidence[0]


def test_nvidias_installer_template_is_not_a_usable_dkms_conf() -> None:
    # the shape of kernel-open/dkms.conf in the March 2025 tree (aikitoria/open-gpu-kernel-modules 570.86.16-p2p)
    template = 'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="__VERSION_STRING"\nAUTOINSTALL="yes"\n__DKMS_MODULES\n'
    assert dkms.is_template(template)
    real = (STOCK_DKMS / "dkms.conf").read_text()
    assert not dkms.is_template(real)
