"""CDI freshness (issue 40): a spec whose device major numbers no longer match the running kernel's leaves
nvidia-smi working while cuInit fails (NemoClaw PR 4733; cuInit 999 with ``major: 510`` for /dev/nvidia-uvm where
the kernel gave 509: NVIDIA/nvidia-container-toolkit issue 1934). The audit names such a spec with the exact
regeneration command, or nvidia-container-toolkit's refresh unit where it is installed.

Temp roots with a spec in /etc/cdi in the shape ``nvidia-ctk cdi generate`` writes (tests/support/engines.py,
with ``major`` on its device nodes) and a ``/proc/devices``.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.host.live import LiveHost
from fwman.platform import cdi
from fwman.platform.containers import read_cdi_specs
from fwman.reports.audit.cdi_rows import cdi_spec_rows
from tests.support.engines import DRIVER, nvidia_cdi_spec

PROC_DEVICES = "Character devices:\n  1 mem\n195 nvidia\n195 nvidiactl\n509 nvidia-uvm\n\nBlock devices:\n  8 sd\n"


def _root(tmp_path: Path, uvm_major: int, refresh: bool = False) -> Path:
    spec = nvidia_cdi_spec(DRIVER).replace(
        "    deviceNodes:\n    - path: /dev/nvidia0\n",
        "    deviceNodes:\n    - path: /dev/nvidia0\n      major: 195\n"
        f"    - path: /dev/nvidia-uvm\n      major: {uvm_major}\n",
    )
    (tmp_path / "etc/cdi").mkdir(parents=True)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(spec)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/devices").write_text(PROC_DEVICES)
    for lib in ("libcuda.so", "libnvidia-ml.so"):
        path = tmp_path / f"usr/lib/x86_64-linux-gnu/{lib}.{DRIVER}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    for node in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        (tmp_path / "dev").mkdir(exist_ok=True)
        (tmp_path / "dev" / node).write_bytes(b"")
    if refresh:
        unit = tmp_path / "usr/lib/systemd/system/nvidia-cdi-refresh.path"
        unit.parent.mkdir(parents=True)
        unit.write_text("[Path]\nPathChanged=/lib/modules/%v/modules.dep\n")
    return tmp_path


def test_a_spec_with_a_stale_uvm_major_is_named_with_the_regeneration_command(tmp_path: Path) -> None:
    [spec] = read_cdi_specs(LiveHost(str(_root(tmp_path, 510))), [])
    assert spec.stale_majors == [("/dev/nvidia-uvm", 510, 509)]
    [row] = cdi_spec_rows([spec], DRIVER)
    assert row.status == "mismatch"
    assert row.detail is not None and row.detail.startswith(
        "device numbers drifted: /dev/nvidia-uvm major 510 (now 509): cuInit fails in its containers"
    )
    assert row.fix == "write it again for the installed driver: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"


def test_the_refresh_unit_is_named_where_it_is_installed(tmp_path: Path) -> None:
    [spec] = read_cdi_specs(LiveHost(str(_root(tmp_path, 510, refresh=True))), [])
    [row] = cdi_spec_rows([spec], DRIVER)
    assert row.fix is not None and row.fix.endswith(
        "(or `systemctl start nvidia-cdi-refresh.service`, which nvidia-container-toolkit installs)"
    )


def test_a_spec_whose_majors_match_is_current(tmp_path: Path) -> None:
    [spec] = read_cdi_specs(LiveHost(str(_root(tmp_path, 509))), [])
    assert spec.stale_majors == []
    [row] = cdi_spec_rows([spec], DRIVER)
    assert row.status == "match" and row.fix is None


def test_proc_devices_and_node_names() -> None:
    assert cdi.parse_proc_devices(PROC_DEVICES) == {"mem": 1, "nvidia": 195, "nvidiactl": 195, "nvidia-uvm": 509}
    assert [cdi.device_name(n) for n in ("/dev/nvidia-uvm-tools", "/dev/nvidia3", "/dev/nvidiactl",
                                         "/dev/nvidia-caps/nvidia-cap1", "/dev/dri/card1")] == [
        "nvidia-uvm", "nvidia", "nvidia", "nvidia-caps", None,
    ]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_proc_devices_text_parses(text: str) -> None:
    out = cdi.parse_proc_devices(text)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in out.items())


def test_after_a_module_install_the_stale_spec_is_said_with_its_command(tmp_path: Path) -> None:
    """What ``modules build`` adds to its output after an install (the same rows as the audit's)."""
    from fwman.app.modules.build import stale_cdi_specs

    root = _root(tmp_path, 510)
    assert stale_cdi_specs(LiveHost(str(root))) == [
        "CDI spec /etc/cdi/nvidia.yaml: device numbers drifted: /dev/nvidia-uvm major 510 (now 509): cuInit fails "
        "in its containers; cdiVersion 0.5.0; devices nvidia.com/gpu=all; write it again for the installed driver: "
        "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
    ]
    (root / "etc/cdi/nvidia.yaml").write_text(
        (root / "etc/cdi/nvidia.yaml").read_text().replace("major: 510", "major: 509")
    )
    assert stale_cdi_specs(LiveHost(str(root))) == []
