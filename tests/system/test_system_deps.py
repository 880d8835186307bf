"""`make system-deps` (tests/support/system-deps.sh) on this machine: what it installs and what it refuses.

Run with ``--plan``: apt's simulation and the downloaded packages' maintainer scripts are read, nothing is
installed. The Makefile's list itself is read with ``make -n``.
"""

from __future__ import annotations

import re
import shlex
import subprocess

import pytest

from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

pytestmark = pytest.mark.system

SCRIPT = REPO / "tests/support/system-deps.sh"


def _packages() -> list[str]:
    dry = subprocess.run(["make", "-n", "system-deps"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in dry.splitlines() if "system-deps.sh" in ln)
    return shlex.split(line)[2:]


def test_the_makefile_asks_for_what_the_tests_need_and_no_server_or_point_release() -> None:
    packages = _packages()
    assert {"libarchive-tools", "mmdebstrap", "git", "7zip", "dkms"} <= set(packages)
    assert "prometheus" not in packages  # only its promtool is unpacked
    assert not [p for p in packages if p.startswith("git-daemon")]  # git carries the daemon; those packages run it
    assert not [p for p in packages if re.match(r"linux-(headers|image)-\d", p)]  # chosen from apt at install time


def _plan(*packages: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--plan", *packages], capture_output=True, text=True, timeout=600, check=False
    )


def test_a_package_that_starts_a_service_is_refused_before_anything_is_installed() -> None:
    if not is_root():
        pytest.skip("apt needs root")
    require_tools("apt-get", "dpkg-deb", package="apt")
    for server in ("prometheus", "git-daemon-run"):
        r = _plan(server)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "start or enable a service (nothing was installed)" in r.stderr and server in r.stderr
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", server], capture_output=True, text=True)
        assert "install ok installed" not in status.stdout
    ours = _plan(*_packages())
    assert ours.returncode == 0, ours.stdout + ours.stderr
    assert "refused" not in ours.stderr
