"""fwman's own Debian package, built once per test session and release, shared by tests/system and tests/story.

``make deb`` (dpkg-buildpackage + lintian) runs at most once per session and release whichever test module asks
first: Debian 12 (bookworm, the default) on this machine, Debian 13 with ``make deb RELEASE=trixie`` (built in a
trixie root whose tarball is cached with the story roots, ``DEB_ROOTS`` = tests/support/debroot.CACHE).
``FWMAN_DEB=path`` uses a Debian 12 package built before, ``FWMAN_DEB_TRIXIE=path`` a Debian 13 one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fwman import __version__
from tests.support.debroot import CACHE, SUITES
from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

_BUILT: dict[str, Path] = {}
#: the output of each `make deb` this session ran, by release (what the build said: release, lintian, Python)
BUILD_LOG: dict[str, str] = {}


def deb_version(release: str = "bookworm") -> str:
    """Return the package version `make deb` gives the build for ``release``: fwman's version + debN."""
    return f"{__version__}+deb{SUITES[release]}"


def bench_deb() -> Path | None:
    """Return the Debian 12 package a benchmark installs: ``FWMAN_DEB``, else the result of `make deb` (None, and
    the build's stderr tail printed, when it fails: a benchmark says so and measures nothing)."""
    import sys

    if os.environ.get("FWMAN_DEB"):
        return Path(os.environ["FWMAN_DEB"])
    proc = subprocess.run(["make", "-C", str(REPO), "deb"], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        print(f"make deb failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return next((REPO / "dist").glob("fwman_*.deb"))


def build_deb(release: str = "bookworm") -> Path:
    """Return the package to test for ``release`` (bookworm or trixie): ``FWMAN_DEB`` (``FWMAN_DEB_TRIXIE``), or the
    result of `make deb RELEASE=...` (built once per session; lintian of that release must pass).

    Skips the calling test when this is not a Debian machine with the build tools (root, dpkg, apt-get).
    """
    if not is_root() or shutil.which("dpkg") is None or shutil.which("apt-get") is None:
        pytest.skip("needs root, dpkg and apt-get (a Debian machine)")
    variable = "FWMAN_DEB" if release == "bookworm" else f"FWMAN_DEB_{release.upper()}"
    if os.environ.get(variable):
        return Path(os.environ[variable]).resolve()
    if release not in _BUILT:
        if release == "bookworm":
            require_tools("dpkg-buildpackage", "dh_virtualenv", "lintian", "git")
        else:  # built in a root of the release: only what makes and enters it is needed here
            require_tools("dpkg-parsechangelog", "mmdebstrap", "unshare", "git")
        argv = ["make", "-C", str(REPO), "deb", f"RELEASE={release}", f"DEB_ROOTS={CACHE}"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3000)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"make deb RELEASE={release}: {out[-4000:]}"
        assert "E: fwman" not in out  # lintian: no errors (--fail-on error also fails `make deb`)
        name = f"fwman_{deb_version(release)}_"
        (built,) = (REPO / "dist").glob(f"{name}*.deb")
        assert f"built dist/{built.name} for Debian {SUITES[release]} ({release})" in out, out[-2000:]
        _BUILT[release] = built
        BUILD_LOG[release] = out
    return _BUILT[release]


def higher_version(deb: Path, tmp: Path) -> Path:
    """Return ``deb`` repacked as its version + ``+test1`` (the same files, in ``tmp``): an upgrade through dpkg's
    upgrade path. Raises AssertionError when dpkg-deb fails."""
    version = _dpkg_deb("-f", str(deb), "Version").strip()
    tree = tmp / "tree"
    _dpkg_deb("-R", str(deb), str(tree))
    control = tree / "DEBIAN/control"
    control.write_text(control.read_text().replace(f"Version: {version}\n", f"Version: {version}+test1\n"))
    out = tmp / f"fwman_{version}+test1.deb"
    _dpkg_deb("-Zxz", "-b", str(tree), str(out))
    return out


def _dpkg_deb(*args: str) -> str:
    proc = subprocess.run(["dpkg-deb", *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"dpkg-deb {' '.join(args)}: {proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="session")
def deb() -> Path:
    """Return fwman's .deb for this session (see build_deb)."""
    return build_deb()
