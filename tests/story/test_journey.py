"""The journey "get peer-to-peer working" (docs/journey-p2p.md) on a real Debian 12 root: `fwman plan`, then
`fwman apply` from a bare root with two kernels, then `fwman apply` again.

The root is the owner layer (bookworm, GRUB, the first kernel) with a second kernel and its headers installed
before fwman, a stand-in NVIDIA user-space package at the fork's version, fwman's .deb installed with apt, and
the story's fork named in ``[forks]`` and chosen in
``[modules]``. The commands are the ones docs/journey-p2p.md marks ``<!-- journey -->``, run as the page shows
them; each step asserts what the owner would check: files, manifests, the DKMS pin, a second apply that changes
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

from tests.support.debroot import DebRoot, Kernels, install_deb, kernel_packages
from tests.support.forkrepo import BRANCH, GitDaemon

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "journey-p2p.md"
KERNEL_PAGE = REPO / "docs" / "journey-kernel-update.md"
FORK_NAME = "story"


def journey_commands(page: Path = PAGE) -> list[list[str]]:
    """Return the commands of ``page``'s ``<!-- journey -->`` block, as argv lists (``sudo`` left out: the story
    runs as root in the root)."""
    text = page.read_text(encoding="utf-8")
    block = text.split("<!-- journey -->", 1)[1].split("```console", 1)[1].split("```", 1)[0]
    commands = [shlex.split(line[2:]) for line in block.splitlines() if line.startswith("$ ")]
    return [argv[1:] if argv[0] == "sudo" else argv for argv in commands]


@dataclass
class Box:
    """The story's machine."""

    root: DebRoot
    kernels: Kernels

    def fwman(self, *argv: str, timeout: float = 1800) -> tuple[int, str, str]:
        """Run the installed fwman in the root; return (exit status, stdout, stderr)."""
        proc = self.root.sh(shlex.join(["fwman", *argv]), check=False, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr

    def manifest(self, kver: str) -> dict[str, Any] | None:
        """Return fwman's manifest of ``kver``, None when it has none."""
        path = f"/var/lib/fwman/modules/{kver}.json"
        if not self.root.exists(path):
            return None
        doc: dict[str, Any] = json.loads(self.root.read_text(path))
        return doc


USERSPACE = "libnvidia-ml1"
USERSPACE_VERSION = "570.86.16-1"


def _userspace_deb(out: Path) -> None:
    """Build an empty stand-in of NVIDIA's ``libnvidia-ml1`` at the fork's version with the real dpkg-deb."""
    pkg = out.parent / "pkg"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN/control").write_text(
        f"Package: {USERSPACE}\nVersion: {USERSPACE_VERSION}\nArchitecture: all\n"
        "Maintainer: fwman tests <t@example.invalid>\nDescription: stand-in for an NVIDIA user-space package\n"
    )
    subprocess.run(["dpkg-deb", "-b", str(pkg), str(out)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def box(
    tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path, fork: GitDaemon
) -> Iterator[Box]:
    """Return the bare box: two kernels with headers, fwman installed, the fork configured (removed at the end)."""
    tarball, kernels = layer
    root = DebRoot.create(tmp_path_factory.mktemp("journey"), tarball)
    try:
        root.sh("apt-get update -q")
        root.sh(f"apt-get install -y -q {' '.join(kernel_packages(kernels.update))}", timeout=1800)
        # NVIDIA's user space at the fork's version, as a package (a stand-in: NVIDIA's packages cannot be here)
        stand_in = tmp_path_factory.mktemp("userspace") / f"{USERSPACE}_{USERSPACE_VERSION}_all.deb"
        _userspace_deb(stand_in)
        install_deb(root, stand_in)  # /tmp is a fresh tmpfs each time: the file goes to /root
        install_deb(root, deb)
        config = root.read_text("/etc/fwman/config.toml")
        config += f'\n[forks]\n{FORK_NAME} = "{fork.url()}"\n\n[modules]\nfork = "{FORK_NAME}"\nbranch = "{BRANCH}"\n'
        root.write_text("/etc/fwman/config.toml", config)
        yield Box(root, kernels)
    finally:
        root.close()


def test_the_page_s_journey_is_plan_then_apply_twice() -> None:
    """The commands this story runs are the page's: if the page changes, the story must follow."""
    assert journey_commands() == [["fwman", "plan"], ["fwman", "apply"], ["fwman", "apply"]]


def test_plan_apply_apply_from_a_bare_box(box: Box) -> None:
    kernels = [box.kernels.first, box.kernels.update]
    assert all(box.manifest(k) is None for k in kernels), "the box is not bare: fwman built before the journey"
    plan_cmd, apply_cmd, again_cmd = journey_commands()

    # 1. the plan: the modules for both kernels from the configured fork, the DKMS pin; nothing written
    code, out, err = box.fwman(*plan_cmd[1:])
    assert code == 0, f"`fwman plan` exit {code}:\n{out}\n{err}"
    assert f"target: driver 570.86.16: fork {FORK_NAME} branch {BRANCH} (/etc/fwman/config.toml: [modules]" in out, out
    for kver in kernels:
        assert f"would build the patched modules for {kver} from fork {FORK_NAME} branch {BRANCH}" in out, out
    assert "would write /etc/apt/preferences.d/fwman-nvidia-dkms" in out, out
    assert "userspace: the NVIDIA user-space packages held at their version" in out, out
    # no GPU in a root: doctor's half is unknown, and the plan says so instead of guessing
    assert "doctor could not run here: no NVIDIA GPU found" in out, out
    assert all(box.manifest(k) is None for k in kernels) and not box.root.exists(
        "/etc/apt/preferences.d/fwman-nvidia-dkms"
    )
    _, planned, _ = box.fwman(*plan_cmd[1:], "--json")
    steps = [s for part in json.loads(planned)["parts"] for s in part["steps"]]

    # 2. apply: every step of the plan, said part by part; the modules of both kernels installed
    code, out, err = box.fwman(*apply_cmd[1:], "--json")
    assert code == 0, f"`fwman apply` exit {code}:\n{out}\n{err[-6000:]}"
    done = json.loads(out)
    assert done["changed"] is True and done["applied"] == steps, (done["applied"], steps)
    assert "== modules: " in err and "== dkms: " in err, err[-3000:]
    for kver in kernels:
        manifest = box.manifest(kver)
        assert manifest is not None and manifest["branch"] == BRANCH, (kver, manifest)
        assert box.root.exists(f"/lib/modules/{kver}/updates/fwman/nvidia.ko"), kver
    pin = box.root.read_text("/etc/apt/preferences.d/fwman-nvidia-dkms")
    assert "Pin-Priority: -1" in pin, pin
    # the user space held at its version, with real apt reading the pin
    policy = box.root.sh(f"apt-cache policy {USERSPACE}").stdout
    assert f"{USERSPACE_VERSION}" in policy, policy
    code, held, _ = box.fwman("userspace", "status", "--json")
    assert json.loads(held)["held"] is True and USERSPACE in json.loads(held)["packages"], held
    # the hooks are the package's (dpkg owns them): apply writes none of its own beside them
    assert (
        not box.root.exists("/etc/kernel/postinst.d/fwman")
        or "fwman" in box.root.sh("dpkg -S /etc/kernel/postinst.d/fwman", check=False).stdout
    )

    # 3. apply again: nothing to do
    before = {k: box.manifest(k) for k in kernels}
    code, out, err = box.fwman(*again_cmd[1:])
    assert code == 0 and "nothing to do: fwman's part is in place" in out, f"{out}\n{err[-3000:]}"
    assert {k: box.manifest(k) for k in kernels} == before
    code, out, _ = box.fwman("apply", "--json")
    assert code == 0 and json.loads(out)["changed"] is False and json.loads(out)["applied"] == []


def test_apply_check_without_gpus_cannot_say_ready(box: Box) -> None:
    """After the journey fwman's part is in place; with no GPU doctor cannot verify, and --check says so (exit 4)."""
    code, out, err = box.fwman("apply", "--check", "--json")
    assert code == 4, f"{out}\n{err}"
    doc = json.loads(out)
    assert doc["parts"] == [] and doc["at_target"] is False
    assert re.search(r"no NVIDIA GPU found", doc["doctor_error"] or ""), doc


def test_the_kernel_update_page_s_journey(box: Box) -> None:
    """docs/journey-kernel-update.md with a kernel the fork refuses: apt succeeds, status says it is not safe to
    boot, apply stops at the modules part naming it, and the next boot stays on a kernel with working modules."""
    commands = journey_commands(KERNEL_PAGE)
    assert [argv[0] for argv in commands] == ["apt-get", "fwman", "fwman", "fwman"]
    kver = box.kernels.broken
    install, status, apply, status_again = ([a.replace("KVER", kver) for a in argv] for argv in commands)
    proc = box.root.sh(shlex.join(install) + " 2>&1", check=False, timeout=1800)
    assert proc.returncode == 0, f"the kernel install failed (fwman must never fail it):\n{proc.stdout[-4000:]}"
    code, out, err = box.fwman(*status[1:], "--json")
    entry = {k["kernel"]: k for k in json.loads(out)["kernels"]}[kver]
    assert entry["safe_to_boot"] is False and entry["next_boot"] is False, entry
    code, out, err = box.fwman(*apply[1:])
    assert code != 0 and "apply stopped at modules:" in err and kver in err, f"{code}\n{out}\n{err[-3000:]}"
    assert box.manifest(kver) is None
    code, out, _ = box.fwman(*status_again[1:])
    assert code in (0, 4) and kver in out, out
