"""The Debian package in a real Debian 12 and a Debian 13 root: install, upgrade, run, remove, purge (as root).

Each release's package is built by `make deb RELEASE=R` (tests/support/debpkg.py: Debian 12's on this machine,
Debian 13's in a trixie build root made with mmdebstrap, with trixie's Python and lintian; ``FWMAN_DEB=path`` and
``FWMAN_DEB_TRIXIE=path`` use built ones) and installed with apt in a root of that release
(tests/support/debroot.py ``base_tarball(R)``: mmdebstrap from this machine's Debian sources, cached in
/var/cache/fwman-story), the way an owner's machine installs it, and never on this machine (its unit would be
enabled here, its pin and depmod files written here). Asserted in each: the files and conffiles, the unit enabled
in the root and nowhere else, the hooks through run-parts, the catch-up script, an upgrade that keeps the
configuration, state and backups, a remove that leaves the conffiles, a purge that leaves the backups and nothing
else of fwman (a ``find`` of the whole root before the install and after the purge).

Run it under ``flock /tmp/fwman-roots.lock`` on a shared machine (it makes roots).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fwman import __version__
from fwman.driver.dkms import APT_PIN_TEXT
from tests.support.debpkg import BUILD_LOG, build_deb, deb_version, higher_version
from tests.support.debroot import DebRoot, base_tarball, install_deb, installed_packages
from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

pytestmark = pytest.mark.system

HOOK_ROOT = "/root/hook-root"  # the hooks' FWMAN_ROOT inside the root (/tmp is a fresh tmpfs per command)
STATE = "/var/lib/fwman"
BACKUP = f"{STATE}/backups/10de-2204-3842-3987-test/card0.rom"
WANTS = "/etc/systemd/system/multi-user.target.wants/fwman-catchup.service"
#: what apt and dpkg themselves keep of an install (their databases, logs, downloaded lists): not the package's
APT_STATE = (
    "/var/lib/dpkg/",
    "/var/lib/apt/",
    "/var/cache/apt/",
    "/var/log/",
    "/var/cache/debconf/",
    "/var/cache/man/",
)


@dataclass(frozen=True)
class Release:
    """What differs between the Debian releases the package is built for."""

    name: str  # the codename: bookworm, trixie
    version_id: str  # os-release's VERSION_ID
    kver: str  # no such kernel, no headers: the hook marks it pending and exits 0
    python: str  # the interpreter the package's environment runs on
    unit: str  # where the catch-up unit is installed
    merged_usr: bool  # Debian 13's packages ship nothing under /lib, /bin, /sbin (dh_movetousr)


RELEASES = {
    "bookworm": Release(
        "bookworm", "12", "6.1.0-999-amd64", "/usr/bin/python3.11", "/lib/systemd/system/fwman-catchup.service", False
    ),
    "trixie": Release(
        "trixie",
        "13",
        "6.12.999+deb13-amd64",
        "/usr/bin/python3.13",
        "/usr/lib/systemd/system/fwman-catchup.service",
        True,
    ),
}


@pytest.fixture(params=sorted(RELEASES))
def release(request: pytest.FixtureRequest) -> Release:
    """Return each release in turn."""
    return RELEASES[request.param]


@pytest.fixture
def deb_root(release: Release, tmp_path: Path) -> Iterator[DebRoot]:
    """Yield a root of ``release`` made from the cached base tarball, after `apt-get update`; closed afterwards."""
    if not is_root():
        pytest.skip("needs root (mmdebstrap, loop devices, chroot)")
    require_tools("mmdebstrap", "unshare", "mkfs.ext4", "chroot")
    root = DebRoot.create(tmp_path / release.name, base_tarball(release.name), size_gb=8)
    try:
        root.sh("apt-get update -q", timeout=600)
        yield root
    finally:
        root.close()


def _tree(root: DebRoot) -> set[str]:
    """Return every path of the root's own filesystem (``find -xdev``: not /proc, /dev, /run, /tmp, apt's archives)."""
    out = root.sh("find / -xdev -print", timeout=600).stdout
    return set(out.splitlines())


def _hook(root: DebRoot, directory: str, kver: str) -> str:
    """Run fwman's hook of ``directory`` in the root through the real run-parts; return its output (exit 0)."""
    argv = [
        "run-parts",
        "--verbose",
        "--exit-on-error",
        "--regex=^fwman$",
        f"--arg={kver}",
        f"--arg=/boot/vmlinuz-{kver}",
    ]
    proc = root.sh(f"FWMAN_ROOT={HOOK_ROOT} {shlex.join([*argv, directory])} 2>&1")
    return proc.stdout


def _hook_targets(release: Release) -> list[str]:
    """Return where debian/hooks.list installs the files of hooks/ (absolute paths): on Debian 13 a ``lib/`` path
    is under ``/usr/lib`` (dh_movetousr, merged /usr)."""
    lines = (REPO / "debian/hooks.list").read_text().splitlines()
    fields = [line.split() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    targets = [f[1] for f in fields if f[1] != "-"]
    return ["/" + (re.sub(r"^lib/", "usr/lib/", t) if release.merged_usr else t) for t in targets]


def test_trixie_build_is_for_debian_13() -> None:
    """The Debian 13 build: its version says so, its environment is trixie's Python 3.13, lintian 2.122 passed."""
    deb = build_deb("trixie")
    assert deb.name == f"fwman_{__version__}+deb13_amd64.deb"
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Version", "Depends"], capture_output=True, text=True).stdout
    assert f"Version: {__version__}+deb13\n" in fields
    assert "python3.13, python3 (>= 3.13), python3 (<< 3.14)" in fields
    if "trixie" in BUILD_LOG:  # built in this session (not FWMAN_DEB_TRIXIE): what the build root said
        log = BUILD_LOG["trixie"]
        assert re.search(r"^lintian 2\.\d+\S* \(in the trixie root\): no errors$", log, re.MULTILINE), log[-2000:]
        built_with = r"^built with Python 3\.13\.\d+ \(environment lib/python3\.13\)"
        assert re.search(built_with, log, re.MULTILINE), log[-2000:]
    # apt's order: the Debian 13 build replaces the Debian 12 one on a dist-upgrade, and both sort below 0.1.1
    for low, high in ((deb_version("bookworm"), deb_version("trixie")), (__version__, deb_version("bookworm"))):
        assert subprocess.run(["dpkg", "--compare-versions", low, "lt", high]).returncode == 0, (low, high)


def test_install_upgrade_remove_purge(release: Release, deb_root: DebRoot, tmp_path: Path) -> None:
    root, kver = deb_root, release.kver
    deb = build_deb(release.name)
    os_release = root.read_text("/etc/os-release")
    assert f"VERSION_CODENAME={release.name}" in os_release and f'VERSION_ID="{release.version_id}"' in os_release
    host_wants = os.path.lexists(WANTS)  # this machine's own enablement of the unit, before (and after) the test
    before = _tree(root)
    packages_before = installed_packages(root)

    install_deb(root, deb)
    assert root.run("dpkg-query", "-W", "-f=${Version}", "fwman").stdout == deb_version(release.name)
    assert not installed_packages(root, "linux-image-*") and not installed_packages(root, "linux-headers-*")
    files = [f for f in root.run("dpkg", "-L", "fwman").stdout.splitlines() if f.startswith("/") and f != "/."]
    conffiles = root.run("dpkg-query", "-W", "-f=${Conffiles}", "fwman").stdout.split()[::2]
    assert sorted(conffiles) == sorted(
        ["/etc/fwman/config.toml", *(p for p in _hook_targets(release) if p.startswith("/etc/"))]
    )
    assert set(_hook_targets(release)) <= set(files)

    # on the PATH, with the release's interpreter, its catalog, key, hooks, unit, man pages, completion
    assert root.run("fwman", "--version").stdout.strip() == f"fwman, version {__version__}"
    assert root.sh("command -v fwman").stdout.strip() == "/usr/bin/fwman"
    assert root.run("readlink", "-f", "/usr/lib/fwman/bin/python").stdout.strip() == release.python
    for path in (
        "/usr/lib/fwman/share/fwman/catalog/index.json",
        "/usr/lib/fwman/share/fwman/catalog/keys.json.sig",
        release.unit,
        "/usr/libexec/fwman/fwman-catchup",
        "/usr/share/man/man1/fwman-hooks.1.gz",
    ):
        assert path in files, path
    if release.merged_usr:  # lintian's aliased-location
        assert not any(f.startswith(("/lib/", "/bin/", "/sbin/")) for f in files)
    assert root.run("readlink", WANTS).stdout.strip() == release.unit
    assert os.path.lexists(WANTS) == host_wants  # enabled in the root, not on this machine
    assert "ExecStart=/usr/libexec/fwman/fwman-catchup\n" in root.read_text(release.unit)
    assert 'PYTHON="/usr/lib/fwman/bin/python"' in root.read_text("/usr/libexec/fwman/fwman-catchup")
    assert json.loads(root.run("fwman", "catalog", "list", "--json").stdout)  # verifies with the bundled key
    assert "signed by root key 23cb724582f7654c" in root.run("fwman", "catalog", "keys", "show").stdout
    assert ".TH" in root.sh("zcat /usr/share/man/man1/fwman-hooks.1.gz").stdout
    completion = root.run(
        "bash",
        "-c",
        "source /usr/share/bash-completion/completions/fwman; COMP_WORDS=(fwman hoo); COMP_CWORD=1; "
        '_fwman_completion fwman; echo "${COMPREPLY[@]}"',
    )
    assert completion.stdout.split() == ["hooks"], completion.stdout
    status = json.loads(root.run("fwman", "hooks", "status", "--json").stdout)
    assert status["package"] == {"name": "fwman", "leftovers": []} and status["installed"] is True
    assert {f["path"] for f in status["files"]} >= {"/etc/kernel/postinst.d/fwman", "/usr/libexec/fwman/fwman-catchup"}
    assert "owned by the Debian package fwman" in root.run("fwman", "hooks", "status").stdout
    assert "the Debian package fwman installed the hooks" in root.run("fwman", "hooks", "install").stdout

    # the kernel hook, as the kernel's postinst runs it; then the unit's command, as systemd would at boot
    root.sh(f"mkdir -p {HOOK_ROOT}/lib/modules")
    out = _hook(root, "/etc/kernel/postinst.d", kver)
    assert f"run-parts: executing /etc/kernel/postinst.d/fwman {kver} /boot/vmlinuz-{kver}" in out
    assert f"no module source configured: {kver} marked pending" in out
    assert root.exists(f"{HOOK_ROOT}/var/lib/fwman/modules/{kver}.pending") and not root.exists(STATE)
    assert "marked pending" in _hook(root, "/etc/kernel/header_postinst.d", kver)
    _hook(root, "/etc/kernel/postrm.d", kver)  # the removal hook never fails a kernel removal
    root.sh(f"FWMAN_ROOT={HOOK_ROOT} /usr/libexec/fwman/fwman-catchup")
    assert root.exists(f"{HOOK_ROOT}/var/lib/fwman/modules/current.stamp")

    # state fwman would have written, and an edit of the conffile: an upgrade keeps all of it
    backup = b"\x55\xaa" + bytes(range(256)) * 4
    (tmp_path / "card0.rom").write_bytes(backup)
    root.put(tmp_path / "card0.rom", BACKUP)
    root.write_text(f"{STATE}/modules/source.json", "{}\n")
    root.write_text(f"{STATE}/dkms-block.json", json.dumps({"removed": [], "apt_pin": "/etc/apt/preferences.d/x"}))
    root.write_text("/etc/apt/preferences.d/fwman-nvidia-dkms", APT_PIN_TEXT)
    # kmod owns /etc/depmod.d on an owner's machine; a base root without a kernel has no kmod: then the directory
    # is the test's own (made for the file below), and stays after the purge as any directory fwman did not make
    made_dirs = set() if root.exists("/etc/depmod.d") else {"/etc/depmod.d"}
    root.write_text(
        "/etc/depmod.d/fwman.conf", "# Written by fwman (`fwman modules build`)\noverride nvidia * updates/fwman\n"
    )
    config = root.read_text("/etc/fwman/config.toml") + '\n[forks]\nmine = "/srv/git/nvidia.git"\n'
    root.write_text("/etc/fwman/config.toml", config)

    upgrade = higher_version(deb, tmp_path)
    install_deb(root, upgrade)
    assert root.run("dpkg-query", "-W", "-f=${Version}", "fwman").stdout == f"{deb_version(release.name)}+test1"
    assert root.read_text("/etc/fwman/config.toml") == config and root.exists(f"{STATE}/modules/source.json")
    assert root.run("fwman", "--version").stdout.strip() == f"fwman, version {__version__}"

    # remove: the programs go; conffiles (the hooks among them), the unit's enablement and all state stay
    root.run("apt-get", "remove", "-y", "-q", "fwman")
    listed = " ".join(shlex.quote(f) for f in files)
    script = f'for f in {listed}; do if [ ! -d "$f" ] && {{ [ -e "$f" ] || [ -L "$f" ]; }}; then echo "$f"; fi; done'
    present = root.sh(script).stdout.split()
    assert sorted(present) == sorted(conffiles)
    assert not root.exists("/usr/lib/fwman") and root.exists(WANTS)
    assert "/usr/lib/fwman/bin/python is gone (fwman uninstalled?)" in _hook(root, "/etc/kernel/postinst.d", kver)

    # purge: nothing of the package is left; its state goes, the cards' backups stay
    out = root.run("apt-get", "purge", "-y", "-q", "fwman").stdout
    assert f"the cards' firmware backups stay in {STATE}/backups" in out
    assert root.sh("dpkg-query -W fwman", check=False).returncode != 0
    assert root.run("ls", STATE).stdout.split() == ["backups"]
    copied = tmp_path / "back.rom"
    root.get(BACKUP, copied)
    assert copied.read_bytes() == backup
    for gone in (WANTS, "/etc/fwman", "/etc/depmod.d/fwman.conf", "/etc/apt/preferences.d/fwman-nvidia-dkms"):
        assert not root.exists(gone), gone
    assert os.path.lexists(WANTS) == host_wants
    # what apt brought for the package's Recommends (g++, patch: the fork's toolchain, issue 39) is other packages'
    # files, which stay after fwman's purge (apt autoremove keeps one another installed package suggests): left out
    brought = sorted(installed_packages(root) - packages_before)
    theirs = set(root.sh(f"dpkg -L {' '.join(brought)}").stdout.splitlines()) if brought else set()
    # and the alternatives their scripts made (update-alternatives: /usr/bin/c++ -> /etc/alternatives/c++)
    alternatives = root.sh("find / -xdev -lname '/etc/alternatives/*' -print", timeout=600).stdout.splitlines()
    theirs |= {p for p in alternatives if brought} | {f"/etc/alternatives/{Path(p).name}" for p in alternatives}

    # a find of the whole root: what the install added and the purge left is apt's own bookkeeping, the files the
    # test itself put there (the package files it installed, the hooks' temp root, the backup) and nothing else
    after = _tree(root)
    ours = (f"/root/{deb.name}", f"/root/{upgrade.name}", HOOK_ROOT)
    mine = {p for p in after - before - theirs - made_dirs if not p.startswith(APT_STATE) and not p.startswith(ours)}
    assert mine == {STATE, f"{STATE}/backups", os.path.dirname(BACKUP), BACKUP}, sorted(mine)
    assert sorted(p for p in before - after if not p.startswith(APT_STATE)) == []


def test_make_deb_refuses_a_release_it_does_not_build_for() -> None:
    require_tools("make")
    proc = subprocess.run(["make", "-C", str(REPO), "deb", "RELEASE=sid"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "RELEASE=sid is not a release the package is built for: bookworm:12 trixie:13" in proc.stderr
    assert not (REPO / "build/deb/sid").exists()  # refused before anything was copied or built
