"""debian/install-hooks: every file of hooks/ goes into the package where debian/hooks.list says, or the build
fails (a new hook cannot be left out of the package)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.env import REPO

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh")


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(REPO / "hooks", src / "hooks")
    (src / "debian").mkdir()
    for name in ("hooks.list", "install-hooks"):
        shutil.copy2(REPO / "debian" / name, src / "debian" / name)
    return src


def _install(src: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "debian/install-hooks", str(dest), "/usr/lib/fwman/bin/python", "/usr/libexec/fwman"],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=30,
    )


def _listed() -> list[tuple[str, str, str]]:
    lines = (REPO / "debian/hooks.list").read_text().splitlines()
    return [tuple(line.split()) for line in lines if line.strip() and not line.lstrip().startswith("#")]  # type: ignore[misc]


def test_every_hook_is_installed_with_the_package_paths(tmp_path: Path) -> None:
    src, dest = _tree(tmp_path), tmp_path / "pkg"
    proc = _install(src, dest)
    assert proc.returncode == 0, proc.stderr
    assert {t for t, _, _ in _listed()} == {p.name for p in (REPO / "hooks").iterdir()}
    for _template, target, mode in _listed():
        if target == "-":  # opt-in: not a package file
            assert not list(dest.rglob(_template)), _template
            continue
        text = (dest / target).read_text()
        assert "@PYTHON@" not in text and "/usr/local/lib/fwman/fwman-catchup" not in text, target
        assert stat.S_IMODE(os.stat(dest / target).st_mode) == int(mode, 8), target
    unit = (dest / "lib/systemd/system/fwman-catchup.service").read_text()
    assert "ExecStart=/usr/libexec/fwman/fwman-catchup\n" in unit
    assert 'FWMAN_PYTHON="/usr/lib/fwman/bin/python"' in (dest / "etc/kernel/postinst.d/fwman").read_text()


def test_a_hook_missing_from_the_list_fails_the_build(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    (src / "hooks/kernel-preinst").write_text("#!/bin/sh\n")
    proc = _install(src, tmp_path / "pkg")
    assert proc.returncode == 1
    assert "hooks/kernel-preinst is not in debian/hooks.list" in proc.stderr


def test_a_listed_template_that_is_gone_fails_the_build(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    (src / "hooks/fwman-catchup").unlink()
    proc = _install(src, tmp_path / "pkg")
    assert proc.returncode == 1 and "names hooks/fwman-catchup, which does not exist" in proc.stderr
