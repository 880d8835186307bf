"""Per-kernel compatibility patches (issue 26, item 2): ``/etc/fwman/patches.d/*.patch`` with a ``Kernels:``
pattern, applied with the real ``patch -p1`` in the build tree of the kernels it names, like DKMS's
``PATCH[#]``/``PATCH_MATCH[#]``.

The stand-in fork tree calls the three-argument ``pci_resize_resource()``; Debian's KERNEL_BAD headers declare a
fourth argument, so it fails there (tests/support/modules.py). A patch for KERNEL_BAD alone makes it build,
is recorded in its manifest and shown by ``modules status``; a patch that does not apply fails that kernel's
build naming the file and the hunk, the other kernel built.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path

from tests.support.env import REPO
from tests.support.modules import (
    COMPAT_PATCH,
    FORK_TREE,
    KERNEL_BAD,
    KERNEL_OK,
    SOURCE,
    build_root,
    mask_compat,
    object_cache,  # noqa: F401  (fixture)
    run_fwman,
    unmask_compat,
)

REL = "kernel-open/nvidia/nv-pci.c"


def _patch(kernels: str | None, old: str, new: str) -> str:
    """Return a -p1 unified diff of REL changing ``old`` to ``new``, led by a ``Kernels:`` line when given."""
    before = (FORK_TREE / REL).read_text()
    assert old in before
    diff = difflib.unified_diff(
        before.splitlines(keepends=True),
        before.replace(old, new).splitlines(keepends=True),
        f"a/{REL}",
        f"b/{REL}",
    )
    lead = f"Kernels: {kernels}\nthe fourth argument of pci_resize_resource() in these headers\n" if kernels else ""
    return lead + "".join(diff)


def _put(root: Path, name: str, text: str) -> None:
    d = root / "etc/fwman/patches.d"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)


FIX = (
    "pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size);",
    "pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size, 0);",
)


def test_a_patch_for_one_kernel_makes_it_build_and_status_shows_it(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    root = build_root(tmp_path, (KERNEL_OK, KERNEL_BAD), object_cache)
    _put(root, "10-rebar-exclude-bars.patch", _patch("^" + re.escape(KERNEL_BAD) + "$", *FIX))
    code, out, err = run_fwman(root, "modules", "build", "--all", "--source", SOURCE, "--force")
    assert code == 0, out + err
    assert f"applied kernel patch 10-rebar-exclude-bars.patch ({REL})" in out + err
    bad = json.loads((root / f"var/lib/fwman/modules/{KERNEL_BAD}.json").read_text())
    ok = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert [p["name"] for p in bad["patches"]] == ["10-rebar-exclude-bars.patch"]
    assert bad["patches"][0]["kernels"] == "^" + re.escape(KERNEL_BAD) + "$"
    assert ok["patches"] == []  # the pattern does not match KERNEL_OK: its tree is not patched
    # a kernel-open/ patch leaves the object cache key alone: KERNEL_BAD reused the seeded objects
    assert bad["object_cache_hit"] is True
    # the source tree itself is never patched
    assert "size, 0)" not in (root / SOURCE.lstrip("/") / REL).read_text()
    code, out, _ = run_fwman(root, "modules", "status")
    assert f"patch for {KERNEL_BAD}: 10-rebar-exclude-bars.patch" in out
    assert f"patch for {KERNEL_OK}" not in out
    code, out, _ = run_fwman(root, "modules", "status", "--json")
    rows = {r["kernel"]: r for r in json.loads(out)["kernels"]}
    assert rows[KERNEL_BAD]["patches"][0]["name"] == "10-rebar-exclude-bars.patch"


def test_a_patch_that_does_not_apply_fails_that_kernel_only(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    root = build_root(tmp_path, (KERNEL_OK, KERNEL_BAD), object_cache)
    # a context line the tree no longer has: the hunk cannot apply (--fuzz=0)
    stale = _patch(re.escape(KERNEL_BAD), *FIX).replace("largest supported size */", "largest size */")
    assert stale != _patch(re.escape(KERNEL_BAD), *FIX)
    _put(root, "20-stale.patch", stale)
    code, out, err = run_fwman(root, "modules", "build", "--all", "--source", SOURCE, "--force")
    assert code == 6, out + err  # partial: KERNEL_OK built
    text = out + err
    assert f"kernel patch /etc/fwman/patches.d/20-stale.patch does not apply: {REL}: Hunk #1 FAILED at " in text
    assert "failed in:     the patch phase" in text
    assert (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").exists()
    assert not (root / f"var/lib/fwman/modules/{KERNEL_BAD}.json").exists()
    marker = json.loads((root / f"var/lib/fwman/modules/{KERNEL_BAD}.failed").read_text())
    assert marker["detail"]["file"] == REL and marker["detail"]["phase"] == "patch"


def test_a_patch_without_kernels_is_for_every_kernel(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    root = build_root(tmp_path, (KERNEL_BAD,), object_cache)
    _put(root, "10-all.patch", _patch(None, *FIX))
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_BAD, "--source", SOURCE, "--force")
    assert code == 0, out + err
    bad = json.loads((root / f"var/lib/fwman/modules/{KERNEL_BAD}.json").read_text())
    assert bad["patches"][0]["kernels"] is None


def test_a_patch_never_changes_the_forks_checkout_in_the_source_cache(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    # a fork's build tree is hard links into the source cache: the patched file must be a copy, the checkout
    # stays as fetched (it verifies, so the next build does not fetch it again)
    from fwman.driver.build.checkout import cache_dir, verify
    from fwman.host.live import LiveHost
    from tests.support.modules import P2P_BRANCH, make_fork_repo

    head = make_fork_repo(tmp_path / "fork.git")
    root = build_root(tmp_path, (KERNEL_BAD,), object_cache)
    _put(root, "10-rebar.patch", _patch(re.escape(KERNEL_BAD), *FIX))
    url = str(tmp_path / "fork.git")
    argv = ["modules", "build", "--kernel", KERNEL_BAD, "--fork", f"standin=file://{url}", "--branch", P2P_BRANCH]
    code, out, err = run_fwman(root, *argv, "--force")
    assert code == 0, out + err
    cache = cache_dir(f"file://{url}")
    assert verify(LiveHost(str(root)), cache, f"file://{url}", head) is None
    assert "size, 0)" not in (root / cache.lstrip("/") / REL).read_text()
    # KERNEL_BAD built only because its build tree was patched (the tree is removed after a success)
    assert f"patching file {REL}" in (root / f"var/log/fwman/build-{KERNEL_BAD}.log").read_text()
    assert not (root / f"var/cache/fwman/build/{KERNEL_BAD}").exists()


def test_fwmans_compat_patch_makes_the_four_argument_kernel_build(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    """Issue 39: the compat patch fwman ships goes by what the headers declare (KERNEL_BAD's pci.h: four
    arguments), is recorded in the manifest and listed by status; KERNEL_OK's headers declare three: no patch."""
    root = build_root(tmp_path, (KERNEL_OK, KERNEL_BAD), object_cache)
    unmask_compat(root)
    code, out, err = run_fwman(root, "modules", "build", "--all", "--source", SOURCE)
    assert code == 0, out + err
    assert f"applied compat patch {COMPAT_PATCH} ({REL})" in out + err
    bad = json.loads((root / f"var/lib/fwman/modules/{KERNEL_BAD}.json").read_text())
    ok = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert bad["patches"] == [
        {
            "name": COMPAT_PATCH,
            "sha256": hashlib.sha256((REPO / "fwman/compat" / COMPAT_PATCH).read_bytes()).hexdigest(),
            "kernels": None,
            "declaration": "include/linux/pci.h declares pci_resize_resource() with 4 arguments",
        }
    ]
    assert ok["patches"] == [] and bad["object_cache_hit"] is True  # kernel-open only: the cache key stays
    code, out, _ = run_fwman(root, "modules", "status")
    assert f"compat patch for {KERNEL_BAD}: {COMPAT_PATCH} (shipped with fwman: include/linux/pci.h declares " in out
    assert f"patch for {KERNEL_OK}" not in out
    # the owner turns it off (an empty patches.d file of its name): the kernel fails as the fork does there
    code, out, _ = run_fwman(root, "modules", "status", "--json")
    rows = {r["kernel"]: r for r in json.loads(out)["kernels"]}
    assert rows[KERNEL_BAD]["patches"][0]["declaration"] == bad["patches"][0]["declaration"]
    mask_compat(root)
    code, out, err = run_fwman(root, "modules", "build", "--json", "--kernel", KERNEL_BAD, "--source", SOURCE)
    assert code == 4, out + err
    failure = json.loads(out)["kernels"][0]["failure"]
    assert (failure["file"], failure["cause"], failure["missing_tool"]) == (REL, "compile-error", None), failure
    assert failure["error"].startswith("too few arguments to function"), failure
