"""Doctor's P2P prerequisites: the module options, which GPU combinations peer (each answer cited), and the
prefetchable bridge window above each card, on the bundled 4x3090 rig and a constructed 2x RTX 5090 host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwman.driver.peering import FAILS, OK, UNKNOWN, peering
from fwman.gpu.sysfs import parse_resource
from fwman.gpu.windows import prefetch_window
from tests.support.env import HOSTS, FwmanEnv

RIG = HOSTS / "rig-4x3090"


def _steps(stdout: str) -> dict[str, list[dict[str, object]]]:
    return {s["id"]: s["findings"] for s in json.loads(stdout)["steps"]}


def test_the_bundled_rig_shows_the_matrix_row_the_settings_and_the_windows() -> None:
    r = FwmanEnv()("--snapshot", str(RIG), "doctor", "--json")
    steps = _steps(r.stdout)
    [matrix] = steps["p2p.matrix"]
    assert matrix["severity"] == "ok" and "3090 x4" in str(matrix["message"])
    assert "github.com/aikitoria/open-gpu-kernel-modules README" in str(matrix["message"])
    [silent] = steps["driver.settings"]
    assert silent["severity"] == "info" and str(silent["message"]).startswith("ampere: no NVreg option")
    windows = steps["pcie.window"]
    assert [w["severity"] for w in windows] == ["warn", "warn", "ok", "ok"]
    assert "prefetchable window 512 MiB, card BAR1 256 MiB (offers up to 32 GiB)" in str(windows[0]["message"])
    assert "pci=realloc" in str(windows[0]["fix"]) and "ReBarUEFI issue 119" in str(windows[0]["fix"])


def test_a_2x5090_host_shows_the_two_options_with_their_source_and_a_window_that_limits(tmp_path: Path) -> None:
    from fixtures.hostgen.materialize import materialize
    from fixtures.hostgen.rig import GpuSpec, build_rig

    specs = [
        GpuSpec(bus=b, subsystem_device=0, subsystem_vendor=0x10DE, vbios="00.00.00.00.00", device=0x2B85,
                name="NVIDIA GeForce RTX 5090", bar1_size=256 << 20, rebar_sizes=[256 << 20, 32 << 30],
                prefetch_window=512 << 20, iommu_group=g)
        for b, g in ((0x01, 20), (0x21, 40))
    ]  # fmt: skip
    build_rig(specs, note="2x5090", driver_flavour="open").write(tmp_path / "snap")
    root = materialize(tmp_path / "snap", tmp_path / "root")
    (root / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "proc/driver/nvidia/params").write_text("EnableResizableBar: 0\nRMForceStaticBar1: 1\n")
    r = FwmanEnv()("--root", str(root), "doctor", "--json")
    steps = _steps(r.stdout)
    [matrix] = steps["p2p.matrix"]
    assert matrix["severity"] == "ok" and "5090 x2: P2P with the fork over BAR1" in str(matrix["message"])
    assert "tinygrad/open-gpu-kernel-modules issue 44" in str(matrix["message"])
    settings = {str(f["message"]).split(":")[0]: f for f in steps["driver.settings"]}
    assert settings["NVreg_RMForceStaticBar1=1"]["severity"] == "ok"
    peer = settings["NVreg_PeerMappingOverride=1"]
    assert peer["severity"] == "warn" and "not an option of the loaded module" in str(peer["message"])
    assert "github.com/noonghunna/club-3090 issue 873, PR 875" in str(peer["message"])
    assert all(w["severity"] == "warn" for w in steps["pcie.window"])


@pytest.mark.parametrize(
    ("names", "state", "source"),
    [
        (["NVIDIA GeForce RTX 3080", "NVIDIA GeForce RTX 4090"], FAILS, "issue 40"),
        (["RTX 5060 Ti", "RTX 5070 Ti", "RTX 5090"], FAILS, "issue 13"),
        (["RTX 4090", "RTX 4060 Ti"], FAILS, "tinygrad/open-gpu-kernel-modules issue 28"),
        (["RTX 5090", "NVIDIA RTX PRO 6000 Blackwell"], OK, "README"),
        (["RTX 4090", "RTX 4090"], OK, "README"),
        (["NVIDIA A10", "RTX 5090"], UNKNOWN, None),
    ],
)
def test_the_peering_matrix_cites_its_sources(names: list[str], state: str, source: str | None) -> None:
    p = peering(list(names))
    assert p.state == state
    assert (p.source is None) if source is None else (source in (p.source or ""))


def test_the_prefetchable_window_is_found_by_its_flags_not_its_line() -> None:
    text = (RIG / "files/sys/devices/pci0000:00/0000:00:01.1/resource").read_text()
    window = prefetch_window(parse_resource(text))
    assert window is not None and window.size == 512 << 20 and window.index == 15
    # the same window on a kernel without SR-IOV lines (6 lines earlier)
    lines = text.splitlines()
    short = prefetch_window(parse_resource("\n".join(lines[:7] + lines[13:])))
    assert short is not None and short.size == 512 << 20 and short.index == 9
    # a device's own prefetchable BAR (line 1) is not a window
    assert prefetch_window(parse_resource("0x0 0x0 0x0\n0x1000 0x1fff 0x14220c\n")) is None
