"""The Debian package on this machine: build, install, upgrade, run, remove, purge (Debian 12, as root).

The Debian 13 package gets the same in a trixie root: tests/system/test_deb_trixie.py.

Builds the package once per session (tests/support/debpkg.py: `make deb`, dpkg-buildpackage + lintian;
``FWMAN_DEB=path`` uses a built one), installs it with apt, runs `fwman --version`, `fwman hooks status`, the
kernel hook through `run-parts` (on a kernel version with no headers and under a temp root, so it changes
nothing here), upgrades it (the same contents as a higher version), removes and purges it, and checks after
each step what dpkg's file list says is left. It is skipped when fwman is already installed here or fwman
state exists on this machine: it must never touch a real installation.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwman import __version__
from fwman.driver.dkms import APT_PIN_TEXT
from tests.support.debpkg import deb, deb_version, higher_version
from tests.support.env import REPO
from tests.support.tools import require_tools

pytestmark = pytest.mark.system
__all__ = ["deb"]  # the session fixture, shared with tests/story through tests/support/debpkg.py

KVER = "6.1.0-999-amd64"  # no such kernel, no headers: the hook marks it pending and exits 0
STATE = Path("/var/lib/fwman")
BACKUP = STATE / "backups/10de-2204-3842-3987-test/card0.rom"
DEPMOD_CONF = Path("/etc/depmod.d/fwman.conf")
APT_PIN = Path("/etc/apt/preferences.d/fwman-nvidia-dkms")
WANTS = Path("/etc/systemd/system/multi-user.target.wants/fwman-catchup.service")
#: what must not exist before the test, or the test would remove a real installation's state
REAL_STATE = (STATE, DEPMOD_CONF, APT_PIN, Path("/etc/fwman"), Path("/usr/lib/fwman"))


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", **(env or {})},
    )


def _ok(*argv: str, env: dict[str, str] | None = None) -> str:
    proc = _run(*argv, env=env)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _installed() -> bool:
    proc = _run("dpkg-query", "-W", "-f=${Status}", "fwman")
    return proc.returncode == 0 and "installed" in proc.stdout and "config-files" not in proc.stdout


@pytest.fixture
def clean_machine() -> Iterator[None]:
    """Skip unless no fwman is installed and no fwman state exists; purge whatever the test leaves."""
    require_tools("run-parts")
    present = [str(p) for p in REAL_STATE if p.exists()]
    if _installed() or present:
        pytest.skip(f"fwman is installed or has state on this machine ({', '.join(present) or 'dpkg'})")
    try:
        yield
    finally:
        _run("apt-get", "purge", "-y", "-q", "fwman")
        shutil.rmtree(STATE, ignore_errors=True)  # the test's own stand-in backup


def _exists(path: str) -> bool:
    return os.path.lexists(path)


def _hook(directory: str, root: Path) -> subprocess.CompletedProcess[str]:
    """Run only fwman's hook of ``directory`` through the real run-parts, as a kernel package would."""
    return _run(
        "run-parts",
        "--verbose",
        "--exit-on-error",
        "--regex=^fwman$",
        f"--arg={KVER}",
        f"--arg=/boot/vmlinuz-{KVER}",
        directory,
        env={"FWMAN_ROOT": str(root)},
        timeout=120,
    )


def test_install_upgrade_remove_purge(deb: Path, clean_machine: None, tmp_path: Path) -> None:
    before = {p for p in ("/etc/kernel/postinst.d", "/etc/kernel/header_postinst.d", "/usr/libexec") if _exists(p)}

    started = time.monotonic()
    _ok("apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb))
    install_s = time.monotonic() - started
    print(f"\ninstall: {install_s:.1f} s; {_ok('dpkg-query', '-W', '-f=${Installed-Size} KiB', 'fwman')}")
    files = _ok("dpkg", "-L", "fwman").split("\n")
    files = [f for f in files if f.startswith("/") and f != "/."]
    conffiles = _ok("dpkg-query", "-W", "-f=${Conffiles}", "fwman").split()[::2]
    # every file hooks.list installs under /etc is a conffile (dpkg makes it one), and nothing else is
    assert sorted(conffiles) == sorted(
        ["/etc/fwman/config.toml", *(p for p in _hook_targets() if p.startswith("/etc/"))]
    )
    assert set(_hook_targets()) <= set(files)

    # on the PATH, with its catalog, key, hooks, unit (enabled), man pages and completion
    assert _ok("fwman", "--version").strip() == f"fwman, version {__version__}"
    assert shutil.which("fwman") == "/usr/bin/fwman"
    for path in (
        "/usr/lib/fwman/share/fwman/catalog/index.json",
        "/usr/lib/fwman/share/fwman/catalog/index.json.sig",
        "/usr/lib/fwman/share/fwman/catalog/keys.json",  # the root-signed keys document (docs/signing.md)
        "/usr/lib/fwman/share/fwman/catalog/keys.json.sig",
        "/lib/systemd/system/fwman-catchup.service",
        "/usr/libexec/fwman/fwman-catchup",
        "/usr/share/man/man1/fwman-hooks.1.gz",
    ):
        assert path in files, path
    assert any(f.endswith("/fwman/keys/fwman-catalog-2026.pub") for f in files)
    assert os.readlink(WANTS) == "/lib/systemd/system/fwman-catchup.service"
    unit = Path("/lib/systemd/system/fwman-catchup.service").read_text()
    assert "ExecStart=/usr/libexec/fwman/fwman-catchup\n" in unit
    assert 'PYTHON="/usr/lib/fwman/bin/python"' in Path("/usr/libexec/fwman/fwman-catchup").read_text()
    assert _ok("fwman", "catalog", "list", "--json")  # the bundled catalog verifies with the bundled key
    assert "signed by root key 23cb724582f7654c" in _ok("fwman", "catalog", "keys", "show")
    assert _ok("man", "-w", "fwman-hooks").strip() == "/usr/share/man/man1/fwman-hooks.1.gz"
    completion = _ok(
        "bash",
        "-c",
        "source /usr/share/bash-completion/completions/fwman; COMP_WORDS=(fwman hoo); COMP_CWORD=1; "
        '_fwman_completion fwman; echo "${COMPREPLY[@]}"',
    )
    assert completion.split() == ["hooks"], completion

    status = json.loads(_ok("fwman", "hooks", "status", "--json"))
    assert status["package"] == {"name": "fwman", "leftovers": []} and status["installed"] is True
    assert {f["path"] for f in status["files"]} >= {"/etc/kernel/postinst.d/fwman", "/usr/libexec/fwman/fwman-catchup"}
    assert "owned by the Debian package fwman" in _ok("fwman", "hooks", "status")
    assert "the Debian package fwman installed the hooks" in _ok("fwman", "hooks", "install")

    # the kernel hook, as the kernel's postinst runs it: no headers, no source: pending, exit 0
    root = tmp_path / "root"
    (root / "lib/modules").mkdir(parents=True)
    proc = _hook("/etc/kernel/postinst.d", root)
    assert proc.returncode == 0, proc.stderr
    assert f"run-parts: executing /etc/kernel/postinst.d/fwman {KVER} /boot/vmlinuz-{KVER}" in proc.stderr
    assert f"no module source configured: {KVER} marked pending" in proc.stderr
    assert (root / f"var/lib/fwman/modules/{KVER}.pending").is_file() and not STATE.exists()
    assert "marked pending" in _hook("/etc/kernel/header_postinst.d", root).stderr
    if Path("/etc/kernel/postrm.d/fwman").exists():  # the removal hook (issue 16): never fails a kernel removal
        assert _hook("/etc/kernel/postrm.d", root).returncode == 0
    # the unit's command, as systemd would start it at boot: a full catch-up the first time (no stamp yet)
    catchup = _run("/usr/libexec/fwman/fwman-catchup", env={"FWMAN_ROOT": str(root)}, timeout=120)
    assert catchup.returncode == 0, catchup.stderr
    assert (root / "var/lib/fwman/modules/current.stamp").is_file()

    # state fwman would have written, and an edit of the conffile: an upgrade keeps all of it
    (STATE / "modules").mkdir(parents=True)
    (STATE / "modules/source.json").write_text("{}\n")
    BACKUP.parent.mkdir(parents=True)
    BACKUP.write_bytes(b"\x55\xaa" + bytes(range(256)) * 4)
    backup_sum = hashlib.sha256(BACKUP.read_bytes()).hexdigest()
    (STATE / "dkms-block.json").write_text(json.dumps({"removed": [], "apt_pin": str(APT_PIN), "at": ""}))
    APT_PIN.write_text(APT_PIN_TEXT)
    DEPMOD_CONF.parent.mkdir(parents=True, exist_ok=True)
    DEPMOD_CONF.write_text("# Written by fwman (`fwman modules build`)\noverride nvidia * updates/fwman\n")
    config = Path("/etc/fwman/config.toml")
    config.write_text(config.read_text() + '\n[forks]\nmine = "/srv/git/nvidia.git"\n')
    edited = config.read_text()

    assert _ok("dpkg-query", "-W", "-f=${Version}", "fwman") == deb_version("bookworm")
    _ok("apt-get", "install", "-y", "-q", str(higher_version(deb, tmp_path)))
    assert _ok("dpkg-query", "-W", "-f=${Version}", "fwman") == f"{deb_version('bookworm')}+test1"
    assert config.read_text() == edited and (STATE / "modules/source.json").is_file() and BACKUP.is_file()
    assert _ok("fwman", "--version").strip() == f"fwman, version {__version__}"

    # remove: the programs go; conffiles (the hooks among them), the unit's enablement and all state stay
    _ok("apt-get", "remove", "-y", "-q", "fwman")
    left = sorted(f for f in files if _exists(f) and not os.path.isdir(f))
    assert left == sorted(conffiles)
    assert not _exists("/usr/lib/fwman") and shutil.which("fwman") is None
    assert _exists(str(WANTS)) and config.read_text() == edited and (STATE / "modules/source.json").is_file()
    proc = _hook("/etc/kernel/postinst.d", root)  # a kernel installed now: the leftover hook says so, exit 0
    assert proc.returncode == 0 and "/usr/lib/fwman/bin/python is gone (fwman uninstalled?)" in proc.stderr

    # purge: nothing of the package is left but the directories other packages share; state goes, backups stay
    out = _ok("apt-get", "purge", "-y", "-q", "fwman")
    assert _run("dpkg-query", "-W", "fwman").returncode != 0
    left = sorted(f for f in files if _exists(f) and f not in before and not _shared_dir(f))
    assert left == []
    for gone in (WANTS, DEPMOD_CONF, APT_PIN, Path("/etc/fwman"), STATE / "modules", STATE / "dkms-block.json"):
        assert not _exists(str(gone)), gone
    assert sorted(p.name for p in STATE.iterdir()) == ["backups"]
    assert hashlib.sha256(BACKUP.read_bytes()).hexdigest() == backup_sum
    assert f"the cards' firmware backups stay in {STATE}/backups" in out


def _hook_targets() -> list[str]:
    """Return where debian/hooks.list installs the files of hooks/ (absolute paths)."""
    lines = (REPO / "debian/hooks.list").read_text().splitlines()
    fields = [line.split() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return ["/" + f[1] for f in fields if f[1] != "-"]


def _shared_dir(path: str) -> bool:
    """Return True for a directory another package owns too (/etc/kernel, /usr/share/man/man1, ...)."""
    if not os.path.isdir(path):
        return False
    return _run("dpkg-query", "-S", path).returncode == 0
