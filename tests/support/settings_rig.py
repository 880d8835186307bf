"""Roots for `fwman driver settings`: the bundled 4x3090 rig or a constructed 2x RTX 5090 host materialised into a
temp root, the loaded module's parameters, and a stand-in update-initramfs that packs the root's modprobe files
into a real newc archive with the real cpio, as mkinitramfs does (its lines 406-407)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

#: the kernel release of the constructed hosts (their /boot images are initrd.img-KVER)
KVER = "6.8.12-4-pve"
H200_PARAMS = Path(__file__).resolve().parents[2] / "fixtures/hosts/h200-1gpu/files/proc/driver/nvidia/params"


def settings_host(tmp_path: Path, gpus: str) -> Path:
    """Return a root under ``tmp_path`` of the host ``gpus`` names: "4x3090" (the bundled rig's GPUs) or "2x5090"
    (constructed: two RTX 5090, 10de:2b85, placeholder subsystem and VBIOS)."""
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import GpuSpec, build_rig, rig_4x3090

    if gpus == "4x3090":
        specs = rig_4x3090()
    else:
        specs = [
            GpuSpec(bus=b, subsystem_device=0, subsystem_vendor=0x10DE, vbios="00.00.00.00.00", device=0x2B85,
                    name="NVIDIA GeForce RTX 5090", bar1_size=32 << 30, iommu_group=g)
            for b, g in ((0x01, 20), (0x21, 40))
        ]  # fmt: skip
    build_rig(specs, note=f"driver settings {gpus}", driver_flavour="open").write(tmp_path / "snap")
    return materialize(tmp_path / "snap", tmp_path / "root")


def initramfs_generator(tmp_path: Path, root: Path, also: str = "") -> Path:
    """Return a directory holding a stand-in update-initramfs (``-u -k KVER``): it appends its arguments to
    ``tmp_path/argv`` and packs ROOT/etc/modprobe.d/*.conf (and the files below ROOT/``also``, where ``$k`` is
    KVER) into ROOT/boot/initrd.img-KVER (newc), as mkinitramfs copies the modprobe files and the modules it adds.
    Skips the test without cpio."""
    if shutil.which("cpio") is None:
        pytest.skip("cpio is not installed")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    extra = f'; find "{also}" -type f 2>/dev/null' if also else ""
    (bindir / "update-initramfs").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path / "argv"}\n'
        'k="$3"\n'
        f"cd {root} && mkdir -p boot && {{ ls etc/modprobe.d/*.conf 2>/dev/null{extra}; }} | cpio -o -H newc --quiet "
        '> "boot/initrd.img-$k"\n'
    )
    (bindir / "update-initramfs").chmod(0o755)
    return bindir


def write_params(root: Path, **values: str) -> None:
    """Write the loaded module's /proc/driver/nvidia/params under ``root``: the H200's recorded file plus
    ``values`` (name: value lines)."""
    text = H200_PARAMS.read_text() + "".join(f"{k}: {v}\n" for k, v in values.items())
    (root / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "proc/driver/nvidia/params").write_text(text)
