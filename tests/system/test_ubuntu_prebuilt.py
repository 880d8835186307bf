"""Ubuntu's prebuilt NVIDIA modules in a real root: apt and dpkg install them, fwman audits and blocks them.

A Debian root (tests/support/debroot.py: the story suite's cached base tarball, loop-mounted, private namespaces)
is given Ubuntu 22.04's os-release and a local apt repository of stand-in packages named, versioned, laid out
and scripted like Ubuntu's (tests/support/ubuntu.py, facts in docs/ubuntu.md): two HWE 6.8 kernels, their
``linux-modules-nvidia-580-open-<kver>`` with the signed-module layout and the real postinst (depmod, the
kernel trigger file), the ``-generic-hwe-22.04`` metapackage that provides ``nvidia-dkms-580-open``, and the
driver stand-ins. Then, with the real apt:

1. with only the old DKMS pin (``*nvidia*dkms*``), ``nvidia-driver-580-open`` still installs a stock kernel
   module: through the metapackage, which provides the pinned DKMS package (the hole this closes);
2. with fwman's pin, the same install and ``apt-get -s install linux-modules-nvidia-...`` refuse;
3. once the prebuilt modules are installed (dpkg runs their postinst), ``fwman audit`` on the root's files
   reports them with the fix, ``fwman dkms block`` writes the pin, and the kernel update apt offered for the
   prebuilt modules is gone.

Run under ``flock /tmp/fwman-roots.lock`` with the other root-making tests.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ubuntu
from tests.support.debroot import DebRoot, base_tarball
from tests.support.env import FwmanEnv
from tests.support.tools import is_root, require_tools

REPO = "/srv/ubuntu-stand-ins"
LIST = "/etc/apt/sources.list.d/ubuntu-stand-ins.list"
PIN = "/etc/apt/preferences.d/fwman-nvidia-dkms"
#: the pin an fwman from before this change wrote: DKMS packages only
OLD_PIN = "Package: *nvidia*dkms*\nPin: release *\nPin-Priority: -1\n"
#: apt reads only the stand-in repository: the root's Debian sources are never fetched
APT = f"-o Dir::Etc::sourcelist={LIST} -o Dir::Etc::sourceparts=-"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DebRoot]:
    if not is_root() or not os.path.exists("/dev/loop-control"):
        pytest.skip("needs root and loop devices (a Debian root in an image file)")
    require_tools("mmdebstrap", "unshare", "mkfs.ext4", "dpkg-deb", "dpkg-scanpackages")
    work = tmp_path_factory.mktemp("ubuntu-root")
    repo = work / "repo"
    ubuntu.write_repo(ubuntu.archive(), work / "build", repo)
    r = DebRoot.create(work / "image", base_tarball(), size_gb=4)
    try:
        r.put(repo, REPO)
        r.sh(
            f"rm -f /etc/os-release && printf %s {shlex.quote(ubuntu.JAMMY_OS_RELEASE)} > /usr/lib/os-release "
            "&& ln -s ../usr/lib/os-release /etc/os-release"
        )
        r.write_text(LIST, f"deb [trusted=yes] file:{REPO} ./\n")
        r.sh(f"apt-get {APT} update -q")
    except BaseException:
        r.close()
        raise
    yield r
    r.close()


def _apt_s(root: DebRoot, args: str) -> tuple[int, str]:
    proc = root.sh(f"apt-get {APT} -s {args}", check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _fwman_pin(tmp: Path) -> str:
    """Return the pin `fwman dkms block` writes (run on an empty root: no DKMS module to remove)."""
    (tmp / "var/lib/dkms").mkdir(parents=True)
    require_tools("dkms")
    r = FwmanEnv()("dkms", "block", "--root", str(tmp))
    assert r.code == 0, r.stderr
    return (tmp / PIN.lstrip("/")).read_text()


def test_the_old_dkms_pin_lets_prebuilt_modules_in_and_fwmans_pin_refuses_them(root: DebRoot, tmp_path: Path) -> None:
    root.write_text(PIN, OLD_PIN)
    code, out = _apt_s(root, "install nvidia-driver-580-open")
    assert code == 0 and f"Inst {ubuntu.META} " in out  # the metapackage stands in for the pinned DKMS package
    assert "Inst nvidia-dkms-580-open" not in out

    pin = _fwman_pin(tmp_path / "pinroot")
    assert "# Ubuntu's prebuilt, Canonical-signed stock NVIDIA modules" in pin  # the reason, in the file
    root.write_text(PIN, pin)
    code, out = _apt_s(root, "install nvidia-driver-580-open")
    assert code != 0 and "nvidia-dkms-580-open" in out and f"Inst {ubuntu.META}" not in out
    code, out = _apt_s(root, f"install linux-modules-nvidia-580-open-{ubuntu.NEW_ABI}")
    assert code != 0 and "Inst linux-modules-nvidia" not in out
    policy = root.sh(f"apt-cache {APT} policy {ubuntu.META}").stdout
    assert "Candidate: (none)" in policy and "-1" in policy
    root.sh(f"rm -f {PIN}")


def test_installed_prebuilt_modules_are_audited_and_blocked(root: DebRoot, tmp_path: Path) -> None:
    # the owner's state: the older kernel with its prebuilt modules, through the metapackage, by apt and dpkg
    root.sh(f"apt-get {APT} install -y -q {ubuntu.META}={ubuntu.OLD_VERSION}", timeout=900)
    kver = ubuntu.OLD_ABI
    listed = root.read_text(f"/var/lib/dpkg/info/linux-modules-nvidia-580-open-{kver}.list")
    assert f"/lib/modules/{kver}/kernel/nvidia-580-open/nvidia.ko" in listed
    assert root.exists(f"/usr/lib/linux/triggers/{kver}")  # the postinst ran: the kernel trigger file
    assert "nvidia.ko" in root.read_text(f"/lib/modules/{kver}/modules.dep")  # and depmod -a -F System.map
    code, out = _apt_s(root, "dist-upgrade")
    assert code == 0 and f"Inst linux-modules-nvidia-580-open-{ubuntu.NEW_ABI} " in out  # the next kernel's

    # fwman reads the root's own files: os-release, dpkg's database, the module trees
    copy = tmp_path / "copy"
    for path in ("/usr/lib/os-release", "/var/lib/dpkg", "/lib/modules", "/boot"):
        (copy / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        root.get(path, copy / path.lstrip("/"))
    (copy / "etc").mkdir()
    (copy / "etc/os-release").symlink_to("../usr/lib/os-release")
    (copy / "var/lib/dkms").mkdir(parents=True)
    run = FwmanEnv()
    audit = run("audit", "--json", "--offline", "--root", str(copy))
    assert audit.code == 4
    doc = audit.json()
    row = next(r for r in doc["rows"] if r["component"] == f"Ubuntu prebuilt NVIDIA modules ({kver})")
    assert row["status"] == "mismatch" and row["version"] == ubuntu.DRIVER
    assert f"from /lib/modules/{kver}/kernel/nvidia-580-open for {kver}" in row["detail"]
    assert row["fix"].startswith(
        f"apt-get purge {ubuntu.META} linux-modules-nvidia-580-open-{kver}; then `fwman dkms block`"
    )
    installed = {p["name"]: p for p in doc["prebuilt_modules"]}
    assert installed[ubuntu.META]["version"] == ubuntu.OLD_VERSION
    assert "nvidia-dkms-580-open" in installed[ubuntu.META]["provides"]

    blocked = run("dkms", "block", "--root", str(copy))
    assert blocked.code == 0, blocked.stderr
    root.put(copy / PIN.lstrip("/"), PIN)
    code, out = _apt_s(root, "dist-upgrade")
    assert code == 0 and "Inst linux-modules-nvidia" not in out and f"Inst {ubuntu.META}" not in out
    row = next(
        r
        for r in run("audit", "--json", "--offline", "--root", str(copy)).json()["rows"]
        if r["component"] == f"Ubuntu prebuilt NVIDIA modules ({kver})"
    )
    assert "fwman dkms block" not in row["fix"]  # the pin is in place: only the purge is left to do
