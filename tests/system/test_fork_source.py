"""A fork reached the way users reach one (issue 23, rows 1-3): by a name configured in `[forks]`, served by the
real `git daemon` on 127.0.0.1 or as a local repository path, built against the real Debian headers.

Row 1: the kernel hook resolves the name in `[modules] fork` (before, it ran `git remote add origin NAME`).
Row 2: a half-made cache directory is repaired by the next run (before, every later build failed on it).
Row 3: with the source unreachable the error names the source and keeps git's whole message, not "install the
headers"; `driver branches` keeps git's message too.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fwman.driver.build.checkout import cache_dir, verify
from fwman.driver.build.kbuild import prepare_tree
from fwman.driver.build.source import SourceSpec, resolve_source
from fwman.host.live import LiveHost
from tests.support.env import FwmanEnv
from tests.support.modules import (
    KERNEL_OK,
    P2P_BRANCH,
    build_root,
    git_daemon,
    make_fork_repo,
    require_build_env,
    run_fwman,
)
from tests.support.tools import require_tools

MIRROR = "/srv/git/open-gpu-kernel-modules"  # the form docs/driver-branches.md shows, inside the root


def _config(root: Path, url: str, name: str = "aikitoria") -> None:
    conf = root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[forks]\n{name} = "{url}"\n\n[modules]\nfork = "{name}"\nbranch = "{P2P_BRANCH}"\n')


def _hook(root: Path) -> tuple[int, str]:
    code, out, err = run_fwman(root, "modules", "hook", "--kernel", KERNEL_OK, "--origin", "header_postinst")
    return code, out + err


def _manifest(root: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    return doc


def test_the_hook_builds_the_fork_named_in_config_served_by_git_daemon(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    head = make_fork_repo(served / "open-gpu-kernel-modules.git")
    root = build_root(tmp_path, (KERNEL_OK,))
    with git_daemon(served) as base:
        _config(root, f"{base}/open-gpu-kernel-modules.git", "standin")
        code, text = _hook(root)
        assert code == 0, text
        assert "remote add" not in text and "source unavailable" not in text
        manifest = _manifest(root)
        assert (manifest["fork"], manifest["branch"], manifest["commit"]) == ("standin", P2P_BRANCH, head)
        assert manifest["source"] == f"{base}/open-gpu-kernel-modules.git"
        # a build tree is linked from the checkout (the build's own is removed after its success: made again
        # here), and the build left the checkout as it was
        cache = cache_dir(f"{base}/open-gpu-kernel-modules.git")
        rel = "kernel-open/nvidia/nv-pci.c"
        host = LiveHost(str(root))
        source = resolve_source(host, SourceSpec(None, "standin", P2P_BRANCH), fetch=False)
        built = root / prepare_tree(host, source, KERNEL_OK).lstrip("/") / rel
        assert built.stat().st_ino == (root / cache.lstrip("/") / rel).stat().st_ino
        assert verify(LiveHost(str(root)), cache, f"{base}/open-gpu-kernel-modules.git", head) is None
        # the same name on the command line of the listing commands
        r = FwmanEnv()("driver", "branches", "--root", str(root), "--fork", "standin", "--json")
        listed = {f["fork"]: f for f in r.json()["forks"]}
        assert listed["standin"]["source"] == "git" and listed["standin"]["p2p_versions"] == ["570.86.16"]


def test_a_half_made_cache_is_repaired_by_the_next_hook(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools("git")
    root = build_root(tmp_path, (KERNEL_OK,))
    (root / "srv/git").mkdir(parents=True)
    head = make_fork_repo(root / MIRROR.lstrip("/"))
    _config(root, MIRROR)
    # what an interrupted first clone left (fwman before this change: `git init` + `remote add`, no fetch); the
    # next hook took it for a checkout: "git checkout: --detach does not take a path argument"
    cache = root / cache_dir(MIRROR).lstrip("/")
    cache.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(cache)], check=True)
    subprocess.run(["git", "-C", str(cache), "remote", "add", "origin", str(root / MIRROR.lstrip("/"))], check=True)
    code, text = _hook(root)
    assert code == 0, text
    assert text.count("is not a complete checkout (no commit checked out): removed") == 1
    assert _manifest(root)["commit"] == head and _manifest(root)["fork"] == "aikitoria"
    assert sorted(p.name for p in cache.parent.iterdir()) == [cache.name]  # no scratch or old copy left


def test_an_unreachable_source_is_not_a_headers_problem_and_keeps_gits_message(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools("git")
    served = tmp_path / "served"
    served.mkdir()
    root = build_root(tmp_path, (KERNEL_OK,))
    with git_daemon(served) as base:
        url = f"{base}/not-exported.git"  # the daemon answers, and refuses: git explains over several lines
        _config(root, url)
        code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK)
        r = FwmanEnv()("driver", "branches", "--root", str(root), "--fork", "aikitoria", "--json")
    assert code == 5, out + err
    assert "install the headers" not in err
    assert f"cannot reach fork aikitoria ({url}) for branch {P2P_BRANCH}" in err
    assert "access denied or repository not exported" in err  # git's reason, not only its last line
    assert "hint: the kernel headers are not the problem" in err
    assert f"`fwman modules build --kernel {KERNEL_OK}`" in err
    marker = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.pending").read_text())
    assert marker["reason"].startswith("source unavailable: cannot reach fork aikitoria")
    error = {f["fork"]: f for f in r.json()["forks"]}["aikitoria"]["error"]
    assert "access denied or repository not exported" in error and len(error.splitlines()) >= 2
