"""`make system-deps` (tests/support/system_deps.py) with real apt over a local repository of stand-in packages.

The install step's rules are driven in a Debian root (tests/support/debroot.py) whose only apt source is a local
repository of packages built with ``dpkg-deb``: a needed dependency upgrade is taken and said with its reason, an
unrelated upgrade is not, a package whose maintainer scripts enable and start a unit (as dh_installsystemd's and
update-rc.d's snippets do) is installed with its unit left disabled and nothing started, and a package that forks
a daemon behind policy-rc.d's back fails the install, naming it, with the daemon stopped. The Makefile's list
itself is read with ``make -n``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.debroot import DebRoot, base_tarball
from tests.support.env import REPO
from tests.support.tools import is_root, require_tools

pytestmark = pytest.mark.system

LOCAL = "/srv/fwsd-repo"
#: the installer and the two package files `python3 -m tests.support.system_deps` needs, copied into the root
INSTALLER = ("tests/__init__.py", "tests/support/__init__.py", "tests/support/system_deps.py")

UNIT = (
    "[Unit]\nDescription=fwsd stand-in service\n[Service]\nExecStart=/bin/sleep 600\n"
    "[Install]\nWantedBy=multi-user.target\n"
)
#: a SysV script whose start leaves a mark, so a start that got past policy-rc.d shows
INITD = """#!/bin/sh
### BEGIN INIT INFO
# Provides:          fwsd-svc
# Required-Start:    $remote_fs
# Required-Stop:     $remote_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: fwsd stand-in service
### END INIT INFO
case "$1" in start) touch /var/lib/fwsd-started ;; esac
exit 0
"""
#: what dh_installsystemd and dh_installinit write into a postinst (debhelper 13), in short
SVC_POSTINST = """#!/bin/sh
set -e
if [ "$1" = configure ]; then
    deb-systemd-helper unmask fwsd-svc.service >/dev/null || true
    if deb-systemd-helper --quiet was-enabled fwsd-svc.service; then
        deb-systemd-helper enable fwsd-svc.service >/dev/null || true
    else
        deb-systemd-helper update-state fwsd-svc.service >/dev/null || true
    fi
    update-rc.d fwsd-svc defaults >/dev/null
    invoke-rc.d fwsd-svc start || true
    deb-systemd-invoke start fwsd-svc.service >/dev/null || true
fi
"""
#: a package that starts a daemon itself, past policy-rc.d (what the running check is for)
DAEMON_POSTINST = "#!/bin/sh\nset -e\nsetsid /bin/sleep 4242 </dev/null >/dev/null 2>&1 &\nexit 0\n"


def _package(name: str, version: str, depends: str = "", files: dict[str, str] | None = None,
             postinst: str = "") -> str:  # fmt: skip
    """Return the shell that builds package ``name`` ``version`` into /root/fwsd (dpkg-deb -b)."""
    d = f"/root/fwsd/{name}-{version}"
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: fwman tests <tests@localhost>\n"
        + (f"Depends: {depends}\n" if depends else "")
        + f"Description: stand-in {name} for the install step's test\n"
    )
    script = [f"mkdir -p {d}/DEBIAN", f"printf '%s' {shlex.quote(control)} > {d}/DEBIAN/control"]
    for path, text in (files or {}).items():
        mode = "755" if path.startswith("/etc/init.d/") else "644"
        script += [f"mkdir -p {d}$(dirname {path})", f"printf '%s' {shlex.quote(text)} > {d}{path}",
                   f"chmod {mode} {d}{path}"]  # fmt: skip
    if postinst:
        script += [f"printf '%s' {shlex.quote(postinst)} > {d}/DEBIAN/postinst", f"chmod 755 {d}/DEBIAN/postinst"]
    script.append(f"dpkg-deb -b {d} /root/fwsd/{name}_{version}_all.deb >/dev/null")
    return " && ".join(script)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebRoot]:
    """A Debian root with fwsd-lib 1 and fwsd-other 1 installed, and a local repository (its only apt source)
    offering fwsd-lib 2, fwsd-other 2, fwsd-app (needs fwsd-lib >= 2), fwsd-svc and fwsd-daemon."""
    if not is_root():
        pytest.skip("apt, chroot and loop devices need root")
    require_tools("mmdebstrap", "unshare", "mkfs.ext4", package="mmdebstrap")
    r = DebRoot.create(tmp_path_factory.mktemp("sysdeps"), base_tarball(), size_gb=4)
    try:
        for rel in INSTALLER:
            r.put(REPO / rel, f"/srv/fwman/{rel}")
        svc_files = {"/lib/systemd/system/fwsd-svc.service": UNIT, "/etc/init.d/fwsd-svc": INITD}
        builds = [
            _package("fwsd-lib", "1"),
            _package("fwsd-lib", "2"),
            _package("fwsd-other", "1"),
            _package("fwsd-other", "2"),
            _package("fwsd-app", "1", depends="fwsd-lib (>= 2)"),
            _package("fwsd-svc", "1", files=svc_files, postinst=SVC_POSTINST),
            _package("fwsd-daemon", "1", postinst=DAEMON_POSTINST),
        ]
        r.sh(
            " && ".join(
                [
                    *builds,
                    "dpkg -i /root/fwsd/fwsd-lib_1_all.deb /root/fwsd/fwsd-other_1_all.deb >/dev/null",
                    f"mkdir -p {LOCAL} && cp /root/fwsd/*.deb {LOCAL}/ && rm {LOCAL}/fwsd-lib_1_all.deb "
                    f"{LOCAL}/fwsd-other_1_all.deb",
                    f"cd {LOCAL} && apt-ftparchive packages . > Packages",
                    "rm -f /etc/apt/sources.list && rm -rf /etc/apt/sources.list.d && mkdir /etc/apt/sources.list.d",
                    f"echo 'deb [trusted=yes] file:{LOCAL} ./' > /etc/apt/sources.list.d/fwsd.list",
                    "rm -f /usr/sbin/policy-rc.d",
                ]
            )
        )
        yield r
    finally:
        r.close()


def _version(root: DebRoot, name: str) -> str:
    return root.run("dpkg-query", "-W", "-f=${Version}", name).stdout


def _enabled(root: DebRoot) -> str:
    """Return every link under /etc/systemd and /etc/rc?.d naming fwsd, one a line (empty: none)."""
    return root.sh("find /etc/systemd /etc/rc?.d -name '*fwsd*' | sort").stdout


def test_a_needed_upgrade_is_taken_and_said_an_unrelated_one_is_not_and_an_enabled_unit_is_disabled(
    root: DebRoot,
) -> None:
    r = root.sh("cd /srv/fwman && python3 -m tests.support.system_deps fwsd-app fwsd-svc 2>&1", check=False)
    assert r.returncode == 0, r.stdout
    out = r.stdout
    # the dependency upgrade apt needs, in one line with its reason
    assert re.search(r"^upgrading fwsd-lib 1 -> 2: needed by fwsd-app$", out, re.MULTILINE), out
    assert (_version(root, "fwsd-lib"), _version(root, "fwsd-app")) == ("2", "1")
    # an upgrade nothing asked for needs is not taken, nor said
    assert _version(root, "fwsd-other") == "1" and "fwsd-other" not in out
    # the unit the package enabled (systemd links and SysV start links) is disabled again, and nothing started
    assert _version(root, "fwsd-svc") == "1"
    assert re.search(r"^disabled fwsd-svc\.service \(system unit\): the install enabled it$", out, re.MULTILINE)
    assert re.search(r"^disabled fwsd-svc \(SysV script\): the install enabled it$", out, re.MULTILINE)
    links = _enabled(root).splitlines()
    assert not [ln for ln in links if ln.startswith("/etc/systemd/")], links
    assert not [ln for ln in links if Path(ln).name.startswith("S")], links  # SysV start links turned to K links
    assert not root.exists("/var/lib/fwsd-started"), "a start got past policy-rc.d"
    assert not root.exists("/usr/sbin/policy-rc.d"), "the installer's policy-rc.d was left behind"
    # a second run has nothing to do
    again = root.sh("cd /srv/fwman && python3 -m tests.support.system_deps fwsd-app fwsd-svc 2>&1", check=False)
    assert again.returncode == 0 and "are installed" in again.stdout, again.stdout


def test_a_daemon_started_past_policy_rc_d_fails_the_install_naming_it_and_is_stopped(root: DebRoot) -> None:
    r = root.sh(
        "cd /srv/fwman && python3 -m tests.support.system_deps fwsd-daemon; echo rc=$?; "
        "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline 2>/dev/null; echo; done | grep -q 'slee[p] 4242' "
        "|| echo none-left",
        check=False,
    )
    assert "rc=1" in r.stdout, r.stdout + r.stderr
    assert "refused: the install started services (stopped again): process" in r.stderr
    assert "/bin/sleep 4242" in r.stderr
    assert r.stdout.strip().endswith("none-left"), r.stdout


def test_the_plan_says_what_it_would_upgrade_and_installs_nothing(root: DebRoot) -> None:
    root.sh("dpkg -r fwsd-app >/dev/null && dpkg -i /root/fwsd/fwsd-lib_1_all.deb >/dev/null", check=False)
    if _version(root, "fwsd-lib") != "1":
        pytest.fail("could not put fwsd-lib back to version 1")
    r = root.sh("cd /srv/fwman && python3 -m tests.support.system_deps --plan fwsd-app 2>&1", check=False)
    assert r.returncode == 0, r.stdout
    assert "upgrading fwsd-lib 1 -> 2: needed by fwsd-app" in r.stdout
    assert "would install 1 packages: fwsd-app=1" in r.stdout
    assert _version(root, "fwsd-lib") == "1"
    assert root.sh("dpkg-query -W -f='${Status}' fwsd-app 2>&1", check=False).stdout.find("install ok installed") < 0


def _packages() -> list[str]:
    dry = subprocess.run(["make", "-n", "system-deps"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in dry.splitlines() if "tests.support.system_deps" in ln)
    return [w for w in shlex.split(line)[3:] if not w.startswith("--")]


def test_the_makefile_asks_for_what_the_tests_need_and_no_server_or_point_release() -> None:
    packages = _packages()
    assert {"libarchive-tools", "mmdebstrap", "git", "7zip", "dkms"} <= set(packages)
    assert "prometheus" not in packages  # only its promtool is unpacked
    assert not [p for p in packages if p.startswith("git-daemon")]  # git carries the daemon; those packages run it
    assert not [p for p in packages if re.match(r"linux-(headers|image)-\d", p)]  # chosen from apt at install time
