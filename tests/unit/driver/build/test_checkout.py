"""The source cache of a fork (issue 23, row 2): a checkout is complete and verified, or absent, and repairs itself.

Real git on real temp roots; the fork is a bare repository of the stand-in tree reached by its path (a host path
inside the root, as `[forks] name = "/srv/git/..."` gives it). No build here: tests/system builds from it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fwman.core.errors import UsageError
from fwman.driver.build.checkout import SourceError, cache_dir, ensure_checkout, verify
from fwman.driver.forks.model import Fork
from fwman.host.live import LiveHost
from tests.support.modules import P2P_BRANCH, commit_to_branch, make_fork_repo
from tests.support.tools import require_tools

FORK_PATH = "/srv/git/fork.git"  # a host path inside the temp root


@pytest.fixture
def fork_root(tmp_path: Path) -> tuple[LiveHost, Fork, str]:
    """A temp root holding the fork repository at FORK_PATH; (host, fork, branch commit)."""
    require_tools("git")
    root = tmp_path / "root"
    bare = root / FORK_PATH.lstrip("/")
    bare.parent.mkdir(parents=True)
    head = make_fork_repo(bare)
    return LiveHost(str(root)), Fork("local", FORK_PATH), head


def _local(host: LiveHost, path: str) -> Path:
    local = host.local_path(path)
    assert local is not None
    return Path(local)


def _git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=True).stdout


def _siblings(host: LiveHost, fork: Fork) -> list[str]:
    """Every entry of the source cache directory (the checkout and any scratch or old directory beside it)."""
    return sorted(p.name for p in _local(host, cache_dir(fork.url)).parent.iterdir())


def test_first_checkout_is_made_aside_and_verified(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    lines: list[str] = []
    checkout = ensure_checkout(host, fork, P2P_BRANCH, lines.append)
    assert checkout.commit == head  # the branch, not the tag of the same name
    local = _local(host, checkout.directory)
    assert _git(local, "rev-parse", "HEAD").strip() == head
    assert (local / "kernel-open").is_dir() and not (local / "README.tag").exists()
    assert _siblings(host, fork) == [Path(checkout.directory).name]  # no scratch left beside it
    assert verify(host, checkout.directory, str(_local(host, FORK_PATH)), head) is None
    assert any("fetching 570.86.16-p2p" in line for line in lines)


def test_the_half_made_directory_an_interrupted_clone_left_is_repaired(fork_root: tuple[LiveHost, Fork, str]) -> None:
    # what fwman before this change left when its first fetch failed: `git init` and `remote add`, nothing
    # fetched; the next hook took it for a checkout ("--detach does not take a path argument")
    host, fork, head = fork_root
    cache = _local(host, cache_dir(fork.url))
    cache.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(cache)], check=True)
    _git(cache, "remote", "add", "origin", str(_local(host, FORK_PATH)))
    lines: list[str] = []
    checkout = ensure_checkout(host, fork, P2P_BRANCH, lines.append, fetch=False)
    assert checkout.commit == head
    assert _git(cache, "rev-parse", "HEAD").strip() == head
    said = [line for line in lines if "not a complete checkout" in line]
    assert len(said) == 1 and "no commit checked out" in said[0] and "removed" in said[0]


def test_a_checkout_missing_files_is_detected_and_made_again(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    checkout = ensure_checkout(host, fork, P2P_BRANCH)
    local = _local(host, checkout.directory)
    (local / "kernel-open/nvidia/nv-pci.c").unlink()  # a checkout killed half-way, or hands in the cache
    lines: list[str] = []
    again = ensure_checkout(host, fork, P2P_BRANCH, lines.append, fetch=False)
    assert again.commit == head and (local / "kernel-open/nvidia/nv-pci.c").is_file()
    assert any("tracked files missing or changed" in line for line in lines)


def test_leftovers_of_a_killed_run_are_cleared(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    checkout = ensure_checkout(host, fork, P2P_BRANCH)
    cache = _local(host, checkout.directory)
    # killed while fetching (a scratch directory) and between the two renames of a swap (only .old left)
    (cache.parent / f"{cache.name}.partial/.git").mkdir(parents=True)
    cache.rename(cache.parent / f"{cache.name}.old")
    again = ensure_checkout(host, fork, P2P_BRANCH, fetch=False)
    assert again.commit == head
    assert _siblings(host, fork) == [cache.name]


def test_a_moved_branch_is_swapped_in_whole(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    ensure_checkout(host, fork, P2P_BRANCH)
    newer = commit_to_branch(_local(host, FORK_PATH), P2P_BRANCH, {"NEWS": "570.86.16-p2p, second cut\n"})
    # the hook never fetches: the cached commit stays
    assert ensure_checkout(host, fork, P2P_BRANCH, fetch=False).commit == head
    moved = ensure_checkout(host, fork, P2P_BRANCH)
    assert moved.commit == newer != head
    assert (_local(host, moved.directory) / "NEWS").is_file()
    assert _siblings(host, fork) == [Path(moved.directory).name]


def test_an_unreachable_fork_keeps_the_cached_commit_with_a_warning(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    ensure_checkout(host, fork, P2P_BRANCH)
    bare = _local(host, FORK_PATH)
    bare.rename(bare.with_name("moved.git"))
    lines: list[str] = []
    assert ensure_checkout(host, fork, P2P_BRANCH, lines.append).commit == head
    assert any(line.startswith("warning: cannot reach fork local") and "cached 570.86.16-p2p" in line for line in lines)


def test_a_failed_first_fetch_leaves_nothing_and_keeps_gits_whole_error(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, _fork, _head = fork_root
    missing = Fork("gone", "/srv/git/nothing-here.git")
    with pytest.raises(SourceError) as e:
        ensure_checkout(host, missing, P2P_BRANCH)
    error = e.value
    assert (error.fork, error.url, error.branch) == ("gone", "/srv/git/nothing-here.git", P2P_BRANCH)
    # git says it over several lines; the last alone ("and the repository exists.") reads as the opposite
    assert "does not appear to be a git repository" in error.git_stderr
    assert error.git_stderr.rstrip().endswith("and the repository exists.")
    assert error.git_stderr in error.message.replace("\n  ", "\n")
    assert "headers are not the problem" in (error.hint or "") and "fwman driver branches --fork gone" in (
        error.hint or ""
    )
    assert not _local(host, cache_dir(missing.url)).exists()
    assert not _local(host, cache_dir(missing.url) + ".partial").exists()


def test_a_branch_the_fork_does_not_have(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, _head = fork_root
    with pytest.raises(SourceError, match=r"has no branch 999\.1-p2p"):
        ensure_checkout(host, fork, "999.1-p2p")
    assert not _local(host, cache_dir(fork.url)).exists()


def test_a_url_that_would_be_a_git_option_never_reaches_git(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, _fork, _head = fork_root
    with pytest.raises(UsageError):
        ensure_checkout(host, Fork("evil", "--upload-pack=touch /tmp/x"), P2P_BRANCH)


def test_a_moved_branch_that_cannot_be_fetched_keeps_the_cached_commit(fork_root: tuple[LiveHost, Fork, str]) -> None:
    host, fork, head = fork_root
    ensure_checkout(host, fork, P2P_BRANCH)
    bare = _local(host, FORK_PATH)
    newer = commit_to_branch(bare, P2P_BRANCH, {"NEWS": "second cut\n"})
    loose = bare / "objects" / newer[:2] / newer[2:]
    assert loose.is_file()
    loose.unlink()  # the remote lists the moved branch (ls-remote) but cannot send it (fetch fails)
    lines: list[str] = []
    assert ensure_checkout(host, fork, P2P_BRANCH, lines.append).commit == head
    warning = [line for line in lines if line.startswith("warning: cannot fetch branch 570.86.16-p2p of fork local")]
    assert len(warning) == 1 and warning[0].endswith(f"building the cached 570.86.16-p2p ({head[:12]})")
    assert _siblings(host, fork) == [Path(cache_dir(fork.url)).name]


def test_a_fork_checkout_is_linked_into_the_build_tree_a_local_tree_is_copied(
    fork_root: tuple[LiveHost, Fork, str],
) -> None:
    from fwman.driver.build.kbuild import prepare_tree
    from fwman.driver.build.source import Source, local_source

    host, fork, head = fork_root
    checkout = ensure_checkout(host, fork, P2P_BRANCH)
    source = Source(checkout.directory, head, head, fork.name, P2P_BRANCH, fork.url)
    tree = _local(host, prepare_tree(host, source, "6.1.0-50-amd64"))
    rel = "kernel-open/nvidia/nv-pci.c"
    # hard links: no byte is copied, and the build only adds files beside them
    assert (tree / rel).stat().st_ino == (_local(host, checkout.directory) / rel).stat().st_ino
    assert not (tree / ".git").exists()
    mine = _local(host, "/src/mine")
    mine.parent.mkdir(parents=True)
    subprocess.run(["cp", "-a", str(_local(host, checkout.directory)), str(mine)], check=True)
    tree = _local(host, prepare_tree(host, local_source(host, "/src/mine"), "6.1.0-50-amd64"))
    assert (tree / rel).stat().st_ino != (mine / rel).stat().st_ino  # the user's own tree is copied
    assert not (tree / ".git").exists() and (tree / rel).read_bytes() == (mine / rel).read_bytes()


def test_a_tag_is_checked_out_for_a_donor_patch_fork_and_a_missing_one_is_named(
    fork_root: tuple[LiveHost, Fork, str],
) -> None:
    host, fork, head = fork_root
    # make_fork_repo's tag of the branch's name points at another commit: the tag, not the branch, is built
    tagged = ensure_checkout(host, fork, P2P_BRANCH, tag=True)
    assert tagged.commit != head
    assert (_local(host, tagged.directory) / "README.tag").exists()
    assert verify(host, tagged.directory, str(_local(host, FORK_PATH)), tagged.commit) is None
    # the same cache switches back to the branch, and to the tag again without the network (its ref is cached)
    assert ensure_checkout(host, fork, P2P_BRANCH).commit == head
    assert ensure_checkout(host, fork, P2P_BRANCH, fetch=False, tag=True).commit == tagged.commit
    with pytest.raises(SourceError, match=r"has no tag 999\.1\.2$"):
        ensure_checkout(host, fork, "999.1.2", tag=True)
