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
