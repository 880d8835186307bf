"""The catch-up unit says truthfully who installed it: the Debian package, or `fwman hooks install` without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.env import REPO, FwmanEnv


def _comment(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


def test_the_packaged_unit_and_the_hooks_install_unit_each_name_where_they_are(tmp_path: Path) -> None:
    dest = tmp_path / "pkg"
    subprocess.run(
        ["sh", "debian/install-hooks", str(dest), "/usr/lib/fwman/bin/python", "/usr/libexec/fwman"],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=30,
    )
    packaged = _comment((dest / "lib/systemd/system/fwman-catchup.service").read_text())
    assert "Installed by the Debian package fwman as /lib/systemd/system/fwman-catchup.service" in packaged
    assert "/usr/libexec/fwman/fwman-catchup exits" in packaged  # the package's path of the script, not pip's

    root = tmp_path / "root"
    root.mkdir()
    result = FwmanEnv()("hooks", "install", "--root", str(root))
    assert result.code == 0, result.stderr
    written = _comment((root / "etc/systemd/system/fwman-catchup.service").read_text())
    assert "by `fwman hooks install` as /etc/systemd/system/fwman-catchup.service" in written
