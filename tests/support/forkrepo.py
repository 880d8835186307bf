"""A P2P fork served the way owners reach one: a git repository with the fork's branch layout, over `git daemon`.

The repository copies the branch names of aikitoria/open-gpu-kernel-modules (fixtures/forge/branches.json, the
real 2025 list); ``570.86.16-p2p`` holds the stand-in module tree of tests/support/modules.py (FORK_TREE: the
real interface, five real modules that kbuild builds against the real headers), every other branch that tree
with its own ``version.mk``. Like the real fork, the tree needs g++ (a C++ object in nvidia-modeset's
kernel-independent part) and calls the three-argument ``pci_resize_resource()`` in ``nv-pci.c``: Debian 12's
current kernels (6.1.0-53 and later) break it exactly as they break the fork, and fwman's compat patch
(fwman/compat/, installed with the package) is what makes it build there. One change:

- the tree refuses the kernel releases listed in ``kernel-open/unsupported.mk`` with a compile error in
  ``nv-pci.c`` ("this branch does not support ..."), the way a real fork fails on a newer kernel: the story's
  "broken" kernel is chosen at test time, so the refusal is written at test time too.

``GitDaemon`` serves the bare repositories of a directory on 127.0.0.1 at a port chosen at run time and stops
the daemon (by its pid) when the context ends.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fixtures.forge import real_branch_lists
from tests.support.modules import FORK_TREE
from tests.support.modules import git_daemon as serve_with_git_daemon

FORK = "aikitoria/open-gpu-kernel-modules"
BRANCH = "570.86.16-p2p"
VERSION = "570.86.16"
REPO_NAME = "open-gpu-kernel-modules.git"

_REFUSAL = """
#if defined(NV_KERNEL_UNSUPPORTED)
#error "this branch does not support this kernel release (see kernel-open/unsupported.mk)"
#endif
"""
_KBUILD_REFUSAL = """
# Kernel releases this branch is known not to build for (a newer kernel's API): refused at compile time.
include $(src)/unsupported.mk
ccflags-y += $(if $(filter $(KERNELRELEASE),$(NV_UNSUPPORTED_KERNELS)),-DNV_KERNEL_UNSUPPORTED)
"""


def _git(cwd: Path, *argv: str) -> str:
    env = {"GIT_AUTHOR_NAME": "story", "GIT_AUTHOR_EMAIL": "story@localhost", "GIT_AUTHOR_DATE": "2025-01-30T12:00Z",
           "GIT_COMMITTER_NAME": "story", "GIT_COMMITTER_EMAIL": "story@localhost",
           "GIT_COMMITTER_DATE": "2025-01-30T12:00Z", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # fmt: skip
    proc = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"git {' '.join(argv)}: {proc.stderr}"
    return proc.stdout


def story_tree(dest: Path, unsupported: list[str]) -> Path:
    """Write the story's module tree (FORK_TREE with the refusal above) to ``dest`` and return it."""
    shutil.copytree(FORK_TREE, dest, symlinks=True)
    nv_pci = dest / "kernel-open/nvidia/nv-pci.c"
    nv_pci.write_text(nv_pci.read_text() + _REFUSAL)
    kbuild = dest / "kernel-open/Kbuild"
    kbuild.write_text(kbuild.read_text() + _KBUILD_REFUSAL)
    (dest / "kernel-open/unsupported.mk").write_text(f"NV_UNSUPPORTED_KERNELS := {' '.join(unsupported)}\n")
    return dest


def make_fork(base: Path, unsupported: list[str]) -> Path:
    """Return a bare repository ``base/open-gpu-kernel-modules.git`` with the fork's branches (see above)."""
    work = story_tree(base / "work", unsupported)
    _git(work, "init", "-q", "-b", BRANCH)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", f"P2P patch on {VERSION}")
    for branch in real_branch_lists()[FORK]:
        if branch == BRANCH:
            continue
        _git(work, "checkout", "-q", "-b", branch, BRANCH)
        m = re.match(r"^(\d+(?:\.\d+)*)(?:-p2p)?$", branch)
        if m:
            (work / "version.mk").write_text(
                (work / "version.mk").read_text().replace(f"NVIDIA_VERSION = {VERSION}", f"NVIDIA_VERSION = {m[1]}")
            )
            _git(work, "commit", "-q", "-am", f"driver {m[1]}")
    _git(work, "checkout", "-q", BRANCH)
    bare = base / REPO_NAME
    _git(base, "clone", "-q", "--bare", str(work), str(bare))
    shutil.rmtree(work)
    return bare


@dataclass
class GitDaemon:
    """A running ``git daemon`` serving ``base`` at ``root_url`` (``git://127.0.0.1:PORT``)."""

    base: Path
    root_url: str

    def url(self, name: str = REPO_NAME) -> str:
        """Return the git:// URL of repository ``name`` under the served directory."""
        return f"{self.root_url}/{name}"


@contextmanager
def git_daemon(base: Path) -> Iterator[GitDaemon]:
    """Serve the repositories under ``base`` with git daemon until the context ends (tests/support/modules.py's)."""
    with serve_with_git_daemon(base) as root_url:
        yield GitDaemon(base, root_url)
