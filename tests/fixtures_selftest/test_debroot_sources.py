"""tests/support/debroot.py's reading of this machine's apt sources for a root of another suite (issue 26).

A trixie root is made from the machine's own Debian entries with the code name changed; other vendors' entries,
disabled stanzas and suites of other releases are left out. Read from a temp ``/etc/apt`` here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.debroot import RootError, debian_sources, host_suite

SOURCES = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Enabled: no
"""
VENDOR = """Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
Signed-By: /usr/share/keyrings/nodesource.gpg
"""


def _apt(tmp_path: Path, lists: str = "") -> Path:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d/debian.sources").write_text(SOURCES)
    (apt / "sources.list.d/nodesource.sources").write_text(VENDOR)
    (apt / "sources.list").write_text(lists)
    return apt


def test_the_default_suite_keeps_the_machines_entries(tmp_path: Path) -> None:
    text = debian_sources(apt=_apt(tmp_path), own="bookworm")
    assert "Suites: bookworm bookworm-updates bookworm-backports\n" in text
    assert "Suites: bookworm-security\n" in text and "nodesource" not in text and "sid" not in text
    assert "# http://snapshot" not in text  # comments dropped


def test_another_suite_takes_the_same_archive_with_the_code_name_changed(tmp_path: Path) -> None:
    lists = "deb [arch=amd64] http://ftp.de.debian.org/debian bookworm main contrib\n"
    lists += "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n"  # another vendor's
    text = debian_sources("trixie", apt=_apt(tmp_path, lists), own="bookworm")
    stanzas = text.strip().split("\n\n")
    assert [s for s in stanzas if s.startswith("Types: deb\nURIs: http://deb.debian.org/debian\n")] == [
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie trixie-updates trixie-backports\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg"
    ]
    assert "URIs: http://deb.debian.org/debian-security\nSuites: trixie-security\n" in text
    assert "URIs: http://ftp.de.debian.org/debian\nSuites: trixie\nComponents: main contrib\n" in text
    assert "bookworm" not in text and "cloud" not in text and "nodesource" not in text


def test_a_suite_without_a_root_or_a_machine_without_debian_sources_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RootError, match="no base root for suite 'sid'"):
        debian_sources("sid", apt=_apt(tmp_path), own="bookworm")
    empty = tmp_path / "empty"
    (empty / "sources.list.d").mkdir(parents=True)
    with pytest.raises(RootError, match="no Debian bookworm source"):
        debian_sources("trixie", apt=empty, own="bookworm")


def test_the_machines_release_is_read_from_os_release(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_CODENAME=trixie\nID=debian\n')
    assert host_suite(release) == "trixie"
    assert host_suite(tmp_path / "absent") == "bookworm"
