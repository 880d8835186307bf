"""Story: Debian 13's kernels through the pre-flight and the kernel hook, on a real trixie root (issue 40).

An owner's Debian 13 machine: a trixie root (tests/support/debroot.py ``base_tarball("trixie")``, cached), GRUB,
a 6.12 kernel with its headers (the release before trixie's newest), fwman's Debian 13 package installed with apt
(``make deb RELEASE=trixie``: tests/support/debpkg.py, ``FWMAN_DEB_TRIXIE=path`` reuses one), the story's fork
(tests/support/forkrepo.py: the stand-in module tree, refusing no kernel here) configured by name and built for
that kernel. Trixie names its kernels without an ABI number
(``6.12.117+deb13-amd64``); the kernels are chosen from the root's own ``apt-cache`` when the test runs, never
written here:

- the newest ``6.12`` release trixie offers (its own series), and
- the newest release of trixie-backports when it offers a newer series than 6.12 (the root gets a
  ``trixie-backports`` source made from its own Debian source); the steps for it are skipped, saying so, when
  the archive has none.

Kernel tracks (tests/support/kerneltracks.py: local metapackages whose version 2 depends on a chosen kernel's
real image and headers) make real ``apt-get -s dist-upgrade`` offer those kernels. Then, as an owner would:
``fwman modules preflight`` builds for each before it lands and says "safe to install" (or why not), installs
nothing; ``apt-get install`` of a kernel's image and headers runs the real kernel hooks, which build and install
fwman's patched modules (``modinfo -F vermagic``, ``modules status``, ``check-boot``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.debpkg import build_deb
from tests.support.debroot import (
    DEB13_KERNEL,
    DebRoot,
    base_tarball,
    install_deb,
    installed_packages,
    kernel_packages,
    offered_kernels,
)
from tests.support.forkrepo import BRANCH, GitDaemon, git_daemon, make_fork
from tests.support.kerneltracks import offer_kernels

FORK_NAME = "story"
STATE = "/var/lib/fwman"
#: trixie's own kernel series (Debian 13 released with Linux 6.12)
OWN_SERIES = "6.12"
TRACKS = ("story-kernel-trixie", "story-kernel-backports")
#: backports' packages have priority 100 (NotAutomatic, ButAutomaticUpgrades): a backports kernel PreDepends on
#: backports' newer linux-base, which apt then does not take for a dependency (`apt-get -s install` in the root:
#: "linux-base (>= 4.17~) but 4.12.1 is to be installed"). An owner who follows backports' kernels installs with
#: `-t trixie-backports` or pins their kernel packages as here (apt_preferences(5)).
BACKPORTS_PIN_FILE = "/etc/apt/preferences.d/owner-backports-kernels"
BACKPORTS_PIN = "Package: linux-*\nPin: release n=trixie-backports\nPin-Priority: 500\n"


def series(kver: str) -> str:
    """Return the ``MAJOR.MINOR`` series of a kernel release (``6.12`` of ``6.12.117+deb13-amd64``)."""
    return ".".join(kver.split(".")[:2])


@dataclass
class Trixie:
    """The owner's Debian 13 machine, and the kernels apt offers it."""

    root: DebRoot
    fork: GitDaemon
    first: str  #: the owner's running kernel: the 6.12 release before the newest
    own: str  #: the newest 6.12 release
    backports: str | None  #: the newest release of a newer series in trixie-backports (None: there is none)

    def offered(self) -> list[str]:
        """Return the kernels the story puts through the pre-flight and the hook."""
        return [self.own] + ([self.backports] if self.backports else [])

    def fwman(self, *argv: str, timeout: float = 1800) -> tuple[int, str, str]:
        """Run the installed fwman in the root; return (exit status, stdout, stderr)."""
        proc = self.root.sh(shlex.join(["fwman", *argv]), check=False, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr

    def status(self, kver: str) -> dict[str, Any]:
        """Return the ``modules status --json`` entry of ``kver``."""
        code, out, err = self.fwman("modules", "status", "--json")
        assert code == 0, f"`fwman modules status --json` exit {code}: {err[-3000:]}"
        for entry in json.loads(out)["kernels"]:
            if entry["kernel"] == kver:
                return dict(entry)
        raise AssertionError(f"`fwman modules status` does not list {kver}:\n{out[-3000:]}")

    def vermagic(self, kver: str) -> str:
        """Return ``modinfo -F vermagic`` of fwman's installed nvidia.ko for ``kver``."""
        path = f"/lib/modules/{kver}/updates/fwman/nvidia.ko"
        proc = self.root.sh(f"modinfo -F vermagic {path}", check=False)
        assert proc.returncode == 0, f"modinfo {path}: {proc.stderr.strip()} (fwman installed no module for {kver})"
        return proc.stdout.strip()


def backports_source(sources: str) -> str:
    """Return a deb822 stanza for trixie-backports made from the root's Debian source (its ``trixie`` stanza)."""
    for stanza in re.split(r"\n\s*\n", sources.strip()):
        m = re.search(r"(?im)^Suites:[ \t]*(.*)$", stanza)
        if m and "trixie" in m.group(1).split():
            return re.sub(r"(?im)^Suites:.*$", "Suites: trixie-backports", stanza) + "\n"
    raise AssertionError(f"the trixie root has no trixie source to make trixie-backports' from:\n{sources}")


@pytest.fixture(scope="module")
def trixie(tmp_path_factory: pytest.TempPathFactory, story_machine: None) -> Iterator[Trixie]:
    """Return the owner's trixie machine: GRUB and a 6.12 kernel, fwman's Debian 13 package, the fork configured
    and built for that kernel, the kernel tracks at version 1 (that kernel) with version 2 (the chosen kernels)
    offered."""
    deb = build_deb("trixie")
    root = DebRoot.create(tmp_path_factory.mktemp("trixie"), base_tarball("trixie"))
    forge = tmp_path_factory.mktemp("trixie-forge")
    try:
        sources = root.sh("cat /etc/apt/sources.list.d/*.sources").stdout
        root.write_text("/etc/apt/sources.list.d/trixie-backports.sources", backports_source(sources))
        root.write_text(BACKPORTS_PIN_FILE, BACKPORTS_PIN)
        root.sh("apt-get update -q", timeout=900)
        offered = offered_kernels(root, DEB13_KERNEL)
        own = [k for k in offered if series(k) == OWN_SERIES]
        assert len(own) >= 2, f"trixie offers fewer than two {OWN_SERIES} kernels with headers: {offered}"
        newer = [k for k in offered if tuple(map(int, series(k).split("."))) > (6, 12)]
        # the owner's running kernel, with its headers (which bring what the headers' tools need: libelf for objtool)
        root.sh(
            "update-grub && grub-editenv /boot/grub/grubenv create && "
            f"apt-get install -y -q {' '.join(kernel_packages(own[-2]))}",
            timeout=1800,
        )
        install_deb(root, deb)
        make_fork(forge, [])
        with git_daemon(forge) as daemon:
            config = root.read_text("/etc/fwman/config.toml")
            config += (
                f'\n[forks]\n{FORK_NAME} = "{daemon.url()}"\n\n[modules]\nfork = "{FORK_NAME}"\nbranch = "{BRANCH}"\n'
            )
            root.write_text("/etc/fwman/config.toml", config)
            machine = Trixie(root, daemon, own[-2], own[-1], newer[-1] if newer else None)
            code, out, err = machine.fwman("modules", "build", "--kernel", machine.first)
            assert code == 0, f"the owner's first build for {machine.first} exit {code}:\n{out}{err[-3000:]}"
            offer_kernels(root, machine.first, dict(zip(TRACKS, machine.offered(), strict=False)))
            yield machine
    finally:
        root.close()


def test_apt_offers_trixies_6_12_and_the_backports_series(trixie: Trixie) -> None:
    """The setting: real `apt-get -s dist-upgrade` would install each chosen kernel's image and headers."""
    sim = trixie.root.sh("apt-get -s dist-upgrade 2>&1").stdout
    for kver in trixie.offered():
        for package in kernel_packages(kver):
            assert re.search(rf"^Inst {re.escape(package)} \(", sim, re.MULTILINE), (
                f"apt does not offer {package}:\n{sim[-3000:]}"
            )
    assert series(trixie.own) == OWN_SERIES


def test_preflight_builds_each_kernel_before_it_lands(trixie: Trixie) -> None:
    """`fwman modules preflight` downloads each kernel's headers (trixie's names: linux-headers-KVER with its
    -common and linux-kbuild-SERIES... packages), builds the fork against them and says what it found; nothing
    is installed."""
    code, out, err = trixie.fwman("modules", "preflight", "--json")
    assert out.strip().startswith("{"), f"`fwman modules preflight --json` exit {code}:\n{err[-4000:]}"
    doc = json.loads(out)
    verdicts = {entry["kernel"]: entry for entry in doc["kernels"]}
    assert set(trixie.offered()) <= set(verdicts), f"the pre-flight checked {sorted(verdicts)}"
    own = verdicts[trixie.own]
    assert own["status"] == "safe" and own["verdict"] == "safe to install", _why(trixie, own)
    result = own["result"]
    assert f"linux-headers-{trixie.own}" in result["headers"], result["headers"]
    assert any(p.startswith("linux-kbuild-") for p in result["headers"]), result["headers"]
    assert result["nova_core"] is None, result  # 6.12 predates nova_core
    if trixie.backports:
        new = verdicts[trixie.backports]
        assert new["status"] == "safe", _why(trixie, new)
        if new["result"]["nova_core"] is not None:  # a 7.x kernel may carry nova_core: unsafe until blacklisted
            assert new["verdict"].startswith("builds, but NOT safe to boot: ") and "nova_core" in new["verdict"], new
        else:
            assert new["verdict"] == "safe to install", new
    assert code == 0, f"every kernel builds (nova_core is a boot question, not a build failure): exit {code}"
    for kver in trixie.offered():
        assert not installed_packages(trixie.root, "linux-*") & set(kernel_packages(kver))
        assert not trixie.root.exists(f"/lib/modules/{kver}"), f"the pre-flight left /lib/modules/{kver}"


def _why(trixie: Trixie, entry: dict[str, Any]) -> str:
    """Return a pre-flight verdict that is not "safe", with the end of its build log (what an owner reads)."""
    log = entry.get("result", {}).get("log") or f"/var/log/fwman/preflight-{entry['kernel']}.log"
    tail = trixie.root.sh(f"tail -n 40 {shlex.quote(log)}", check=False).stdout
    return f"{entry['kernel']}: {entry['verdict']}\n{json.dumps(entry.get('result'), indent=1)[:3000]}\n{tail}"


def _install_through_the_hook(trixie: Trixie, kver: str) -> str:
    """Install ``kver``'s image and headers with apt (its hooks run fwman's); return apt's output."""
    proc = trixie.root.sh(
        shlex.join(["apt-get", "install", "-y", "-q", *kernel_packages(kver)]) + " 2>&1", check=False, timeout=1800
    )
    assert proc.returncode == 0, f"`apt-get install` of {kver} failed (exit {proc.returncode}):\n{proc.stdout[-6000:]}"
    return proc.stdout


def test_the_hook_builds_trixies_6_12_kernel(trixie: Trixie) -> None:
    """`apt-get install linux-image-KVER linux-headers-KVER` of trixie's newest 6.12: the kernel hooks build and
    install fwman's patched modules for it; the kernel is safe to boot."""
    kver = trixie.own
    log = _install_through_the_hook(trixie, kver)
    assert re.search(rf"^\s*{re.escape(kver)}: ", log, re.MULTILINE), f"no build progress for {kver}:\n{log[-4000:]}"
    assert trixie.vermagic(kver).split()[0] == kver
    manifest = json.loads(trixie.root.read_text(f"{STATE}/modules/{kver}.json"))
    assert manifest["branch"] == BRANCH and manifest["kernel"] == kver, manifest
    entry = trixie.status(kver)
    assert entry["safe_to_boot"] is True, entry
    code, out, err = trixie.fwman("modules", "check-boot")
    assert code == 0, f"check-boot after {kver}: exit {code}:\n{out}{err}"


def test_the_hook_builds_the_backports_series(trixie: Trixie) -> None:
    """The same for trixie-backports' newest series, where the archive has one."""
    if trixie.backports is None:
        pytest.skip(f"trixie-backports offers no kernel series newer than {OWN_SERIES} today")
    kver = trixie.backports
    _install_through_the_hook(trixie, kver)
    assert trixie.vermagic(kver).split()[0] == kver
    entry = trixie.status(kver)
    if entry["nova_core"] and entry["nova_core"]["problem"]:  # a 7.x kernel's nova_core, not blacklisted
        assert entry["safe_to_boot"] is False and "nova_core" in str(entry["why"]), entry
    else:
        assert entry["safe_to_boot"] is True, entry
