"""Story: a driver version move (issue 35), on a real Debian 12 root with real apt, dpkg, depmod and kbuild.

The owner's machine (the owner layer: bookworm, GRUB, the first kernel) gets the story's update kernel too, so two
kernels are installed; fwman's .deb is installed with apt. The fork (tests/support/forkrepo.py, served by git
daemon) carries a branch per release; this story's own copy adds a commit on ``560.35.03-p2p`` that refuses
the update kernel with ``#error``, as a branch that does not support a newer kernel does. The owner built
``565.77-p2p`` for both kernels. NVIDIA's user space is two stand-in packages (tests/support/nvpackages.py) at
565.77, 570.86.16 and 560.35.03 in a local apt repository; 565.77 is installed and held (``fwman userspace hold``), and
a CDI spec for Podman and Docker written for it (``/etc/cdi/nvidia.yaml``, by a stand-in ``nvidia-ctk``).

An LXC-style container root beside it carries its own user space, installed from a stand-in of NVIDIA's ``.run``
(tests/support/nvpackages.py); the owner has the installers of the versions the story moves to, with their
SHA-256.

The steps run in file order on one root:
0. a move that would leave the container behind (no installer, or one whose checksum is not the one given):
   refused, the root unchanged;
1. a move to 560.35.03, whose build fails for the update kernel: refused, exit 3, the root's files unchanged;
2. the move 565.77 -> 570.86.16: its dry run is its run; modules for both kernels, packages, libraries, hold,
   the container's user space and the CDI spec at 570.86.16, the audit consistent; a second move changes nothing;
3. after the (simulated) reboot the boot-time catch-up finds no 570.86.16 module loaded and names the rollback;
   ``--rollback`` restores the 565.77 set file for file;
4. a move to 570.86.16 stopped inside its commit (nvidia-ctk fails on the CDI spec) is left staged; run again it
   goes on from its record, and ``--rollback`` still restores the 565.77 set file for file.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.debroot import DebRoot, Kernels, install_deb, kernel_packages
from tests.support.forkrepo import REPO_NAME, GitDaemon, git_daemon, make_fork
from tests.support.nvpackages import (
    LIBDIR,
    NAMES,
    PACKAGES,
    install_nvidia_ctk,
    make_container_root,
    offer_user_space,
    run_file,
    stand_in_run,
)

V1, V2, V3 = "565.77", "570.86.16", "560.35.03"
#: what a move or a rollback may change, and so what "nothing changed" and "restored exactly" compare
COMPARED = ("/lib/modules", "/etc", "/usr/lib/x86_64-linux-gnu", "/var/lib/fwman", "/boot", "/srv/containers")
CONTAINER = "/srv/containers/trainer"
#: files in COMPARED that others write (the catch-up's stamp of the kernels it saw; apt's own state)
NOT_COMPARED = ("/var/lib/fwman/modules/current.stamp", "/etc/ld.so.cache")


def _git(cwd: Path, *argv: str) -> None:
    env = {"GIT_AUTHOR_NAME": "story", "GIT_AUTHOR_EMAIL": "story@localhost", "GIT_COMMITTER_NAME": "story",
           "GIT_COMMITTER_EMAIL": "story@localhost", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # fmt: skip
    proc = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"git {' '.join(argv)}: {proc.stderr}"


def _fork_refusing(base: Path, branch: str, kernel: str) -> None:
    """Make the story's fork in ``base`` with ``branch`` refusing ``kernel`` (its unsupported.mk names it)."""
    bare = make_fork(base, [])
    work = base / "refuse"
    _git(base, "clone", "-q", "-b", branch, str(bare), str(work))
    (work / "kernel-open/unsupported.mk").write_text(f"NV_UNSUPPORTED_KERNELS := {kernel}\n")
    _git(work, "commit", "-q", "-am", f"{branch}: does not support {kernel} yet")
    _git(work, "push", "-q", "origin", branch)


def snapshot(root: DebRoot) -> dict[str, str]:
    """Return {path: sha256 and mode, or the link's target} of every file under COMPARED, and the packages."""
    find = "find " + " ".join(COMPARED) + r" -xdev \( -type f -o -type l \) -printf '%y %m %p %l\n' 2>/dev/null"
    out: dict[str, str] = {}
    files = []
    for line in root.sh(find, check=False).stdout.splitlines():
        kind, mode, path, *target = line.split(" ", 3)
        if path in NOT_COMPARED:
            continue
        if kind == "l":
            out[path] = f"-> {target[0] if target else ''}"
        else:
            out[path] = mode
            files.append(path)
    sums = root.sh("xargs -0 -r sha256sum", input_text="\0".join(files), check=False).stdout
    for line in sums.splitlines():
        digest, path = line.split("  ", 1)
        out[path] += f" {digest}"
    out["dpkg -l"] = hashlib.sha256(root.sh("dpkg-query -W -f '${Package} ${Version} ${Status}\\n'").stdout.encode()
                                    ).hexdigest()  # fmt: skip
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Return the paths that differ, one line each (added, removed, changed)."""
    return sorted(
        [f"+ {p}" for p in after.keys() - before.keys()]
        + [f"- {p}" for p in before.keys() - after.keys()]
        + [f"~ {p}" for p in before.keys() & after.keys() if before[p] != after[p]]
    )


@dataclass
class Owner:
    """The story's machine and what the steps hand on."""

    root: DebRoot
    kernels: list[str]
    fork: GitDaemon
    #: the installer of each version the story moves to and its SHA-256 (what an owner copies from NVIDIA's page)
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def to(self, version: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        """Run ``fwman driver move --json --to VERSION`` with the container and its installer, then ``extra``."""
        path, digest = self.runs[version]
        return self.move("--to", version, "--container-root", CONTAINER, "--run", path, "--run-sha256", digest, *extra)

    def fwman(self, *argv: str) -> tuple[int, str, str]:
        """Run the installed fwman in the root; return (exit status, stdout, stderr)."""
        proc = self.root.sh(shlex.join(["fwman", *argv]), check=False, timeout=3600)
        return proc.returncode, proc.stdout, proc.stderr

    def move(self, *argv: str) -> tuple[int, dict[str, Any], str]:
        """Run ``fwman driver move --json ARGV``; return (exit status, the document or {}, stderr)."""
        code, out, err = self.fwman("driver", "move", "--json", *argv)
        return code, (json.loads(out) if out.strip().startswith("{") else {}), err

    def module(self, kver: str, field_: str) -> str:
        """Return ``modinfo -F FIELD`` of fwman's installed nvidia.ko for ``kver``."""
        return self.root.sh(f"modinfo -F {field_} /lib/modules/{kver}/updates/fwman/nvidia.ko").stdout.strip()

    def package_versions(self) -> dict[str, str]:
        """Return the installed versions of the stand-in packages."""
        out = self.root.sh("dpkg-query -W -f '${Package} ${Version}\\n' " + " ".join(NAMES)).stdout
        return dict(line.split() for line in out.splitlines())


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels], deb: Path) -> Iterator[Owner]:
    """Return the owner's machine: two kernels with the 565.77 modules, the 565.77 user space held."""
    tarball, kernels = layer
    base = tmp_path_factory.mktemp("move-forge")
    _fork_refusing(base, f"{V3}-p2p", kernels.update)
    with git_daemon(base) as daemon:
        root = DebRoot.create(tmp_path_factory.mktemp("move"), tarball)
        try:
            root.sh("apt-get update -q")
            install_deb(root, deb)
            config = root.read_text("/etc/fwman/config.toml")
            root.write_text("/etc/fwman/config.toml", config + f'\n[forks]\nstory = "{daemon.url(REPO_NAME)}"\n')
            root.sh(f"apt-get install -y -q {' '.join(kernel_packages(kernels.update))}", timeout=1800)
            proc = root.sh(f"fwman modules build --all --fork story --branch {V1}-p2p 2>&1", check=False, timeout=3600)
            assert proc.returncode == 0, f"the owner's build of {V1}-p2p exit {proc.returncode}:\n{proc.stdout[-4000:]}"
            offer_user_space(root, V1, [V2, V3])  # V3's too: the move to V3 is refused for its build
            install_nvidia_ctk(root)  # the Podman/Docker CDI spec, /etc/cdi/nvidia.yaml, written for 565.77
            make_container_root(root, CONTAINER, V1)  # an LXC-style root with its own user space, from the .run
            runs = {}
            for version in (V2, V3):
                path = f"/root/{run_file(version)}"
                root.write_text(path, stand_in_run(version))
                runs[version] = (path, hashlib.sha256(stand_in_run(version).encode()).hexdigest())
            root.sh("fwman userspace hold && fwman modules catchup")
            yield Owner(root, [kernels.first, kernels.update], daemon, runs)
        finally:
            root.close()


def test_a_container_s_user_space_is_not_left_behind(owner: Owner) -> None:
    """Without NVIDIA's installer, or with one whose checksum is not the one given: refused, nothing changed."""
    before = snapshot(owner.root)
    code, _, err = owner.move("--to", V2, "--container-root", CONTAINER)
    assert code == 3 and f"({CONTAINER}) carries its own user space ({V1})" in err and "--run" in err, err
    path, _ = owner.runs[V2]
    code, _, err = owner.move("--to", V2, "--container-root", CONTAINER, "--run", path, "--run-sha256", "0" * 64)
    assert code == 3 and f"is not the {'0' * 64} given" in err, err
    assert diff(before, snapshot(owner.root)) == []


def test_a_move_whose_build_fails_for_one_kernel_is_refused_with_nothing_changed(owner: Owner) -> None:
    before = snapshot(owner.root)
    code, doc, err = owner.to(V3)
    assert code == 3, f"the move to {V3} (its branch refuses {owner.kernels[1]}) exit {code}:\n{err[-4000:]}"
    assert doc == {}, doc
    assert f"the {V3} modules do not build for {owner.kernels[1]}" in err and "nothing was changed" in err, err
    assert "kernel-open/nvidia/nv-pci.c" in err, err  # where the build failed
    assert diff(before, snapshot(owner.root)) == [], "the refused move changed the root"
    assert not owner.root.exists("/var/lib/fwman/move") and not owner.root.exists("/var/lib/fwman/driver-move.json")
    for kver in owner.kernels:
        assert owner.module(kver, "version") == V1


def test_a_move_brings_every_kernel_the_user_space_and_the_hold_to_the_new_version(owner: Owner) -> None:
    before = snapshot(owner.root)
    owner.notes["before"] = before
    code, dry, err = owner.to(V2, "--dry-run")
    assert code == 0 and dry["dry_run"] is True and dry["changed"] is False, err[-3000:]
    assert diff(before, snapshot(owner.root)) == [], "the dry run changed the root"
    code, run, err = owner.to(V2)
    assert code == 0, f"`fwman driver move --to {V2}` exit {code}:\n{err[-5000:]}"
    assert run["actions"] == dry["actions"], "the dry run is not the plan the run applied"
    assert run["move"]["from_version"] == V1 and run["move"]["to_version"] == V2
    assert run["move"]["stage"] == "committed" and run["move"]["kernels"] == owner.kernels
    for kver in owner.kernels:  # modules for every kernel, built for it, recorded
        assert owner.module(kver, "version") == V2 and owner.module(kver, "vermagic").split()[0] == kver
        manifest = json.loads(owner.root.read_text(f"/var/lib/fwman/modules/{kver}.json"))
        assert manifest["branch"] == f"{V2}-p2p", manifest
    # the user space: the packages and the libraries they carry, at V2, and the hold moved to V2
    assert owner.package_versions() == {n: f"{V2}-1" for n in NAMES}
    assert owner.root.exists(f"/lib/firmware/nvidia/{V2}/gsp_ga10x.bin")
    libs = owner.root.sh(f"ls {LIBDIR}").stdout.split()
    assert {f"{lib}.{V2}" for lib in PACKAGES.values()} <= set(libs)
    assert not {f"{lib}.{V1}" for lib in PACKAGES.values()} & set(libs)
    pin = owner.root.read_text("/etc/apt/preferences.d/fwman-nvidia-userspace")
    assert pin.count(f"Pin: version {V2}-1") == len(NAMES) and V1 not in pin, pin
    hold = json.loads(owner.root.read_text("/var/lib/fwman/userspace-hold.json"))
    assert hold["packages"] == {n: f"{V2}-1" for n in NAMES}
    policy = owner.root.sh("apt-cache policy libcuda1").stdout
    assert f"Candidate: {V2}-1" in policy, policy
    # the container's own user space, from NVIDIA's installer of V2
    inside = owner.root.sh(f"ls -l {CONTAINER}{LIBDIR}").stdout
    assert f"libcuda.so.1 -> libcuda.so.{V2}" in inside and f"libcuda.so.{V1}" not in inside, inside
    assert run["move"]["containers"] == [CONTAINER]
    # the CDI spec Podman and Docker inject from: written again, it mounts the V2 libraries
    spec = owner.root.read_text("/etc/cdi/nvidia.yaml")
    assert f"libcuda.so.{V2}" in spec and f".so.{V1}" not in spec, spec
    assert "regenerate the CDI spec /etc/cdi/nvidia.yaml for 570.86.16" in " ".join(run["actions"])
    # a kernel installed later builds V2: the module source record names its branch
    assert json.loads(owner.root.read_text("/var/lib/fwman/modules/source.json"))["branch"] == f"{V2}-p2p"
    code, out, err = owner.fwman("audit", "--offline", "--json", "--container-root", CONTAINER)
    audit = json.loads(out)
    rows = audit["rows"]
    # no GPU here: the CDI spec's device node /dev/nvidia0 is absent, which the audit names (and nothing else)
    wrong = [
        r for r in rows
        if r["status"] == "mismatch"
        and not (r["component"].startswith("CDI spec") and r["detail"].startswith("host paths gone: /dev/nvidia0;"))
    ]  # fmt: skip
    assert wrong == [], f"the audit after the move finds mismatches:\n{json.dumps(wrong, indent=1)}"
    moved = re.compile(r"(.*\.ko \(.*\)|.*\.so|GSP firmware|CDI spec nvidia\.com/gpu|container .*)")
    versions = {r["component"]: r["version"] for r in rows if moved.fullmatch(r["component"]) and r["version"]}
    assert set(versions.values()) == {V2}, json.dumps(rows, indent=1)
    for wanted in [*(f".ko ({kver})" for kver in owner.kernels), "libcuda.so", "GSP firmware"]:
        assert any(wanted in component for component in versions), f"no {wanted} row: {json.dumps(rows, indent=1)}"
    # again: nothing to do
    code, again, err = owner.to(V2)
    assert code == 0 and again["changed"] is False and again["actions"] == [], again
    code, out, _ = owner.fwman("driver", "move")
    assert code == 0 and f"move {V1} -> {V2}: committed" in out, out


def test_after_a_failed_check_the_rollback_restores_the_previous_set_exactly(owner: Owner) -> None:
    before = owner.notes.get("before")
    if before is None:
        pytest.skip("the move step did not run")
    # the (simulated) reboot: the unit's catch-up finds no 570.86.16 module loaded and names the way back
    code, out, err = owner.fwman("modules", "catchup")
    assert code == 0, err[-3000:]
    assert f"after the driver move {V1} -> {V2}, no nvidia module is loaded" in out + err, out + err
    assert "fwman driver move --rollback" in out + err
    code, dry, err = owner.move("--rollback", "--dry-run")
    assert code == 0 and dry["dry_run"] is True, err[-3000:]
    code, run, err = owner.move("--rollback")
    assert code == 0, f"`fwman driver move --rollback` exit {code}:\n{err[-5000:]}"
    assert run["actions"] == dry["actions"] and run["changed"] is True
    after = snapshot(owner.root)
    moved = [d for d in diff(before, after) if "/var/lib/fwman/driver-move.json" not in d]
    assert moved == [], "the rollback did not restore the previous set exactly:\n" + "\n".join(moved)
    for kver in owner.kernels:
        assert owner.module(kver, "version") == V1
    assert owner.package_versions() == {n: f"{V1}-1" for n in NAMES}
    code, doc, _ = owner.move()
    assert doc["move"]["stage"] == "rolled-back" and doc["kept"] is False, doc


def test_an_interrupted_move_goes_on_and_its_rollback_still_restores_the_first_set(owner: Owner) -> None:
    """A move stopped inside its commit (here: nvidia-ctk fails on the CDI spec, after the modules, the initramfs
    and the packages are in) is left ``staged``; run again, it goes on from its record, and ``--rollback``
    puts back the set kept by the first attempt, not the half-moved one."""
    before = owner.notes.get("before")
    if before is None or owner.move()[1].get("move", {}).get("stage") != "rolled-back":
        pytest.skip("the move and its rollback did not run")
    ctk = "/usr/local/bin/nvidia-ctk"
    owner.root.sh(f"mv {ctk} {ctk}.real && printf '#!/bin/sh\\necho broken >&2\\nexit 1\\n' > {ctk} && chmod 755 {ctk}")
    try:
        code, _, err = owner.to(V2)
    finally:
        owner.root.sh(f"mv {ctk}.real {ctk}")
    assert code != 0 and "nvidia-ctk cdi generate" in err and "broken" in err, f"exit {code}:\n{err[-3000:]}"
    code, doc, _ = owner.move()
    assert doc["move"]["stage"] == "staged" and doc["move"]["from_version"] == V1, doc
    for kver in owner.kernels:  # the commit got as far as the modules before it stopped
        assert owner.module(kver, "version") == V2
    code, run, err = owner.to(V2)
    assert code == 0, f"the resumed move exit {code}:\n{err[-5000:]}"
    assert run["move"]["stage"] == "committed" and run["move"]["from_version"] == V1, run["move"]
    spec = owner.root.read_text("/etc/cdi/nvidia.yaml")
    assert f"libcuda.so.{V2}" in spec and f".so.{V1}" not in spec, spec
    assert owner.package_versions() == {n: f"{V2}-1" for n in NAMES}
    code, _, err = owner.move("--rollback")
    assert code == 0, f"`fwman driver move --rollback` exit {code}:\n{err[-5000:]}"
    moved = [d for d in diff(before, snapshot(owner.root)) if "/var/lib/fwman/driver-move.json" not in d]
    assert moved == [], "the rollback after a resumed move did not restore the first set:\n" + "\n".join(moved)
