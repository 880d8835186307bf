"""The metrics file under Prometheus's own checker (`promtool check metrics`, Debian package prometheus), and the
timer and service under `systemd-analyze verify`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.env import EXAMPLE_HOST, FwmanEnv
from tests.support.modules import KERNEL_OK, SOURCE, build_root, object_cache  # noqa: F401
from tests.support.tools import require_tools, tool_path

pytestmark = pytest.mark.system


def _promtool(text: str) -> subprocess.CompletedProcess[str]:
    promtool = tool_path("promtool") or "promtool"  # the Makefile unpacks it without the server
    return subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)


def test_promtool_accepts_the_metrics_of_the_recorded_host(fwman: FwmanEnv) -> None:
    require_tools("promtool", package="prometheus (only its promtool: make system-deps)")
    result = fwman("metrics", "write", "--stdout", "--snapshot", str(EXAMPLE_HOST))
    assert result.code == 0
    checked = _promtool(result.stdout)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the checker is not a rubber stamp: a counter without _total and a missing HELP are reported
    bad = _promtool("# TYPE fwman_flashes counter\nfwman_flashes 3\n")
    assert bad.returncode != 0 and "fwman_flashes" in bad.stdout + bad.stderr


def test_promtool_accepts_the_metrics_of_a_root_with_built_modules(
    tmp_path: Path,
    fwman: FwmanEnv,
    object_cache: Path,  # noqa: F811
) -> None:
    require_tools("promtool", package="prometheus (only its promtool: make system-deps)")
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert fwman("modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE, "--root", str(root)).code == 0
    assert fwman("metrics", "write", "--root", str(root)).code == 0
    text = (root / "var/lib/prometheus/node-exporter/fwman.prom").read_text()
    assert f'fwman_kernel_safe_to_boot{{kernel="{KERNEL_OK}"}} 1\n' in text
    assert f'fwman_kernel_modules_installed{{kernel="{KERNEL_OK}"}} 1\n' in text
    checked = _promtool(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_timer_and_service_verify(tmp_path: Path, fwman: FwmanEnv) -> None:
    require_tools("systemd-analyze")
    assert fwman("metrics", "install", "--root", str(tmp_path)).code == 0
    units = tmp_path / "etc/systemd/system"
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(units / "fwman-metrics.service"), str(units / "fwman-metrics.timer")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_accepts_the_preflight_series(tmp_path: Path, fwman: FwmanEnv) -> None:
    """The last pre-flight's gauges (a kernel that builds, one that does not and is held) pass promtool."""
    require_tools("promtool", package="prometheus (only its promtool: make system-deps)")
    from fwman.driver import kernel_hold
    from fwman.driver import preflight as pf

    state = pf.State(last_at="2026-12-01T20:00:00+00:00", last_kernels=["6.1.0-56-amd64", "6.1.0-57-amd64"])
    state.kernels["6.1.0-56-amd64"] = pf.KernelVerdict("6.1.0-56-amd64", pf.SAFE, "builds")
    state.kernels["6.1.0-57-amd64"] = pf.KernelVerdict("6.1.0-57-amd64", pf.BROKEN, "does not build")
    held = kernel_hold.HoldRecord({"6.1.0-57-amd64": kernel_hold.HeldKernel("6.1.0-57-amd64", {}, "no", "now")})
    (tmp_path / "var/lib/fwman").mkdir(parents=True)
    (tmp_path / "var/lib/fwman/preflight.json").write_bytes(state.to_bytes())
    (tmp_path / "var/lib/fwman/kernel-hold.json").write_bytes(held.to_bytes())
    result = fwman("metrics", "write", "--stdout", "--root", str(tmp_path))
    assert result.code == 0, result.stderr
    text = result.stdout
    assert 'fwman_preflight_kernel_builds{kernel="6.1.0-56-amd64"} 1\n' in text
    assert 'fwman_preflight_kernel_builds{kernel="6.1.0-57-amd64"} 0\n' in text
    assert 'fwman_preflight_kernel_held{kernel="6.1.0-57-amd64"} 1\n' in text
    assert 'fwman_preflight_kernels{result="will-not-build"} 1\n' in text
    assert "fwman_preflight_last_run_timestamp_seconds 1796155200\n" in text
    assert 'fwman_metrics_source_up{source="preflight"} 1\n' in text
    checked = _promtool(text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_preflight_timer_and_service_verify(tmp_path: Path) -> None:
    """The packaged daily pre-flight units (hooks/, @PYTHON@ as debian/install-hooks fills it) verify."""
    require_tools("systemd-analyze")
    from tests.support.env import REPO

    for name in ("fwman-preflight.service", "fwman-preflight.timer"):
        text = (REPO / "hooks" / name).read_text().replace("@PYTHON@", "/usr/bin/python3")
        (tmp_path / name).write_text(text)
    assert (
        "ExecStart=/usr/bin/python3 -m fwman modules preflight --hold\n"
        in (tmp_path / "fwman-preflight.service").read_text()
    )
    proc = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            str(tmp_path / "fwman-preflight.service"),
            str(tmp_path / "fwman-preflight.timer"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
