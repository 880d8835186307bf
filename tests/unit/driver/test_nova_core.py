"""nova_core (kernel 7.0's in-tree NVIDIA driver) takes the GPU before the patched nvidia.ko can probe it: a kernel
that has it is not safe to boot until fwman's modprobe file blacklists it and that kernel's initramfs carries the
blacklist (issue 40; aikitoria/open-gpu-kernel-modules issue 24, beclab/Olares PR 3963).

The host is the bundled 4x3090 rig materialised into a temp root, with two kernels that have fwman's (stand-in)
modules; the newest one ships a stand-in ``nova_core.ko`` where the kernel tree puts it
(``kernel/drivers/gpu/nova-core/``) and GPU 0000:01:00.0's sysfs ``driver`` link points at nova-core's PCI driver
(``NovaCore``). The initramfs generator is a stand-in on PATH that packs the root's modprobe files and that
kernel's nova_core module into a real newc archive with the real cpio.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.driver import nova_core
from fwman.host.live import LiveHost
from tests.support.boot import install_safe_modules
from tests.support.env import FwmanEnv
from tests.support.settings_rig import initramfs_generator

OLD, NEW = "6.1.0-50-amd64", "7.0.0-3-amd64"
FILE = "etc/modprobe.d/fwman-nvidia-p2p.conf"
GPU = "0000:01:00.0"
PATH = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def _generator(tmp_path: Path, root: Path) -> Path:
    """A stand-in update-initramfs that also packs KVER's nova_core module (tests/support/settings_rig.py)."""
    return initramfs_generator(tmp_path, root, also=f"lib/modules/$k/{nova_core.MODULE_SUBDIR}")


def _regenerate(bindir: Path, kver: str) -> None:
    subprocess.run([str(bindir / "update-initramfs"), "-u", "-k", kver], check=True, env={**os.environ, **PATH})


def _root(tmp_path: Path) -> Path:
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import build_rig, rig_4x3090
    from fixtures.tinymod.elfgen import build_module, nvidia_tags

    build_rig(rig_4x3090(), note="nova_core", driver_flavour="open").write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    (root / "etc/kernel/proxmox-boot-uuids").unlink()  # not a Proxmox boot: the newest kernel boots next
    host = LiveHost(str(root), env=PATH)
    for kver in (OLD, NEW):
        install_safe_modules(host, root, kver)
    nova = root / f"lib/modules/{NEW}/{nova_core.MODULE_SUBDIR}"
    nova.mkdir(parents=True)
    (nova / "nova_core.ko").write_bytes(build_module(nvidia_tags("7.0.0", NEW, name="nova_core")))
    (root / "boot").mkdir(exist_ok=True)
    driver = root / "sys/bus/pci/devices" / GPU / "driver"
    driver.unlink()
    driver.symlink_to("../../../../bus/pci/drivers/NovaCore")
    return root


def test_a_kernel_whose_nova_core_takes_the_gpu_is_unsafe_until_fwman_blacklists_it(tmp_path: Path) -> None:
    root = _root(tmp_path)
    bindir = _generator(tmp_path, root)
    _regenerate(bindir, NEW)  # the image the kernel came with
    (tmp_path / "argv").unlink()
    env = FwmanEnv(path_prepend=[bindir], variables=PATH)

    status = env("modules", "status", "--json", "--root", str(root)).json()
    rows = {r["kernel"]: r for r in status["kernels"]}
    assert rows[OLD]["safe_to_boot"] is True and rows[OLD]["nova_core"] is None
    new = rows[NEW]
    assert new["safe_to_boot"] is False
    assert new["why"].startswith(f"{NEW} has nova_core (/lib/modules/{NEW}/kernel/drivers/gpu/nova-core/nova_core.ko)")
    assert new["nova_core"]["blacklisted_by"] == [] and new["nova_core"]["built_in"] is False
    assert status["nova_core"] == {"module_loaded": False, "bound_to": [GPU]}
    text = env("modules", "status", "--root", str(root)).stdout
    assert f"nova_core holds {GPU} now: nvidia.ko cannot probe it" in text

    check = env("modules", "check-boot", "--root", str(root))
    assert check.code == 4, check.stdout + check.stderr
    assert "nova_core" in check.stdout + check.stderr

    dry = env("driver", "settings", "--apply", "--dry-run", "--root", str(root))
    assert dry.code == 0, dry.stderr
    assert "would write /etc/modprobe.d/fwman-nvidia-p2p.conf" in dry.stdout
    assert f"would run update-initramfs -u -k {NEW}" in dry.stdout
    assert not (root / FILE).exists()

    done = env("driver", "settings", "--apply", "--json", "--root", str(root))
    assert done.code == 0, done.stderr
    doc = done.json()
    assert doc["changed"] is True
    assert [b["module"] for b in doc["blacklist"]] == ["nova_core"]
    assert doc["nova_core_kernels"] == [
        {"kernel": NEW, "config": None, "module": f"/lib/modules/{NEW}/{nova_core.MODULE_SUBDIR}/nova_core.ko",
         "built_in": False}
    ]  # fmt: skip
    lines = (root / FILE).read_text().splitlines()
    assert lines[-1] == "blacklist nova_core"
    assert "aikitoria/open-gpu-kernel-modules issue 24" in lines[-2]
    assert (tmp_path / "argv").read_text().split() == ["-u", "-k", NEW]  # that kernel's initramfs, and only it

    after = env("modules", "status", "--json", "--root", str(root)).json()
    new = {r["kernel"]: r for r in after["kernels"]}[NEW]
    assert new["safe_to_boot"] is True, new["why"]
    assert new["nova_core"]["blacklisted_by"] == ["/etc/modprobe.d/fwman-nvidia-p2p.conf"]
    assert new["nova_core"]["problem"] is None
    assert env("modules", "check-boot", "--root", str(root)).code == 0


def _nova_findings(env: FwmanEnv, root: Path) -> list[tuple[str, str, str]]:
    doc = env("doctor", "--json", "--root", str(root)).json()
    return [(f["id"], f["severity"], f["message"]) for s in doc["steps"] for f in s["findings"]
            if f["id"].startswith("driver.nova_core")]  # fmt: skip


def test_doctor_names_the_gpu_nova_core_holds_and_the_kernel_it_would_take_until_the_blacklist(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    env = FwmanEnv(path_prepend=[_generator(tmp_path, root)], variables=PATH)
    before = _nova_findings(env, root)
    assert [(i, sev) for i, sev, _ in before] == [("driver.nova_core.bound", "block"), ("driver.nova_core", "warn")]
    assert before[0][2] == f"nova_core holds {GPU}: nvidia.ko cannot probe it"
    assert before[1][2].startswith(f"{NEW} has nova_core")
    assert env("driver", "settings", "--apply", "--root", str(root)).code == 0
    after = _nova_findings(env, root)
    # the blacklist is written; the GPU stays held until the reboot, which a temp root cannot do
    assert after[1] == ("driver.nova_core", "ok", f"{NEW} has nova_core, blacklisted by /{FILE}")


def test_an_initramfs_that_carries_nova_core_without_the_blacklist_keeps_the_kernel_unsafe(tmp_path: Path) -> None:
    root = _root(tmp_path)
    bindir = _generator(tmp_path, root)
    env = FwmanEnv(path_prepend=[bindir], variables=PATH)
    assert env("driver", "settings", "--apply", "--root", str(root)).code == 0
    # the blacklist is on disk, but an image made without it (an older one put back) still loads nova_core
    (root / FILE).rename(tmp_path / "saved.conf")
    _regenerate(bindir, NEW)
    (tmp_path / "saved.conf").rename(root / FILE)
    new = {r["kernel"]: r for r in env("modules", "status", "--json", "--root", str(root)).json()["kernels"]}[NEW]
    assert new["safe_to_boot"] is False
    assert "initramfs carries" in new["why"] and "nova_core.ko without a blacklist" in new["why"]
    assert env("driver", "settings", "--apply", "--root", str(root)).code == 0  # regenerates that image
    new = {r["kernel"]: r for r in env("modules", "status", "--json", "--root", str(root)).json()["kernels"]}[NEW]
    assert new["safe_to_boot"] is True, new["why"]


def test_a_built_in_nova_core_stays_unsafe_whatever_the_blacklist(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path), env=PATH)
    install_safe_modules(host, tmp_path, NEW)
    (tmp_path / "boot").mkdir()
    (tmp_path / f"boot/config-{NEW}").write_text("CONFIG_RUST=y\nCONFIG_NOVA_CORE=y\n")
    (tmp_path / "etc/modprobe.d").mkdir(parents=True)
    (tmp_path / "etc/modprobe.d/owner.conf").write_text("blacklist nova-core\n")
    kernel = nova_core.inspect_kernel(host, NEW)
    assert kernel.built_in and kernel.config_path == f"/boot/config-{NEW}"
    assert nova_core.blacklist_files(host) == ["/etc/modprobe.d/owner.conf"]
    problem = nova_core.problem(kernel, nova_core.blacklist_files(host))
    assert problem is not None and "built into" in problem and "CONFIG_NOVA_CORE=y" in problem
    (tmp_path / f"boot/config-{NEW}").write_text("CONFIG_NOVA_CORE=m\n")  # a module: the owner's line suffices
    assert nova_core.problem(nova_core.inspect_kernel(host, NEW), nova_core.blacklist_files(host)) is None
    (tmp_path / f"boot/config-{NEW}").write_text("# CONFIG_NOVA_CORE is not set\n")
    assert not nova_core.inspect_kernel(host, NEW).present


@pytest.mark.parametrize(
    ("text", "modules"),
    [("blacklist nova_core\n", {"nova_core"}), ("blacklist nova-core # the GPU\n", {"nova_core"}),
     ("# blacklist nova_core\n", set()), ("install nova_core /bin/false\n", {"nova_core"}),
     ("install nova_core /sbin/modprobe --ignore-install nova_core\n", set()),
     ("blacklist \\\nnouveau\n", {"nouveau"}), ("options nvidia NVreg_X=1\n", set())],
)  # fmt: skip
def test_blacklist_lines(text: str, modules: set[str]) -> None:
    assert nova_core.parse_blacklist(text) == modules


def test_config_symbol_and_proc_modules() -> None:
    assert nova_core.parse_config_symbol("CONFIG_NOVA_CORE=m\n") == "m"
    assert nova_core.parse_config_symbol("CONFIG_NOVA_CORE=m\n# CONFIG_NOVA_CORE is not set\n") is None
    assert nova_core.parse_config_symbol("CONFIG_NOVA_CORE_X=y\n") is None
    assert nova_core.loaded_from_proc_modules("nvidia 1 0 - Live 0x0\nnova_core 77824 0 - Live 0x0\n")
    assert not nova_core.loaded_from_proc_modules("nova_core_x 1 0 - Live 0x0\n")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_the_parsers_take_any_text(text: str) -> None:
    assert isinstance(nova_core.parse_blacklist(text), set)
    value = nova_core.parse_config_symbol(text)
    assert value is None or isinstance(value, str)
    assert isinstance(nova_core.loaded_from_proc_modules(text), bool)
    members = [
        ("lib/modules/k/kernel/drivers/gpu/nova-core/nova_core.ko", b""),
        ("etc/modprobe.d/x.conf", text.encode()),
    ]
    found = nova_core.initramfs_problem("k", members)
    assert (found is None) == ("nova_core" in nova_core.parse_blacklist(text))
