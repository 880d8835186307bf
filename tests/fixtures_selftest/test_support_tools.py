"""The test support itself: a missing tool skips on a workstation and fails under CI; the kernel pair is chosen
by what its headers declare, from the list apt offers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.env import REPO
from tests.support.kernels import installed_pair, offered, packages_to_install, resize_arguments

PROBE = """
from tests.support.tools import needs_tool, require_tools

def test_direct():
    require_tools("fwman-no-such-tool", package="no-such-package")

@needs_tool("fwman-no-such-tool", "no-such-package")
def test_decorated(tmp_path):
    assert tmp_path.is_dir()
"""


def _outcomes(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = str(REPO)
    # the probe needs no plugin: without hypothesis's (autoloaded by its entry point) the child starts 4x faster
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout


def test_a_missing_tool_skips_outside_ci(tmp_path: Path) -> None:
    out = _outcomes(tmp_path, None)
    assert "2 skipped" in out, out
    assert "needs fwman-no-such-tool (Debian package no-such-package)" in out


def test_a_missing_tool_fails_under_ci(tmp_path: Path) -> None:
    out = _outcomes(tmp_path, "true")
    assert "2 failed" in out, out
    assert "failure of the install step" in out


APT_CACHE = """\
linux-headers-6.1.0-53-amd64 - Header files for Linux 6.1.0-53-amd64
linux-headers-6.1.0-9-amd64 - Header files for Linux 6.1.0-9-amd64
linux-headers-amd64 - Header files for Linux amd64 configuration (meta-package)
linux-headers-6.1.0-53-common - Common header files for Linux 6.1.0-53
linux-headers-6.1.0-57-amd64 - Header files for Linux 6.1.0-57-amd64
linux-headers-6.1.0-57-rt-amd64 - Header files for Linux 6.1.0-57-rt-amd64
"""


def test_the_kernels_come_from_the_offered_list_oldest_and_newest() -> None:
    kvers = offered(APT_CACHE)
    assert kvers == ["6.1.0-9-amd64", "6.1.0-53-amd64", "6.1.0-57-amd64"]  # version order, not text order
    assert packages_to_install(kvers, None) == ["linux-headers-6.1.0-9-amd64", "linux-headers-6.1.0-57-amd64"]
    assert packages_to_install(kvers, ("6.1.0-50-amd64", "6.1.0-53-amd64")) == []  # a pair is there already
    assert packages_to_install([], None) == []


def _headers(usr_src: Path, kver: str, declaration: str) -> None:
    (usr_src / f"linux-headers-{kver}").mkdir(parents=True)
    inc = usr_src / f"linux-headers-{kver.removesuffix('-amd64')}-common/include/linux"
    inc.mkdir(parents=True)
    (inc / "pci.h").write_text(f"struct pci_dev;\n{declaration}\nint pci_select_bars(struct pci_dev *dev);\n")


def test_the_pair_is_told_by_pci_resize_resource(tmp_path: Path) -> None:
    three = "int __must_check pci_resize_resource(struct pci_dev *dev, int i, int size);"
    four = "int __must_check pci_resize_resource(struct pci_dev *dev, int i, int size,\n\t\t\t\t     int exclude_bars);"
    assert (resize_arguments(three), resize_arguments(four), resize_arguments("int x;")) == (3, 4, None)
    _headers(tmp_path, "6.1.0-47-amd64", three)
    assert installed_pair(tmp_path) is None  # two kernels alike are not a pair
    _headers(tmp_path, "6.1.0-50-amd64", three)
    _headers(tmp_path, "6.1.0-57-amd64", four)
    _headers(tmp_path, "6.1.0-53-amd64", four)
    assert installed_pair(tmp_path) == ("6.1.0-50-amd64", "6.1.0-53-amd64")
