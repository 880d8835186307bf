"""Shared setup of the module system tests (no tests here): temp roots with real Debian kernel headers.

A temp root is a directory fwman treats as ``/`` (``--root``). Its ``/lib/modules/KVER/build`` and ``source``
must be real header trees *inside* the root (LiveHost resolves links within it, as a chroot would), so the
arch directory (3 MB) is copied and the common directory (75 MB) is recreated as a tree of symbolic links to the
real files (``cp -as``, half a second); the arch tree's relative ``scripts`` link reaches the real kbuild through
a link at ``ROOT/usr/lib/linux-kbuild-6.1``. Nothing is written outside the temp directories.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.env import FIXTURES, FwmanEnv
from tests.support.kernels import installed_pair
from tests.support.tools import missing, require_tools

#: the installed pair of kernels whose pci_resize_resource() differs (tests/support/kernels.py; `make test` as
#: root installs one, chosen from what apt offers); without one, the pair bookworm offered when these tests were
#: written stands in, only for the names in a skip message
PAIR = installed_pair() or ("6.1.0-50-amd64", "6.1.0-53-amd64")
KERNEL_OK = PAIR[0]  # pci_resize_resource(dev, i, size): the stand-in fork tree builds
KERNEL_BAD = PAIR[1]  # pci_resize_resource(dev, i, size, exclude_bars): it fails in nv-pci.c
KERNELS = (KERNEL_OK, KERNEL_BAD)
FORK_TREE = FIXTURES / "kmod-tree" / "fork"
STOCK_DKMS = FIXTURES / "kmod-tree" / "stock-dkms"
SOURCE = "/src/fork"  # where tests put the fork tree inside a root (a host path)


def require_build_env(*kernels: str) -> None:
    """Skip unless running as root with make, gcc, depmod and the real headers of ``kernels``."""
    if os.geteuid() != 0:
        pytest.skip("module system tests need root (run `make test` as root)")
    require_tools("make", "gcc", "g++", "patch", "depmod", "modinfo")
    for kver in kernels:
        common = kver.removesuffix("-amd64") + "-common"
        if not Path(f"/usr/src/linux-headers-{kver}").is_dir() or not Path(f"/usr/src/linux-headers-{common}").is_dir():
            missing(
                f"needs linux-headers-{kver} (a pair whose pci_resize_resource() differs: tests/support/kernels.py)"
            )


#: fwman's compat patch for the four-argument pci_resize_resource() (fwman/compat/), by the name an owner masks it
COMPAT_PATCH = "pci-resize-resource-exclude-bars.patch"


def mask_compat(root: Path) -> None:
    """Turn fwman's compat patch off in ``root`` the way an owner can (an empty patches.d file of its name).

    The module tests need a kernel the stand-in fork does not build for: KERNEL_BAD, whose headers declare the
    four-argument pci_resize_resource(), is that kernel only without the compat patch, so every root starts with
    it masked; the tests of the compat patch itself call :func:`unmask_compat`.
    """
    patches = root / "etc/fwman/patches.d"
    patches.mkdir(parents=True, exist_ok=True)
    (patches / COMPAT_PATCH).write_bytes(b"")


def unmask_compat(root: Path) -> None:
    """Let fwman's compat patch apply in ``root`` again (undo :func:`mask_compat`)."""
    (root / "etc/fwman/patches.d" / COMPAT_PATCH).unlink(missing_ok=True)


def add_kernel(root: Path, kver: str, headers: bool = True) -> None:
    """Make ``kver`` an installed kernel of ``root`` (a module directory), with its headers or not; fwman's compat
    patch is masked in the root (:func:`mask_compat`)."""
    (root / "lib/modules" / kver).mkdir(parents=True, exist_ok=True)
    mask_compat(root)
    if headers:
        give_headers(root, kver)


def give_headers(root: Path, kver: str) -> None:
    """Install the real headers of ``kver`` into ``root`` the way linux-headers-KVER lays them out."""
    common = kver.removesuffix("-amd64") + "-common"
    src = root / "usr/src"
    src.mkdir(parents=True, exist_ok=True)
    kbuild = root / "usr/lib/linux-kbuild-6.1"
    if not kbuild.is_symlink():
        kbuild.parent.mkdir(parents=True, exist_ok=True)
        kbuild.symlink_to("/usr/lib/linux-kbuild-6.1")
    if not (src / f"linux-headers-{kver}").exists():
        subprocess.run(["cp", "-a", f"/usr/src/linux-headers-{kver}", str(src)], check=True)
    if not (src / f"linux-headers-{common}").exists():
        subprocess.run(["cp", "-as", f"/usr/src/linux-headers-{common}", str(src)], check=True)
        # fwman reads pci.h itself (the compat patches go by its declaration) through the root, where a link to
        # /usr/src/... is the root's own path, as in a chroot: the one header fwman reads is a real copy
        pci_h = src / f"linux-headers-{common}/include/linux/pci.h"
        pci_h.unlink()
        shutil.copy(f"/usr/src/linux-headers-{common}/include/linux/pci.h", pci_h)
    mod = root / "lib/modules" / kver
    mod.mkdir(parents=True, exist_ok=True)
    for name, target in (("build", f"/usr/src/linux-headers-{kver}"), ("source", f"/usr/src/linux-headers-{common}")):
        link = mod / name
        if link.is_symlink():
            link.unlink()
        link.symlink_to(target)


def put_source(root: Path, tree: Path = FORK_TREE) -> str:
    """Copy the stand-in fork tree into ``root`` and return its host path."""
    dest = root / SOURCE.lstrip("/")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(tree, dest, symlinks=True)
    return SOURCE


def seed_objects(root: Path, cache: Path) -> None:
    """Copy an object cache (``/var/cache/fwman/objects`` of another root) into ``root``."""
    dest = root / "var/cache/fwman/objects"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        shutil.copytree(cache, dest, symlinks=True)


def build_root(tmp: Path, kernels: tuple[str, ...] = KERNELS, cache: Path | None = None) -> Path:
    """Return a new root with ``kernels`` (and their headers), the fork tree at SOURCE, and a seeded cache."""
    root = tmp / "root"
    for kver in kernels:
        add_kernel(root, kver)
    put_source(root)
    if cache is not None:
        seed_objects(root, cache)
    return root


def run_fwman(root: Path, *argv: str, env: FwmanEnv | None = None) -> tuple[int, str, str]:
    """Run fwman in-process on ``root`` and return (exit status, stdout, stderr)."""
    result = (env or FwmanEnv())(*argv, "--root", str(root))
    return result.code, result.stdout, result.stderr


@pytest.fixture(scope="session")
def object_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the stand-in's kernel-independent objects once per session (through fwman) and return the cache.

    Tests seed their roots with it, so only their first kernel-open build per root costs anything. Memoised
    across modules: each test module that imports this fixture gets its own fixture definition.
    """
    require_build_env(KERNEL_OK)
    if "objects" not in _SEED:
        root = build_root(tmp_path_factory.mktemp("seed"), (KERNEL_OK,))
        code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)
        assert code == 0, out + err
        _SEED["objects"] = root / "var/cache/fwman/objects"
        _SEED["root"] = root
    return _SEED["objects"]


_SEED: dict[str, Path] = {}


def install_tiny_modules(root: Path, kver: str) -> None:
    """Install small ELF modules with NVIDIA's tags for ``kver`` into ``root`` the way a build installs them.

    fwman's own install actions (staged files, stored copy, depmod override, the real depmod) and a manifest:
    for tests about what happens to installed modules, without a compiler.
    """
    from fixtures.tinymod.elfgen import build_module, nvidia_tags
    from fwman.driver.build.install import install_modules
    from fwman.driver.build.manifest import Manifest, write_manifest
    from fwman.host.live import LiveHost

    host = LiveHost(str(root))
    (root / f"lib/modules/{kver}/kernel/drivers/video").mkdir(parents=True, exist_ok=True)
    built = {n: build_module(nvidia_tags("570.86.16", kver, name=n)) for n in ("nvidia", "nvidia-uvm")}
    entries, _ = install_modules(host, kver, built)
    write_manifest(host, Manifest(kver, "aikitoria", "570.86.16-p2p", "b" * 40, entries, "2026-12-01T10:00:00+00:00"))


# -- a fork served the way users reach one: a bare git repository, by path, file:// or git daemon -------------
P2P_BRANCH = "570.86.16-p2p"
_GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]


def make_fork_repo(bare: Path, tree: Path = FORK_TREE, branch: str = P2P_BRANCH) -> str:
    """Create bare repository ``bare`` whose ``branch`` holds ``tree`` (the stand-in fork), plus a tag of the same
    name pointing elsewhere (branches are refs/heads/ only); return the branch's commit."""
    work = bare.parent / f"{bare.name}.work"
    shutil.copytree(tree, work, symlinks=True)
    git = ["git", *_GIT_ID, "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"{branch}: the P2P patch"], check=True)
    subprocess.run([*git, "branch", branch], check=True)
    head = subprocess.run([*git, "rev-parse", branch], capture_output=True, text=True, check=True).stdout.strip()
    (work / "README.tag").write_text("a tag of the branch's name, elsewhere\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "not the branch"], check=True)
    subprocess.run([*git, "tag", branch], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    shutil.rmtree(work)
    return head


def commit_to_branch(bare: Path, branch: str, files: dict[str, str]) -> str:
    """Add a commit writing ``files`` (relative path -> text) on ``branch`` of bare repository ``bare``; return it."""
    work = bare.parent / f"{bare.name}.update"
    subprocess.run(["git", "clone", "-q", "-b", branch, str(bare), str(work)], check=True)
    for rel, text in files.items():
        (work / rel).write_text(text)
    git = ["git", *_GIT_ID, "-C", str(work)]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "update"], check=True)
    subprocess.run([*git, "push", "-q", "origin", f"HEAD:refs/heads/{branch}"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    shutil.rmtree(work)
    return head


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """Serve every repository under ``base`` with the real ``git daemon`` on 127.0.0.1; yield ``git://127.0.0.1:PORT``.

    The port is a free one the kernel picked; the daemon is stopped (and waited for) on exit.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={base}",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("git daemon did not start")
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def branch_with(bare: Path, base: str, branch: str, files: dict[str, str], date: str) -> str:
    """Create ``branch`` of bare repository ``bare`` from ``base`` plus a commit writing ``files``, committed
    (author and committer) at ``date`` (ISO 8601); return the commit."""
    work = bare.parent / f"{bare.name}.branch"
    subprocess.run(["git", "clone", "-q", "-b", base, str(bare), str(work)], check=True)
    for rel, text in files.items():
        (work / rel).write_text(text)
    git = ["git", *_GIT_ID, "-C", str(work)]
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"{branch}"], check=True, env=env)
    subprocess.run([*git, "push", "-q", "origin", f"HEAD:refs/heads/{branch}"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    shutil.rmtree(work)
    return head
