"""When the Debian package owns the hooks, `fwman hooks` reports dpkg's files and never writes over them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver.hooks.ownership import package_ownership, parse_dpkg_list, parse_md5sums
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv

HOOK = b"#!/bin/sh\nexec /usr/lib/fwman/bin/python -m fwman modules hook --kernel $1\n"
UNIT = b"[Service]\nExecStart=/usr/libexec/fwman/fwman-catchup\n"
SCRIPT = b"#!/bin/sh\nexit 0\n"


def _install_package(root: Path, *, md5sums: bool = True, enabled: bool = True) -> None:
    """Lay out what `apt install ./fwman_*.deb` leaves: the files and dpkg's list and md5sums of them."""
    files = {
        "etc/kernel/postinst.d/fwman": HOOK,
        "etc/kernel/header_postinst.d/fwman": HOOK,
        "usr/libexec/fwman/fwman-catchup": SCRIPT,
        "lib/systemd/system/fwman-catchup.service": UNIT,
        "usr/lib/fwman/bin/fwman": b"#!/usr/lib/fwman/bin/python\n",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    dirs = ["/.", "/etc", "/etc/kernel", "/etc/kernel/postinst.d", "/lib/systemd/system", "/usr/libexec/fwman"]
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "fwman.list").write_text("\n".join(dirs + ["/" + rel for rel in files]) + "\n")
    if md5sums:  # dpkg keeps no sum of a conffile (/etc) in md5sums
        sums = [f"{hashlib.md5(d).hexdigest()}  {rel}" for rel, d in files.items() if not rel.startswith("etc/")]
        (info / "fwman.md5sums").write_text("\n".join(sums) + "\n")
    if enabled:
        wants = root / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(parents=True)
        (wants / "fwman-catchup.service").symlink_to("/lib/systemd/system/fwman-catchup.service")


def test_parsers_read_dpkg_formats() -> None:
    assert parse_dpkg_list("/.\n/etc\n/etc/kernel/postinst.d/fwman\n") == ["/.", "/etc", "/etc/kernel/postinst.d/fwman"]
    with pytest.raises(ParseError, match="line at offset 0x2: not an absolute path"):
        parse_dpkg_list("/.\netc/fwman\n")
    md5 = "d41d8cd98f00b204e9800998ecf8427e"
    assert parse_md5sums(f"{md5}  usr/bin/fwman\n") == {"/usr/bin/fwman": md5}
    with pytest.raises(ParseError, match="dpkg md5sums"):
        parse_md5sums(f"{md5} usr/bin/fwman\n")  # one space: not dpkg's format


@given(st.text())
def test_parsers_take_any_text(text: str) -> None:
    for parser in (parse_dpkg_list, parse_md5sums):
        try:
            parser(text)
        except ParseError:
            pass


def test_no_package_no_ownership(tmp_path: Path) -> None:
    assert package_ownership(LiveHost(str(tmp_path))) is None
    _install_package(tmp_path, md5sums=False)  # removed, not purged: dpkg lists only the conffiles it keeps
    assert package_ownership(LiveHost(str(tmp_path))) is None


def test_status_reports_package_files_and_changes(tmp_path: Path) -> None:
    _install_package(tmp_path)
    run = FwmanEnv()
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["package"] == {"name": "fwman", "leftovers": []} and doc["installed"] is True and doc["enabled"]
    assert [f["path"] for f in doc["files"]] == [
        "/etc/kernel/postinst.d/fwman",
        "/etc/kernel/header_postinst.d/fwman",
        "/usr/libexec/fwman/fwman-catchup",
        "/lib/systemd/system/fwman-catchup.service",
    ]  # the package's other files (the environment) are not hooks
    text = run("hooks", "status", "--root", str(tmp_path)).stdout
    rows = [line.split() for line in text.splitlines()]
    assert ["/usr/libexec/fwman/fwman-catchup", "ok", "(package", "file)"] in rows
    assert ["/etc/kernel/postinst.d/fwman", "ok", "(package", "conffile)"] in rows
    assert "owned by the Debian package fwman" in text and "run `fwman hooks install`" not in text

    (tmp_path / "usr/libexec/fwman/fwman-catchup").write_bytes(SCRIPT + b"# edited\n")
    (tmp_path / "usr/local/lib/fwman").mkdir(parents=True)
    (tmp_path / "usr/local/lib/fwman/fwman-catchup").write_bytes(SCRIPT)  # the pip layout's, left behind
    doc = run("hooks", "status", "--json", "--root", str(tmp_path)).json()
    assert doc["installed"] is False and doc["package"]["leftovers"] == ["/usr/local/lib/fwman/fwman-catchup"]
    assert doc["files"][2]["note"] == "changed since the package installed it"


def test_install_and_remove_leave_package_files_alone(tmp_path: Path) -> None:
    _install_package(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    run = FwmanEnv()
    done = run("hooks", "install", "--root", str(tmp_path))
    assert done.code == 0 and "the Debian package fwman installed the hooks" in done.stdout
    assert not (tmp_path / "etc/systemd/system/fwman-catchup.service").exists()
    removed = run("hooks", "remove", "--root", str(tmp_path))
    assert removed.code == 3 and "belong to the Debian package fwman" in removed.stderr
    assert "apt remove fwman" in removed.stderr
    (tmp_path / "etc/kernel/header_postinst.d/fwman").unlink()
    broken = run("hooks", "install", "--root", str(tmp_path))
    assert broken.code == 3 and "apt install --reinstall fwman" in broken.stderr
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == {p: d for p, d in before.items() if p.name != "fwman" or "header_postinst" not in str(p)}
