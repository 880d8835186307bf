"""`fwman modules build` against the two real Debian kernels: builds for 6.1.0-50, fails for 6.1.0-53.

The stand-in fork tree calls pci_resize_resource() with three arguments, as kernel-open/nvidia/nv-pci.c of the
570.86.16-p2p branch does; Debian's 6.1.0-53 headers declare a fourth (exclude_bars). Everything happens in
temp roots (--root): real make/kbuild, real depmod (-b/-C), real modinfo, modules read back with pyelftools.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fwman.driver.build.kbuild import kernel_tree_args
from fwman.driver.kmod.kofile import read_module
from fwman.gpu.kernel_modules import MODULE_NAMES
from fwman.host.live import LiveHost
from tests.support.modules import (
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)

pytestmark = pytest.mark.system


def _modules_dep(root: Path, kver: str) -> dict[str, str]:
    text = (root / "lib/modules" / kver / "modules.dep").read_text()
    return {line.split(":")[0].rsplit("/", 1)[1].removesuffix(".ko"): line.split(":")[0] for line in text.splitlines()}


def test_builds_for_one_kernel_and_reports_the_failure_of_the_other(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK, KERNEL_BAD)
    root = build_root(tmp_path)

    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)
    assert code == 0, out + err
    assert "full build" in out and "not cached" in err
    installed = root / "lib/modules" / KERNEL_OK / "updates/fwman"
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["kernel"] == KERNEL_OK and manifest["source"] == SOURCE
    assert manifest["commit"].startswith("tree:")
    for name in MODULE_NAMES:
        data = (installed / f"{name}.ko").read_bytes()
        info = read_module(data)  # pyelftools reads the real .modinfo
        assert info.name == name.replace("-", "_") or info.name == name
        assert info.version == "570.86.16"
        assert info.vermagic is not None and info.vermagic.startswith(f"{KERNEL_OK} SMP")
        entry = manifest["modules"][name]
        assert entry["path"] == f"/lib/modules/{KERNEL_OK}/updates/fwman/{name}.ko"
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    # what the real depmod wrote: every name resolves to our copy
    dep = _modules_dep(root, KERNEL_OK)
    assert {name: dep[name] for name in MODULE_NAMES} == {n: f"updates/fwman/{n}.ko" for n in MODULE_NAMES}
    modinfo = subprocess.run(
        ["modinfo", "-b", str(root), "-k", KERNEL_OK, "-F", "filename", "nvidia"], capture_output=True, text=True
    )
    assert modinfo.stdout.strip() == str(installed / "nvidia.ko")
    conf = (root / "etc/depmod.d/fwman.conf").read_text()
    assert "override nvidia-peermem * updates/fwman" in conf
    assert "make -j" in (root / f"var/log/fwman/build-{KERNEL_OK}.log").read_text()

    # the same source again: the modules are current, so nothing is compiled (issue 39, row 6: it rebuilt)
    log = (root / f"var/log/fwman/build-{KERNEL_OK}.log").stat().st_mtime_ns
    code, out, err = run_fwman(root, "modules", "build", "--json", "--kernel", KERNEL_OK)
    doc = json.loads(out)
    assert code == 0 and doc["kernels"][0]["status"] == "current" and doc["changed"] is False, out + err
    assert (root / f"var/log/fwman/build-{KERNEL_OK}.log").stat().st_mtime_ns == log
    # --force compiles (objects from the cache), but the host already holds these modules, so nothing is
    # written, depmod does not run, and the JSON says nothing changed
    code, out, err = run_fwman(root, "modules", "build", "--json", "--kernel", KERNEL_OK, "--force")
    doc = json.loads(out)
    assert code == 0 and doc["kernels"][0]["status"] == "built", out + err
    assert doc["changed"] is False and doc["kernels"][0]["changed"] is False and doc["boot"]["changed"] is False
    again = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert again == manifest  # not rewritten: built_at is the first build's

    # the second kernel reuses the kernel-independent objects and fails in nv-pci.c
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_BAD)  # the remembered source
    assert code == 4, out + err
    assert "from the object cache" in err
    assert "failing file:  kernel-open/nvidia/nv-pci.c:" in out
    assert "too few arguments to function" in out and "pci_resize_resource" in out
    assert f"build log:     /var/log/fwman/build-{KERNEL_BAD}.log" in out
    log = (root / f"var/log/fwman/build-{KERNEL_BAD}.log").read_text()
    assert "rm-bus.c" not in log  # no kernel-independent file was compiled again
    marker = json.loads((root / f"var/lib/fwman/modules/{KERNEL_BAD}.failed").read_text())
    assert marker["detail"]["file"] == "kernel-open/nvidia/nv-pci.c"
    assert not (root / "lib/modules" / KERNEL_BAD / "updates/fwman").exists()
    assert not (root / f"var/lib/fwman/modules/{KERNEL_BAD}.json").exists()

    # same (source, kernel) again: skipped, like akmods; --force retries
    before = (root / f"var/log/fwman/build-{KERNEL_BAD}.log").stat().st_mtime_ns
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_BAD)
    assert code == 4 and "not retried" in err
    assert (root / f"var/log/fwman/build-{KERNEL_BAD}.log").stat().st_mtime_ns == before
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_BAD, "--force")
    assert code == 4 and (root / f"var/log/fwman/build-{KERNEL_BAD}.log").stat().st_mtime_ns != before

    code, out, err = run_fwman(root, "modules", "status", "--json")
    rows = {r["kernel"]: r for r in json.loads(out)["kernels"]}
    assert rows[KERNEL_OK]["safe_to_boot"] is True and rows[KERNEL_OK]["modules"] == "ok"
    assert rows[KERNEL_BAD]["safe_to_boot"] is False
    assert "nv-pci.c" in rows[KERNEL_BAD]["why"] and rows[KERNEL_BAD]["failed"]["file"].endswith("nv-pci.c")


def test_a_failed_rebuild_leaves_the_previous_modules_in_place(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK)
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)[0] == 0
    manifest_before = (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_bytes()
    ko = root / "lib/modules" / KERNEL_OK / "updates/fwman/nvidia.ko"
    ko_before = ko.read_bytes()

    broken = root / SOURCE.lstrip("/") / "src/nvidia/nv-rm-core.c"
    broken.write_text(broken.read_text() + "\nthis is not C;\n")
    code, out, _ = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK)
    assert code == 4
    assert "failing file:  src/nvidia/nv-rm-core.c:" in out
    assert ko.read_bytes() == ko_before
    assert (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_bytes() == manifest_before
    code, out, _ = run_fwman(root, "modules", "check-boot")
    assert code == 0 and "safe" in out


def test_split_headers_need_both_trees(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """SYSSRC=<build> alone fails in the conftest (stdarg.h); fwman passes source and build."""
    require_build_env(KERNEL_OK)
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)[0] == 0
    args = kernel_tree_args(LiveHost(str(root)), KERNEL_OK)
    assert args[0] == f"KERNEL_UNAME={KERNEL_OK}"
    assert args[1].endswith(f"/usr/src/linux-headers-{KERNEL_OK.removesuffix('-amd64')}-common")
    assert args[2].endswith(f"/usr/src/linux-headers-{KERNEL_OK}")
    tree = tmp_path / "tree"  # the build's own tree is removed after its success: the same tree, by hand
    shutil.copytree(root / SOURCE.lstrip("/"), tree, symlinks=True)
    wrong = subprocess.run(
        ["make", "-C", "kernel-open", "modules", f"SYSSRC={root}/usr/src/linux-headers-{KERNEL_OK}"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    assert wrong.returncode != 0
    assert "stdarg.h: No such file or directory" in wrong.stdout + wrong.stderr


def test_fork_branch_from_a_git_remote_records_the_commit(tmp_path: Path) -> None:
    require_build_env(KERNEL_OK)
    require_tools_git()
    remote = tmp_path / "fork.git"
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(Path(__file__).parents[2] / "fixtures/kmod-tree/fork"), str(work)], check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-C", str(work)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "570.86.16 with the P2P patch"], check=True)
    subprocess.run([*git, "branch", "570.86.16-p2p"], check=True)
    head = subprocess.run([*git, "rev-parse", "570.86.16-p2p"], capture_output=True, text=True).stdout.strip()
    # a tag of the same name pointing elsewhere must not be picked: branches are refs/heads/
    (work / "README.tag").write_text("tag only\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "other"], check=True)
    subprocess.run([*git, "tag", "570.86.16-p2p"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(remote)], check=True)

    root = build_root(tmp_path, (KERNEL_OK,))
    url = f"file://{remote}"
    code, out, err = run_fwman(
        root, "modules", "build", "--kernel", KERNEL_OK, "--fork", url, "--branch", "570.86.16-p2p"
    )
    assert code == 0, out + err
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["commit"] == head
    assert manifest["fork"] == url and manifest["branch"] == "570.86.16-p2p"
    cached = list((root / "var/cache/fwman/src").iterdir())
    assert len(cached) == 1 and (cached[0] / ".git").is_dir()
    # the build tree is removed after the success, the checkout stays (issue 39, row 6)
    assert not (root / "var/cache/fwman/build" / KERNEL_OK).exists()
    assert f"removed the build tree /var/cache/fwman/build/{KERNEL_OK} (" in out + err
    assert "MB of build products); kept: the installed modules and their copy in" in out + err
    remembered = json.loads((root / "var/lib/fwman/modules/source.json").read_text())
    assert remembered == {"source": None, "fork": url, "branch": "570.86.16-p2p"}


def require_tools_git() -> None:
    """Skip without git."""
    from tests.support.tools import require_tools

    require_tools("git")
