"""The toolchain a build needs is checked before it starts, and a failed build is remembered for what it was built
with (issue 39, rows 1-2): no compiler runs here; a build that would start stops at the check or at the marker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fwman.driver.build.attempt import Attempt, retry_reason
from fwman.driver.build.kbuild import kernel_patches
from fwman.driver.build.manifest import Manifest, Marker, ModuleEntry, failed_path, write_manifest, write_marker
from fwman.driver.build.pipeline import current_attempt
from fwman.driver.build.source import local_source
from fwman.driver.build.toolchain import BUILD_TOOLS, install_line, missing_tools, package_of
from fwman.host.live import LiveHost
from tests.support.env import FIXTURES, FwmanEnv
from tests.support.tools import tools_path

KVER = "6.1.0-47-amd64"
BUILD = (*(t.command for t in BUILD_TOOLS), "patch", "cc", "sh", "git")


def _root(tmp: Path) -> Path:
    """A root with one kernel, headers that are enough for the checks (no compile runs), and the stand-in tree."""
    root = tmp / "root"
    (root / "usr/src/h/include").mkdir(parents=True)
    (root / "usr/src/h/.config").write_text("CONFIG_PCI=y\n")
    (root / "lib/modules" / KVER).mkdir(parents=True)
    (root / "lib/modules" / KVER / "build").symlink_to("/usr/src/h")
    shutil.copytree(FIXTURES / "kmod-tree/fork", root / "src/fork")
    return root


def test_which_tools_and_the_apt_line() -> None:
    found = {"make", "gcc", "as", "ld", "objcopy", "xz"}
    missing = missing_tools(lambda c: f"/usr/bin/{c}" if c in found else None, patching=True)
    assert [t.command for t in missing] == ["g++", "patch"]
    assert install_line(missing) == "apt install g++ patch"
    assert [t.command for t in missing_tools(lambda c: None, patching=False)] == [t.command for t in BUILD_TOOLS]
    assert install_line(missing_tools(lambda c: None, False)) == "apt install make gcc g++ binutils xz-utils"
    assert (package_of("xz"), package_of("gcc-12"), package_of("cc"), package_of("frobnicate")) == (
        "xz-utils",
        "gcc-12",
        "gcc",
        None,
    )


def test_a_build_without_g_plus_plus_refuses_up_front_naming_it(tmp_path: Path) -> None:
    root = _root(tmp_path)
    run = FwmanEnv(variables={"PATH": tools_path(tmp_path / "bin", BUILD, without=("g++",))})
    r = run("modules", "build", "--kernel", KVER, "--source", "/src/fork", "--root", str(root))
    assert r.code == 5, r.stderr
    assert "the module build needs g++, which is not installed (g++ compiles nvidia-modeset's C++" in r.stderr
    assert "hint: install the build tools: apt install g++" in r.stderr
    # refused before anything: no source remembered, no build tree, no marker
    assert not (root / "var/lib/fwman/modules/source.json").exists()
    assert not (root / "var/cache/fwman/build").exists()


def test_the_hook_leaves_the_kernel_pending_until_the_tools_are_there(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / "var/lib/fwman/modules/source.json").write_text(json.dumps({"source": "/src/fork"}))
    run = FwmanEnv(variables={"PATH": tools_path(tmp_path / "bin", BUILD, without=("g++", "xz"))})
    dry = run("modules", "catchup", "--dry-run", "--root", str(root))
    assert f"would mark {KVER} pending: the build tools g++, xz are missing (apt install g++ xz-utils)" in dry.stdout
    r = run("modules", "catchup", "--root", str(root))
    marker = json.loads((root / f"var/lib/fwman/modules/{KVER}.pending").read_text())
    assert marker["reason"] == "build tools missing: g++ xz", marker
    assert marker["detail"] == {"install": "apt install g++ xz-utils"}
    assert "apt install g++ xz-utils" in r.stdout + r.stderr
    assert not (root / f"var/lib/fwman/modules/{KVER}.failed").exists()  # the host's tools, not the tree's fault


def _attempt(**changes: str) -> Attempt:
    base = {"source": "abc", "toolchain": "t1", "patches": "", "headers": "h1"}
    return Attempt(**{**base, **changes})


def _marker(attempt: Attempt, **detail: str) -> Marker:
    return Marker(KVER, "too few arguments", commit=attempt.source, detail={**attempt.detail(), **detail})


def test_a_failure_is_retried_when_anything_it_was_built_with_changes() -> None:
    failed = _marker(_attempt())
    nothing = lambda tool: False  # noqa: E731
    assert retry_reason(failed, _attempt(), nothing) is None
    assert retry_reason(failed, _attempt(source="abd"), nothing) == "the source changed since the failed build (abc)"
    assert retry_reason(failed, _attempt(toolchain="t2"), nothing) == "the toolchain changed since the failed build"
    assert retry_reason(failed, _attempt(patches="p1"), nothing) == (
        "the patches for this kernel changed since the failed build"
    )
    headers = retry_reason(failed, _attempt(headers="h2"), nothing)
    assert headers == "the kernel's headers changed since the failed build"
    # a tool fwman does not check up front (a newer Makefile's): retried once it is on the PATH
    perl = _marker(_attempt(), missing_tool="perl")
    assert retry_reason(perl, _attempt(), nothing) is None
    assert retry_reason(perl, _attempt(), lambda tool: tool == "perl") == "perl is installed now"
    # a marker of an older fwman, which recorded no toolchain: what it failed with is unknown, so once more
    old = Marker(KVER, "g++: not found", commit="abc", detail={"patches": ""})
    assert retry_reason(old, _attempt(), nothing) == "the toolchain changed since the failed build"


def test_the_catchup_dry_run_and_the_run_agree_on_a_remembered_failure(tmp_path: Path) -> None:
    """Row 2 of the issue: the dry run said "would build" where the run skipped; one decision answers both."""
    root = _root(tmp_path)
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / "var/lib/fwman/modules/source.json").write_text(json.dumps({"source": "/src/fork"}))
    path = tools_path(tmp_path / "bin", BUILD)
    run = FwmanEnv(variables={"PATH": path})
    host = LiveHost(str(root), env={"PATH": path})
    source_id = local_source(host, "/src/fork").source_id
    attempt = current_attempt(host, KVER, source_id, kernel_patches(host, KVER))
    write_marker(host, failed_path(KVER), _marker(attempt))

    dry = run("modules", "catchup", "--dry-run", "--root", str(root))
    assert f"would leave {KVER} as it is: its build failed before (too few arguments)" in dry.stdout, dry.stdout
    r = run("modules", "catchup", "--root", str(root))
    assert "not retried: the source, toolchain, patches and headers are the same" in r.stdout + r.stderr
    assert not (root / "var/cache/fwman/build").exists()  # nothing was built

    # the headers package rebuilt (another .config): both say it is tried again, and why
    (root / "usr/src/h/.config").write_text("CONFIG_PCI=y\nCONFIG_X=y\n")
    dry = run("modules", "catchup", "--dry-run", "--root", str(root))
    want = f"would build the patched modules for {KVER} from local tree /src/fork (its last build failed; trying "
    assert want + "again: the kernel's headers changed since the failed build)" in dry.stdout, dry.stdout


def test_a_kernel_whose_modules_are_current_is_left_alone_unless_forced(tmp_path: Path) -> None:
    """Issue 39, row 6: `modules build` of a current kernel rebuilt it (149 s) and said "built and installed"."""
    root = _root(tmp_path)
    path = tools_path(tmp_path / "bin", BUILD)
    host = LiveHost(str(root), env={"PATH": path})
    ko = root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko"
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"\x7fELF module")
    entry = ModuleEntry(f"/lib/modules/{KVER}/updates/fwman/nvidia.ko", "0" * 64, ko.stat().st_size)
    commit = local_source(host, "/src/fork").source_id
    write_manifest(host, Manifest(KVER, None, None, commit, {"nvidia": entry}, "2026-12-01T10:00:00+00:00"))
    run = FwmanEnv(variables={"PATH": path})
    argv = ("modules", "build", "--kernel", KVER, "--source", "/src/fork", "--root", str(root))
    dry = run(*argv, "--dry-run")
    want = f"would leave {KVER} as it is: its patched modules are current (--force rebuilds)"
    assert dry.stdout.splitlines()[0] == want
    forced = run(*argv, "--dry-run", "--force")
    assert forced.stdout.splitlines()[0] == f"would build the patched modules for {KVER} from local tree /src/fork"
    r = run(*argv, "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert (doc["kernels"][0]["status"], doc["changed"]) == ("current", False)
    assert "nothing to do (--force rebuilds)" in doc["kernels"][0]["message"]
    assert not (root / "var/cache/fwman/build").exists()  # nothing was built
    (root / "src/fork/kernel-open/nvidia/nv.c").write_text("/* changed */\n")  # another tree: a build is due
    assert run(*argv, "--dry-run").stdout.startswith(f"would build the patched modules for {KVER}")
