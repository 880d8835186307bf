"""`fwman capture` records what scan reads, so a replay gives the live answer; redaction by default."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fixtures.hostgen.materialize import materialize
from fwman.driver import nova_core
from fwman.gpu.inventory import scan_inventory
from fwman.host.live import LiveHost
from fwman.host.snapshot import SnapshotHost
from fwman.platform.cdi import parse_proc_devices
from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.smi import fake_nvidia_smi


def _live(tmp_path: Path) -> tuple[FwmanEnv, Path]:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    fake_nvidia_smi(tmp_path / "bin")
    return FwmanEnv(path_prepend=[tmp_path / "bin"], variables={"PATH": "/usr/bin:/bin"}), root


def test_capture_then_replay_gives_the_live_scan(tmp_path: Path) -> None:
    run, root = _live(tmp_path)
    live = run("--root", str(root), "scan", "--json")
    assert live.code == 0, live.stderr
    cap = run("--root", str(root), "capture", str(tmp_path / "snap"), "--json")
    assert cap.code == 0, cap.stderr
    report = cap.json()
    assert report["gpu_count"] == 4 and report["redacted"] is True
    assert "nvflash" in report["missing_tools"]
    replay = FwmanEnv()("--snapshot", str(tmp_path / "snap"), "scan", "--json")
    assert replay.code == 0, replay.stderr
    live_doc, replay_doc = live.json(), replay.json()
    assert replay_doc["gpus"] == live_doc["gpus"]
    meta = json.loads((tmp_path / "snap/snapshot.json").read_text())
    assert meta["format"] == "fwman-snapshot" and meta["version"] == 1 and meta["redacted"] is True
    argvs = [c["argv"] for c in meta["commands"]]
    assert ["nvidia-smi", "topo", "-p2p", "r"] in argvs and ["nvidia-smi", "--version"] in argvs
    search = f"{tmp_path / 'bin'}:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
    for c in meta["commands"]:  # every command is recorded; a tool that is not installed is recorded as missing
        assert c["missing"] == (shutil.which(c["argv"][0], path=search) is None), c
    assert {c["argv"][0] for c in meta["commands"]} >= {"nvidia-smi", "dkms", "lspci", "uname"}
    # bridges above the GPU and their attributes were recorded
    assert (tmp_path / "snap/files/sys/devices/pci0000:40/0000:40:01.1/max_link_speed").is_file()
    assert (tmp_path / "snap/files/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/config").stat().st_size == 4096


def test_capture_redacts_uuids_and_serials_unless_asked(tmp_path: Path) -> None:
    run, root = _live(tmp_path)
    assert run("--root", str(root), "capture", str(tmp_path / "red")).code == 0
    assert run("--root", str(root), "capture", "--no-redact", str(tmp_path / "raw")).code == 0

    def blob(d: Path) -> str:
        return "".join(p.read_text(errors="replace") for p in d.rglob("*") if p.is_file())

    red, raw = blob(tmp_path / "red"), blob(tmp_path / "raw")
    assert "GPU-5c0f0002-3e21-7a0b-9d4c-1a2b3c4d5e6f" in raw and "<serial>1323020000002</serial>" in raw
    assert "GPU-5c0f0002" not in red and "1323020000002" not in red
    assert "<serial>REDACTED</serial>" in red


def test_capture_refuses_to_overwrite_and_to_replay(tmp_path: Path) -> None:
    run, root = _live(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken/mine.txt").write_text("keep")
    r = run("--root", str(root), "capture", str(tmp_path / "taken"))
    assert r.code == 2 and "not empty" in r.stderr
    assert (tmp_path / "taken/mine.txt").read_text() == "keep"
    r = run("--snapshot", str(EXAMPLE_HOST), "capture", str(tmp_path / "new"))
    assert r.code == 2 and "cannot read from --snapshot" in r.stderr
    assert not (tmp_path / "new").exists()


def test_a_capture_directory_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    run, root = _live(tmp_path)
    (tmp_path / "afile").write_text("a file\n")
    r = run("--root", str(root), "capture", str(tmp_path / "afile/sub"))
    assert r.code == 2, r.stderr
    assert r.stderr.splitlines()[0] == f"fwman: error: DIRECTORY {tmp_path / 'afile/sub'}: cannot make it: File exists"
    assert "report it" not in r.stderr and (tmp_path / "afile").read_text() == "a file\n"


def test_capture_changes_nothing_on_the_host(tmp_path: Path) -> None:
    run, root = _live(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if not p.is_symlink()}
    assert run("--root", str(root), "capture", str(tmp_path / "snap")).code == 0
    after = {p: p.stat().st_mtime_ns for p in root.rglob("*") if not p.is_symlink()}
    assert after == before


def test_a_replay_of_a_capture_gives_the_live_audit_and_metrics(tmp_path: Path) -> None:
    # the module walk asks is_dir of modules.dep: a capture that did not record the answer lost every module row
    run, root = _live(tmp_path)
    assert run("--root", str(root), "capture", str(tmp_path / "snap")).code == 0
    live = run("--root", str(root), "audit", "--offline", "--json")
    replay = FwmanEnv()("--snapshot", str(tmp_path / "snap"), "audit", "--offline", "--json")
    assert (replay.code, replay.stderr) == (live.code, live.stderr)
    live_doc, replay_doc = live.json(), replay.json()
    assert len(live_doc["modules"]) == 5 and live_doc["counts"]["match"] >= 5
    for key in ("modules", "rows", "counts", "unreadable"):
        assert replay_doc[key] == live_doc[key], key
    assert "did not record" not in replay.stdout + replay.stderr
    live_metrics = run("--root", str(root), "metrics", "write", "--stdout")
    replay_metrics = FwmanEnv()("--snapshot", str(tmp_path / "snap"), "metrics", "write", "--stdout")

    def stable(text: str) -> list[str]:
        return [line for line in text.splitlines() if "timestamp" not in line]

    assert stable(replay_metrics.stdout) == stable(live_metrics.stdout)


def test_a_replay_answers_device_numbers_boot_vga_kernel_configs_and_modprobe_files(tmp_path: Path) -> None:
    """doctor, audit, nova_core and the CDI check read /proc/devices, each GPU's boot_vga, /boot/config-* and the
    modprobe directories: a replay of a capture answers each read as the live root does."""
    run, root = _live(tmp_path)
    (root / "proc/devices").write_text(
        "Character devices:\n  1 mem\n195 nvidia-frontend\n236 nvidia-caps\n509 nvidia-uvm\n\nBlock devices:\n  8 sd\n"
    )
    gpu = next((root / "sys/devices").glob("pci*/*/0000:41:00.0"))
    (gpu / "boot_vga").write_text("1\n")  # the firmware's console GPU: doctor names it a P2P risk
    (root / "boot").mkdir()
    (root / "boot/config-6.8.12-4-pve").write_text("CONFIG_PCI=y\n# CONFIG_NOVA_CORE is not set\n")
    (root / "boot/config-7.0.0-3-pve").write_text("CONFIG_PCI=y\nCONFIG_NOVA_CORE=m\n")
    (root / "boot/vmlinuz-7.0.0-3-pve").write_bytes(b"\0" * 64)
    (root / "etc/modprobe.d").mkdir()
    (root / "etc/modprobe.d/nova.conf").write_text("blacklist nova_core\n")
    (root / "etc/modprobe.d/README").write_text("not read by modprobe\n")
    (root / "lib/modprobe.d").mkdir()
    (root / "lib/modprobe.d/aliases.conf").write_text("alias char-major-10-175 agpgart\n")
    assert run("--root", str(root), "capture", str(tmp_path / "snap")).code == 0

    live, replay = LiveHost(str(root)), SnapshotHost(tmp_path / "snap")
    assert parse_proc_devices(replay.read_text("/proc/devices")) == {
        "mem": 1,
        "nvidia-frontend": 195,
        "nvidia-caps": 236,
        "nvidia-uvm": 509,
    }
    assert (
        scan_inventory(replay, use_smi=False).displays
        == scan_inventory(live, use_smi=False).displays
        == {"0000:41:00.0": "sysfs boot_vga 1 (the firmware's console GPU)"}
    )
    for kver in ("6.8.12-4-pve", "7.0.0-3-pve", "6.1.0-99-amd64"):  # the last has no config: none recorded
        assert nova_core.inspect_kernel(replay, kver) == nova_core.inspect_kernel(live, kver)
    assert nova_core.inspect_kernel(replay, "7.0.0-3-pve").present
    assert nova_core.blacklist_files(replay) == nova_core.blacklist_files(live) == ["/etc/modprobe.d/nova.conf"]
    assert replay.read_text("/lib/modprobe.d/aliases.conf") == "alias char-major-10-175 agpgart\n"
    # only what the readers need: the kernel image and a file modprobe does not read are not copied
    assert not (tmp_path / "snap/files/boot/vmlinuz-7.0.0-3-pve").exists()
    assert not (tmp_path / "snap/files/etc/modprobe.d/README").exists()
