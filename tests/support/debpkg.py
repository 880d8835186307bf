"""fwman's own Debian package, built once per test session and shared by tests/system and tests/story.

``make deb`` (dpkg-buildpackage + lintian) runs at most once per session whichever test module asks first;
``FWMAN_DEB=path`` uses a package built before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fwman import __version__
from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

_BUILT: dict[str, Path] = {}


def build_deb() -> Path:
    """Return the package to test: ``FWMAN_DEB``, or the result of `make deb` (built once; lintian must pass).

    Skips the calling test when this is not a Debian machine with the build tools (root, dpkg, apt-get).
    """
    if not is_root() or shutil.which("dpkg") is None or shutil.which("apt-get") is None:
        pytest.skip("needs root, dpkg and apt-get (a Debian machine)")
    if os.environ.get("FWMAN_DEB"):
        return Path(os.environ["FWMAN_DEB"]).resolve()
    if "deb" not in _BUILT:
        require_tools("dpkg-buildpackage", "dh_virtualenv", "lintian", "git")
        proc = subprocess.run(["make", "-C", str(REPO), "deb"], capture_output=True, text=True, timeout=1800)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"make deb: {out[-4000:]}"
        assert "E: fwman" not in out  # lintian: no errors (--fail-on error also fails `make deb`)
        (built,) = (REPO / "dist").glob(f"fwman_{__version__}_*.deb")
        _BUILT["deb"] = built
    return _BUILT["deb"]


@pytest.fixture(scope="session")
def deb() -> Path:
    """Return fwman's .deb for this session (see build_deb)."""
    return build_deb()
