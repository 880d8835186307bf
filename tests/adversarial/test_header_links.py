"""Issue 37, row 3: a header package's links are followed inside the pre-flight's scratch root, never out of it.

A ``lib/modules/KVER/build`` link that climbs out of the scratch root with enough ``../`` made the pre-flight build
against another kernel's *installed* headers (a verdict about the wrong kernel), rewrite their Makefile's
``include`` into the scratch root and then delete that root: the installed headers were left broken. The packages
here are real ``.deb`` files (``dpkg-deb -b``), unpacked by the pre-flight's own ``dpkg-deb -x``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fwman.core.errors import FwmanError
from fwman.driver import preflight as pf
from fwman.host.live import LiveHost
from tests.support.counting import tried
from tests.support.tools import require_tools

KVER = "6.1.0-58-amd64"
INSTALLED = "usr/src/linux-headers-6.1.0-50-amd64"  # another kernel's headers, installed on this machine
MAKEFILE = "include /usr/src/linux-headers-6.1.0-50-common/Makefile\n"
#: from <scratch root>/lib/modules/KVER up to the host's root: KVER, modules, lib, root, KVER, preflight,
#: fwman, cache, var
OUT = "../" * 9


def _deb(tmp_path: Path, links: dict[str, str]) -> Path:
    """Return a directory holding one header package: a tree with ``include/`` and a Makefile, and ``links``."""
    tree = tmp_path / "pkg"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(
        f"Package: linux-headers-{KVER}\nVersion: 6.1.192-58\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        "Description: headers\n"
    )
    (tree / f"usr/src/linux-headers-{KVER}/include").mkdir(parents=True)
    (tree / f"usr/src/linux-headers-{KVER}/Makefile").write_text(MAKEFILE)
    (tree / "usr/src/linux-headers-6.1.0-50-common").mkdir(parents=True)
    (tree / "usr/src/linux-headers-6.1.0-50-common/Makefile").write_text("# the package's own\n")
    for link, target in links.items():
        (tree / link).parent.mkdir(parents=True, exist_ok=True)
        (tree / link).symlink_to(target)
    debs = tmp_path / "root/var/cache/fwman/preflight" / KVER / "debs"
    debs.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(debs / "h.deb")], check=True,
                   capture_output=True)  # fmt: skip
    return debs


@pytest.mark.parametrize(
    "links",
    [
        {f"lib/modules/{KVER}/build": OUT + INSTALLED},  # climbs out of the scratch root
        {f"lib/modules/{KVER}/build": f"/usr/src/linux-headers-{KVER}/{OUT}{INSTALLED}"},  # absolute, then climbs
        {f"lib/modules/{KVER}/build": f"/usr/src/linux-headers-{KVER}", f"usr/src/linux-headers-{KVER}/x": OUT},
        {"lib": "/"},  # the whole tree is the host's
    ],
)
def test_a_header_link_never_leads_to_installed_headers(tmp_path: Path, links: dict[str, str]) -> None:
    require_tools("dpkg-deb")
    tried()
    installed = tmp_path / "root" / INSTALLED
    (installed / "include").mkdir(parents=True)
    (installed / "Makefile").write_text(MAKEFILE)
    debs = _deb(tmp_path, links)
    host = LiveHost(str(tmp_path / "root"))
    scratch = pf.scratch_dir(KVER)
    try:
        tree = pf.unpack_headers(host, KVER, f"{scratch}/debs", f"{scratch}/root", f"{scratch}/build", "/log")
    except FwmanError as e:
        assert KVER in e.message  # refused: "could not check", naming what it found
    else:
        assert tree.build.startswith(f"{scratch}/root/"), tree.build  # it was: /usr/src/linux-headers-6.1.0-50-amd64
    host.remove_tree(scratch)  # what the pre-flight does once its verdict is in
    assert (installed / "Makefile").read_text() == MAKEFILE  # it was: rewritten into the scratch root
    assert debs.parent.exists() is False and (installed / "include").is_dir()
