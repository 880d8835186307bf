"""`fwman scan` on the example host, on the recorded real host, and live on a temp root without nvidia-smi."""

from __future__ import annotations

from pathlib import Path

from fixtures.hostgen.materialize import materialize
from tests.support.env import EXAMPLE_HOST, HOSTS, FwmanEnv

GIB, MIB = 1 << 30, 1 << 20
H200 = HOSTS / "h200-1gpu"


def test_scan_json_of_the_example_host(fwman: FwmanEnv) -> None:
    r = fwman("--snapshot", str(EXAMPLE_HOST), "scan", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.scan/2"
    assert doc["nvidia_smi"] == "ok"
    gpus = {g["bus_id"]: g for g in doc["gpus"]}
    assert list(gpus) == ["0000:01:00.0", "0000:21:00.0", "0000:41:00.0", "0000:61:00.0"]
    launch = gpus["0000:41:00.0"]
    assert launch == {
        "bus_id": "0000:41:00.0",
        "vendor_id": "10de",
        "device_id": "2204",
        "subsystem_vendor_id": "3842",
        "subsystem_device_id": "3987",
        "name": "NVIDIA GeForce RTX 3090",
        "vbios_version": "94.02.26.48.15",
        "board_id": None,  # the VBIOS board ID needs nvflash; nvidia-smi's is location-derived
        "driver_board_id": "0x4100",
        "vram_bytes": 24 * GIB,
        "bar1_bytes": 256 * MIB,
        "bar1_covers_vram": False,
        "rebar_sizes_bytes": [],
        "max_rebar_bytes": None,
        "link": {
            "current_speed_gts": 16.0,
            "max_speed_gts": 16.0,
            "current_width": 16,
            "max_width": 16,
            "downtrained": False,
        },
        "power_limit_w": 420.0,
        "default_power_limit_w": 420.0,
        "driver": "nvidia",
        "driver_version": "570.86.16",
        "driver_flavour": "proprietary",
        "numa_node": 0,
        "iommu_group": 60,
        "unreadable": [],
    }
    rebar = gpus["0000:01:00.0"]
    assert rebar["subsystem_device_id"] == "3982" and rebar["vbios_version"] == "94.02.42.C0.05"
    assert rebar["max_rebar_bytes"] == 32 * GIB and rebar["rebar_sizes_bytes"][0] == 64 * MIB
    assert rebar["bar1_bytes"] == 256 * MIB and rebar["bar1_covers_vram"] is False


def test_scan_text_of_the_example_host(fwman: FwmanEnv) -> None:
    r = fwman("scan", "--snapshot", str(EXAMPLE_HOST))  # global options work after the command too
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:4] == ["BUS", "ID", "SUBSYSTEM", "NAME"]
    row = next(line for line in lines if line.startswith("41:00.0"))
    for cell in (
        "10de:2204",
        "3842:3987",
        "94.02.26.48.15",
        "24 GiB",
        "256 MiB (small)",
        "none",
        "Gen4 x16/Gen4 x16",
        "420/420 W",
    ):
        assert cell in row
    assert "up to 32 GiB" in next(line for line in lines if line.startswith("01:00.0"))
    assert "driver: 570.86.16 (proprietary)" in r.stdout


def test_scan_of_the_recorded_real_host(fwman: FwmanEnv) -> None:
    """What the real H200 machine reported when it was captured."""
    r = fwman("--snapshot", str(H200), "scan", "--json")
    assert r.code == 0, r.stderr
    (gpu,) = r.json()["gpus"]
    assert (gpu["bus_id"], gpu["vendor_id"], gpu["device_id"]) == ("0000:00:06.0", "10de", "2335")
    assert (gpu["subsystem_vendor_id"], gpu["subsystem_device_id"]) == ("10de", "18bf")
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["vbios_version"] == "96.00.A5.00.1A"
    assert gpu["driver_version"] == "580.159.04" and gpu["driver_flavour"] == "open"
    assert gpu["bar1_bytes"] == 256 * GIB and gpu["bar1_covers_vram"] is True
    assert gpu["vram_bytes"] is not None and 140 * GIB < gpu["vram_bytes"] < 141 * GIB
    assert gpu["link"]["max_speed_gts"] == 32.0 and gpu["link"]["current_width"] == 16
    assert gpu["rebar_sizes_bytes"] == []  # the VM's config space does not show the capability
    assert gpu["iommu_group"] is None  # no IOMMU groups inside that VM
    assert gpu["power_limit_w"] == 700.0


def test_scan_without_nvidia_smi_still_works_from_sysfs(tmp_path: Path) -> None:
    """Driver unloaded (as during a flash): no nvidia-smi, no /proc/driver/nvidia."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "proc/driver/nvidia/version").unlink()
    run = FwmanEnv(variables={"PATH": str(tmp_path / "empty-bin")})
    r = run("--root", str(root), "scan", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["nvidia_smi"] == "nvidia-smi not installed"
    g = doc["gpus"][2]
    assert (g["bus_id"], g["subsystem_device_id"], g["bar1_bytes"]) == ("0000:41:00.0", "3987", 256 * MIB)
    assert g["vbios_version"] == "94.02.26.48.15"  # from /proc/driver/nvidia/gpus/*/information
    assert g["vram_bytes"] is None and g["power_limit_w"] is None and g["driver_version"] is None
    assert "nvidia-smi (name, board ID, VRAM, power limits)" in g["unreadable"]
    text = run("--root", str(root), "scan")
    assert "note: nvidia-smi not installed" in text.stdout


def test_scan_flags_a_downtrained_link(tmp_path: Path) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / "sys/devices/pci0000:20/0000:20:01.1/0000:21:00.0/current_link_width").write_text("8\n")
    r = FwmanEnv(variables={"PATH": str(tmp_path)})("--root", str(root), "scan")
    assert r.code == 0
    assert "warning: 0000:21:00.0 link trained below its maximum (Gen4 x8/Gen4 x16 DOWNTRAINED)" in r.stdout


def test_scan_with_no_nvidia_gpu_exits_5(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    r = FwmanEnv()("--root", str(tmp_path), "scan")
    assert r.code == 5
    assert r.stderr.startswith("fwman: error: no NVIDIA GPU found")
    assert "hint:" in r.stderr
