"""Story: the pre-flight before a kernel lands (issue 26), on a real Debian 12 root with real apt.

The owner's machine (the owner layer: bookworm, GRUB, the first kernel) follows two kernel tracks
(tests/support/kerneltracks.py: ``story-kernel-update`` and ``story-kernel-broken``, metapackages of a local apt
repository whose version 2 depends on the story's update kernel and on its newest, "broken", kernel: Debian's
real image and header packages). Two tracks because Debian's own ``linux-image-amd64`` follows the newest ABI
only, and the story needs apt to offer a kernel the fork builds and one it refuses. So ``apt-get -s
dist-upgrade`` offers both kernels, as it offers a new ABI to an owner with the metapackage.

The fork (tests/support/forkrepo.py) refuses the newest kernel with ``#error`` in ``kernel-open/nvidia/nv-pci.c``.
The steps run in file order on one root and assert what an owner would check: the verdict lines and JSON, what
real ``apt-get -s dist-upgrade`` then does, that nothing was installed, and that a second pre-flight builds
nothing.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.debroot import DebRoot, Kernels, install_deb, installed_packages, kernel_packages
from tests.support.env import REPO
from tests.support.forkrepo import BRANCH, GitDaemon, story_tree
from tests.support.kerneltracks import offer_kernels

FORK_NAME = "story"
PIN = "/etc/apt/preferences.d/fwman-kernel-preflight"
TRACKS = ("story-kernel-update", "story-kernel-broken")


@dataclass
class Owner:
    """The story's machine."""

    root: DebRoot
    kernels: Kernels
    fork: GitDaemon

    def fwman(self, *argv: str, timeout: float = 1800) -> tuple[int, str, str]:
        """Run the installed fwman in the root; return (exit status, stdout, stderr)."""
        proc = self.root.sh(shlex.join(["fwman", *argv]), check=False, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr

    def preflight(self, *argv: str) -> tuple[int, dict[str, Any], str]:
        """Run ``fwman modules preflight --json ARGV``; return (exit status, the document, stderr)."""
        code, out, err = self.fwman("modules", "preflight", "--json", *argv)
        assert out.strip().startswith("{"), f"`fwman modules preflight --json {' '.join(argv)}` exit {code}:\n{err}"
        doc: dict[str, Any] = json.loads(out)
        return code, doc, err

    def simulate(self) -> str:
        """Return what real ``apt-get -s dist-upgrade`` says in the root."""
        proc = self.root.sh("apt-get -s dist-upgrade 2>&1", check=False)
        assert proc.returncode == 0, f"apt-get -s dist-upgrade exit {proc.returncode}:\n{proc.stdout[-3000:]}"
        return proc.stdout


def _kernel(doc: dict[str, Any], kver: str) -> dict[str, Any]:
    for entry in doc["kernels"]:
        if entry["kernel"] == kver:
            return dict(entry)
    raise AssertionError(f"the pre-flight does not list {kver}: {[k['kernel'] for k in doc['kernels']]}")


def _error_line(tmp: Path, broken: str, patches: list[str]) -> int:
    """Return the line of the fork's ``#error`` in kernel-open/nvidia/nv-pci.c of the tree the story serves, as
    built: with fwman's compat patches the pre-flight applied for that kernel (``patches``: its record's list),
    which move the lines below their hunk."""
    tree = story_tree(tmp / "tree", [broken])
    for name in patches:
        shipped = REPO / "fwman/compat" / name
        if shipped.is_file():  # fwman's own; an owner's patches.d file is not in this story
            subprocess.run(["patch", "-p1", "-s", "-i", str(shipped)], cwd=tree, check=True)
    lines = (tree / "kernel-open/nvidia/nv-pci.c").read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.startswith("#error"))


@pytest.fixture(scope="module")
def owner(
    tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path, fork: GitDaemon
) -> Iterator[Owner]:
    """Return the owner's machine: fwman installed, the fork configured and built for the first kernel, the two
    kernel tracks at version 1 with version 2 in the local repository."""
    tarball, kernels = layer
    root = DebRoot.create(tmp_path_factory.mktemp("preflight"), tarball)
    try:
        root.sh("apt-get update -q")
        install_deb(root, deb)
        offer_kernels(root, kernels.first, {TRACKS[0]: kernels.update, TRACKS[1]: kernels.broken})
        config = root.read_text("/etc/fwman/config.toml")
        config += f'\n[forks]\n{FORK_NAME} = "{fork.url()}"\n\n[modules]\nfork = "{FORK_NAME}"\nbranch = "{BRANCH}"\n'
        root.write_text("/etc/fwman/config.toml", config)
        owner = Owner(root, kernels, fork)
        code, out, err = owner.fwman("modules", "build", "--kernel", kernels.first)
        assert code == 0, f"the owner's first build for {kernels.first} exit {code}:\n{out}{err[-3000:]}"
        yield owner
    finally:
        root.close()


def test_apt_offers_the_two_newer_kernels(owner: Owner) -> None:
    """The setting: real `apt-get -s dist-upgrade` would install both newer kernels (image and headers); the
    package enabled the daily pre-flight's timer (and the boot-time catch-up still)."""
    etc, lib = "/etc/systemd/system", "/lib/systemd/system"
    wants = {
        f"{etc}/timers.target.wants/fwman-preflight.timer": f"{lib}/fwman-preflight.timer",
        f"{etc}/multi-user.target.wants/fwman-catchup.service": f"{lib}/fwman-catchup.service",
    }
    for link, target in wants.items():
        assert owner.root.sh(f"readlink {link}", check=False).stdout.strip() == target, f"{link} is not enabled"
    sim = owner.simulate()
    for kver in (owner.kernels.update, owner.kernels.broken):
        for package in kernel_packages(kver):
            assert re.search(rf"^Inst {re.escape(package)} \(", sim, re.MULTILINE), (
                f"apt does not offer {package}:\n{sim}"
            )


def test_preflight_says_safe_and_will_not_build_with_the_error(owner: Owner, tmp_path: Path) -> None:
    """The buildable kernel is "safe to install"; the refused one "will not build" with the #error's file:line."""
    update, broken = owner.kernels.update, owner.kernels.broken
    code, doc, err = owner.preflight()
    assert code == 4, f"a kernel that will not build is exit 4 (verification failed), got {code}:\n{err[-3000:]}"
    good, bad = _kernel(doc, update), _kernel(doc, broken)
    assert good["status"] == "safe" and good["verdict"] == "safe to install", good
    line = _error_line(tmp_path, broken, [Path(p).name for p in bad["result"]["patches"]])
    failure = bad["result"]["failure"]
    assert bad["status"] == "will-not-build", bad
    assert (failure["file"], failure["line"]) == ("kernel-open/nvidia/nv-pci.c", line), failure
    assert "#error" in failure["error"] and "does not support this kernel release" in failure["error"], failure
    assert bad["verdict"].startswith(f"will not build: kernel-open/nvidia/nv-pci.c:{line}: "), bad["verdict"]
    # the build used the object cache the owner's first build filled, and it was built against those headers
    assert good["result"]["object_cache_hit"] is True, good["result"]
    assert f"linux-headers-{update}" in good["result"]["headers"], good["result"]["headers"]
    assert any(p.startswith("linux-kbuild-") for p in good["result"]["headers"]), good["result"]["headers"]
    # progress on stderr while it built: the phases of the long build
    assert f"{broken}: " in err and "kernel-open" in err, err[-3000:]
    # nothing installed, nothing written outside fwman's state and cache
    assert not installed_packages(owner.root, "linux-*") & set(kernel_packages(update) + kernel_packages(broken))
    for kver in (update, broken):
        assert not owner.root.exists(f"/lib/modules/{kver}"), f"the pre-flight left /lib/modules/{kver}"
        assert not owner.root.exists(f"/usr/src/linux-headers-{kver}")
        assert not owner.root.exists(f"/var/lib/fwman/modules/{kver}.json")
    assert owner.root.sh("ls /var/cache/fwman/preflight 2>/dev/null", check=False).stdout.split() == []
    assert not owner.root.exists(PIN), "a pre-flight without --hold held a kernel"
    # the text form says the same in one line each (from the record: nothing built again)
    code, out, _ = owner.fwman("modules", "preflight")
    assert code == 4
    assert re.search(rf"^{re.escape(update)} \(offered by apt\): safe to install \(recorded\)$", out, re.MULTILINE), out
    assert f"{broken} (offered by apt): will not build: kernel-open/nvidia/nv-pci.c:{line}: " in out, out


def test_hold_keeps_the_unbuildable_kernel_back_in_real_apt(owner: Owner) -> None:
    """--hold: real `apt-get -s dist-upgrade` no longer installs the refused kernel and keeps its track back."""
    update, broken = owner.kernels.update, owner.kernels.broken
    code, doc, err = owner.preflight("--hold")
    assert code == 4, err[-2000:]
    assert doc["changed"] is True and doc["newly_held"] == [broken] and doc["held_kernels"] == [broken], doc
    pin = owner.root.read_text(PIN)
    assert f"linux-image-{broken}" in pin and "Pin-Priority: -1" in pin, pin
    sim = owner.simulate()
    assert not re.search(rf"^Inst linux-image-{re.escape(broken)} ", sim, re.MULTILINE), sim
    assert re.search(rf"^Inst linux-image-{re.escape(update)} ", sim, re.MULTILINE), sim
    kept = sim.split("The following packages have been kept back:", 1)
    assert len(kept) == 2 and TRACKS[1] in kept[1].split("\n", 2)[1], f"apt does not keep {TRACKS[1]} back:\n{sim}"
    # again: the same hold, nothing changes, and the held kernel is pre-flighted from fwman's record
    code, doc, _ = owner.preflight("--hold")
    assert code == 4 and doc["changed"] is False and doc["actions"] == [], doc
    entry = _kernel(doc, broken)
    assert entry["offered"] is False and entry["held"] is True and entry["result"]["cached"] is True, entry
    status = owner.fwman("modules", "status", "--json")
    assert status[0] == 0, status[2]
    last = json.loads(status[1])["preflight"]
    assert last["held_kernels"] == [broken] and {k["kernel"]: k["status"] for k in last["kernels"]} == {
        update: "safe",
        broken: "will-not-build",
    }, last
    code, text, _ = owner.fwman("modules", "status")
    assert f"{broken}: will not build: kernel-open/nvidia/nv-pci.c:" in text and "HELD back by fwman" in text, text
    code, metrics, _ = owner.fwman("metrics", "write", "--stdout")
    assert f'fwman_preflight_kernel_builds{{kernel="{broken}"}} 0' in metrics, metrics
    assert f'fwman_preflight_kernel_builds{{kernel="{update}"}} 1' in metrics, metrics
    assert f'fwman_preflight_kernel_held{{kernel="{broken}"}} 1' in metrics, metrics


def test_a_second_preflight_builds_nothing(owner: Owner) -> None:
    """Same kernels, commit and patches: every verdict comes from the record; no download, no build, no log."""
    logs = "cat /var/log/fwman/preflight-*.log | sha256sum"
    before = owner.root.sh(logs).stdout
    code, doc, err = owner.preflight()
    assert code == 4
    assert all(k["result"]["cached"] is True for k in doc["kernels"]), doc["kernels"]
    assert "downloading" not in err and "running make" not in err, err
    assert owner.root.sh(logs).stdout == before, "a second pre-flight wrote a build log"
    assert owner.root.sh("ls /var/cache/fwman/preflight 2>/dev/null", check=False).stdout.split() == []


def test_release_lifts_the_hold(owner: Owner) -> None:
    """--release removes fwman's pin: apt installs the refused kernel again; a second release changes nothing."""
    broken = owner.kernels.broken
    code, doc, _ = owner.preflight("--release")
    assert code == 0 and doc["changed"] is True and doc["released_kernels"] == [broken], doc
    assert not owner.root.exists(PIN)
    assert re.search(rf"^Inst linux-image-{re.escape(broken)} ", owner.simulate(), re.MULTILINE)
    code, doc, _ = owner.preflight("--release")
    assert code == 0 and doc["changed"] is False, doc


def test_a_passing_preflight_releases_fwmans_hold(owner: Owner) -> None:
    """A patch in patches.d makes the refused kernel build: the next pre-flight says so and lifts fwman's hold."""
    broken = owner.kernels.broken
    code, doc, _ = owner.preflight("--hold")
    assert code == 4 and owner.root.exists(PIN), doc
    patch = (
        f"Kernels: ^{re.escape(broken)}$\n"
        "Build the story's newest kernel: drop it from the branch's refusal list.\n"
        "--- a/kernel-open/unsupported.mk\n+++ b/kernel-open/unsupported.mk\n"
        f"@@ -1 +1 @@\n-NV_UNSUPPORTED_KERNELS := {broken}\n+NV_UNSUPPORTED_KERNELS :=\n"
    )
    owner.root.sh("apt-get install -y -q patch")  # patches.d needs patch(1) (docs/modules.md)
    owner.root.write_text("/etc/fwman/patches.d/10-story.patch", patch)
    code, doc, err = owner.preflight()
    entry = _kernel(doc, broken)
    assert code == 0, f"exit {code}: {entry}\n{err[-3000:]}"
    assert entry["status"] == "safe" and entry["result"]["cached"] is False, entry
    # the owner's patch, then fwman's compat patch where these headers declare the four-argument
    # pci_resize_resource() (Debian 12's 6.1.0-53 and later): the stand-in tree calls the three-argument one
    assert entry["result"]["patches"][0] == "10-story.patch", entry
    assert set(entry["result"]["patches"][1:]) <= {"pci-resize-resource-exclude-bars.patch"}, entry
    assert doc["released_kernels"] == [broken] and doc["held_kernels"] == [] and doc["changed"] is True, doc
    assert not owner.root.exists(PIN)
