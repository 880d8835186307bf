"""The story suite's shared parts: the cached Debian layers, fwman's .deb, the fork server (see docs/story-suite.md).

Everything here is session-scoped: the owner layer (a bookworm root with GRUB and a first kernel, from cached
tarballs), the package (built once), and one `git daemon` on 127.0.0.1 serving the story's fork, which refuses
the story's "broken" kernel. Each story module makes its own roots from the layer and removes them at the end.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.debpkg import deb
from tests.support.debroot import Kernels, owner_layer
from tests.support.forkrepo import GitDaemon, git_daemon, make_fork
from tests.support.tools import is_root

__all__ = ["deb"]

STORY = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    """Register the `story` marker (also in pyproject.toml's markers; registering twice is harmless)."""
    config.addinivalue_line("markers", "story: the story suite (tests/story): real Debian 12 roots, fwman's .deb")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/story/ `story` (root, mmdebstrap, loop devices, the network to the archive)."""
    for item in items:
        if STORY in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.story)


def require_story_machine() -> None:
    """Skip unless this is a Debian machine where the story suite can run (root, mmdebstrap, loop devices)."""
    if not is_root():
        pytest.skip("the story suite needs root (loop devices, mount namespaces, chroot)")
    for tool in ("mmdebstrap", "unshare", "mkfs.ext4", "git", "chroot"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            pytest.skip(f"the story suite needs {tool} (`make story` installs it as root)")
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("the story suite needs loop devices (/dev/loop-control)")


@pytest.fixture(scope="session")
def story_machine() -> None:
    """Skip the requesting test unless the story suite can run here (:func:`require_story_machine`)."""
    require_story_machine()


@pytest.fixture(scope="session")
def layer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Kernels]:
    """Return the owner layer tarball and its kernels (made on the first run of the day, cached after)."""
    require_story_machine()
    return owner_layer(tmp_path_factory.mktemp("layer"))


@pytest.fixture(scope="session")
def fork(tmp_path_factory: pytest.TempPathFactory, layer: tuple[Path, Kernels]) -> Iterator[GitDaemon]:
    """Serve the story's fork (refusing the broken kernel) with git daemon on 127.0.0.1 for the session."""
    base = tmp_path_factory.mktemp("forge")
    make_fork(base, [layer[1].broken])
    with git_daemon(base) as daemon:
        yield daemon
