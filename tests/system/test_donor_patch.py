"""A fork that is a donor patch (issue 26, item 1): ``[forks.NAME]`` names a patch and its sha256, applied with the
real ``patch -p1 --fuzz=0 --forward`` to NVIDIA's upstream tag of the same version, the way
github.com/himekifee/talos-tinygrad-nvidia-p2p-driver applies aikitoria's P2P diff to NVIDIA's 595.58.03.

The "upstream" is a bare repository served by the real ``git daemon`` on 127.0.0.1 whose annotated tag
``570.86.16`` holds the stand-in module tree (tests/support/modules.py); the donor patch adds a ``MODULE_INFO``
tag to ``nvidia.ko`` that the real ``modinfo`` reads back from the installed module, built against the real
Debian headers. A sha256 mismatch is exit 4 and builds nothing; a patch that does not apply names the file and
the hunk. A patch URL is downloaded through the HTTP door from a real server on 127.0.0.1.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fwman.core.errors import VerificationError
from fwman.driver.build.checkout import cache_dir
from fwman.driver.build.donor import donor_patch
from fwman.driver.build.source import SourceSpec, resolve_source
from fwman.driver.forks.config import parse_donor
from fwman.host.live import LiveHost
from tests.support.modules import FORK_TREE, KERNEL_OK, add_kernel, git_daemon, require_build_env, run_fwman
from tests.support.tools import require_tools

TAG = "570.86.16"  # the stand-in tree's version.mk
REL = "kernel-open/nvidia/nv.c"
ANCHOR = 'MODULE_INFO(supported, "external");\n'
PATCH_AT = "/srv/patches/p2p-570.86.16.patch"  # a host path inside the root
_GIT = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]


def _upstream(bare: Path) -> str:
    """Make bare repository ``bare`` with annotated tag TAG of the stand-in tree; return the tag's commit."""
    work = bare.parent / "upstream.work"
    shutil.copytree(FORK_TREE, work, symlinks=True)
    git = ["git", *_GIT, "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"{TAG}"], check=True)
    subprocess.run([*git, "tag", "-a", "-m", f"release {TAG}", TAG], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    shutil.rmtree(work)
    return head


def _patch(value: str, anchor: str = ANCHOR) -> bytes:
    """Return a -p1 diff of REL adding ``MODULE_INFO(p2p_donor, VALUE)`` after ``anchor``."""
    before = (FORK_TREE / REL).read_text()
    after = before.replace(ANCHOR, ANCHOR + f'MODULE_INFO(p2p_donor, "{value}");\n')
    if anchor != ANCHOR:  # a patch made against another tree: its context is not in this one
        before, after = before.replace(ANCHOR, anchor), after.replace(ANCHOR, anchor)
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{REL}", f"b/{REL}")
    return "".join(diff).encode()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Serve the upstream with git daemon; yield (its URL, the tag's commit)."""
    require_build_env(KERNEL_OK)
    require_tools("git", "patch", "modinfo")
    base = tmp_path / "served"
    base.mkdir()
    commit = _upstream(base / "upstream.git")
    with git_daemon(base) as root_url:
        yield f"{root_url}/upstream.git", commit


def _root(tmp_path: Path, upstream: str, patch: bytes, sha256: str | None = None, headers: bool = True) -> Path:
    """Return a root with KERNEL_OK (and its real headers), the patch at PATCH_AT and [forks.donor] naming both."""
    root = tmp_path / "root"
    add_kernel(root, KERNEL_OK, headers=headers)
    target = root / PATCH_AT.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(patch)
    conf = root / "etc/fwman/config.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        "[forks]\ndefaults = false\n\n[forks.donor]\n"
        f'patch = "{PATCH_AT}"\nsha256 = "{sha256 or hashlib.sha256(patch).hexdigest()}"\n'
        f'upstream = "{upstream}"\nversions = ["{TAG}"]\n'
    )
    return root


def _modinfo(root: Path, field: str) -> str:
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    ko = root / manifest["modules"]["nvidia"]["path"].lstrip("/")
    return subprocess.run(["modinfo", "-F", field, str(ko)], capture_output=True, text=True, check=True).stdout.strip()


def test_branches_lists_the_upstream_tag_with_the_patch_and_a_build_carries_the_patch(
    tmp_path: Path, served: tuple[str, str]
) -> None:
    upstream, commit = served
    patch = _patch("applied")
    sha = hashlib.sha256(patch).hexdigest()
    root = _root(tmp_path, upstream, patch)

    code, out, err = run_fwman(root, "driver", "branches", "--json")
    assert code == 0, out + err
    fork = json.loads(out)["forks"][0]
    assert fork["fork"] == "donor" and fork["url"] == upstream
    assert fork["donor"] == {"patch": PATCH_AT, "sha256": sha, "versions": [TAG]}
    (rev,) = fork["revisions"][TAG]
    assert (rev["branch"], rev["commit"], rev["from_tree"], rev["patch_sha256"]) == (TAG, commit, True, sha)
    code, out, err = run_fwman(root, "driver", "branches")
    assert f"tag {TAG} + patch {sha[:12]}" in out

    code, out, err = run_fwman(
        root, "modules", "build", "--kernel", KERNEL_OK, "--fork", "donor", "--driver-version", TAG
    )
    assert code == 0, out + err
    assert f"applied donor patch p2p-570.86.16.patch ({REL})" in out + err
    assert _modinfo(root, "p2p_donor") == "applied"  # the patch is in the module that was installed
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert (manifest["fork"], manifest["branch"], manifest["commit"]) == ("donor", TAG, commit)
    assert manifest["donor_patch"] == {"tag": TAG, "sha256": sha, "patch": PATCH_AT}
    # the upstream checkout in the source cache is never patched: only the build tree is
    checkout = root / cache_dir(upstream).lstrip("/")  # the checkout, not the *.probe repository beside it
    assert "p2p_donor" not in (checkout / REL).read_text()

    code, out, _ = run_fwman(root, "modules", "status")
    assert f"source of {KERNEL_OK}: fork donor: upstream tag {TAG} ({commit[:12]}) + patch {sha[:12]}" in out
    code, out, _ = run_fwman(root, "modules", "status", "--json")
    (row,) = [r for r in json.loads(out)["kernels"] if r["kernel"] == KERNEL_OK]
    assert row["donor_patch"]["sha256"] == sha

    # the object cache key includes the patch: the same patch again reuses the objects, another one does not
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--force", "--json")
    assert code == 0, out + err
    assert json.loads(out)["kernels"][0]["object_cache_hit"] is True
    patch_b = _patch("applied-v2")
    (root / PATCH_AT.lstrip("/")).write_bytes(patch_b)
    conf = root / "etc/fwman/config.toml"
    conf.write_text(conf.read_text().replace(sha, hashlib.sha256(patch_b).hexdigest()))
    code, out, err = run_fwman(
        root, "modules", "build", "--kernel", KERNEL_OK, "--fork", "donor", "--branch", TAG, "--json"
    )
    assert code == 0, out + err
    assert json.loads(out)["kernels"][0]["object_cache_hit"] is False
    assert _modinfo(root, "p2p_donor") == "applied-v2"


def test_a_sha256_mismatch_is_exit_4_and_builds_nothing(tmp_path: Path, served: tuple[str, str]) -> None:
    upstream, _ = served
    patch = _patch("applied")
    pinned = hashlib.sha256(b"the patch that was reviewed").hexdigest()
    root = _root(tmp_path, upstream, patch, sha256=pinned)
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--fork", "donor", "--branch", TAG)
    assert code == 4, out + err
    assert f"its sha256 is {hashlib.sha256(patch).hexdigest()}, but [forks.donor] pins {pinned}" in out + err
    assert not (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").exists()
    assert not list((root / "var/cache/fwman").glob("src/*upstream*"))  # the upstream was not even fetched
    assert not (root / "var/cache/fwman/donor-patches").exists() or not list(
        (root / "var/cache/fwman/donor-patches").iterdir()
    )


def test_a_patch_that_does_not_apply_names_the_file_and_the_hunk(tmp_path: Path, served: tuple[str, str]) -> None:
    upstream, _ = served
    stale = _patch("applied", anchor='MODULE_INFO(supported, "internal");\n')
    root = _root(tmp_path, upstream, stale)
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--fork", "donor", "--branch", TAG)
    assert code == 4, out + err
    assert f"donor patch {PATCH_AT} does not apply: {REL}: Hunk #1 FAILED" in out + err
    assert not (root / f"var/lib/fwman/modules/{KERNEL_OK}.json").exists()


def _serve(body: bytes) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``body`` at /p2p-570.86.16.patch on 127.0.0.1 (a real server in a thread); return it and the URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/p2p-570.86.16.patch"


def test_a_patch_url_is_downloaded_through_the_http_door_verified_and_kept(tmp_path: Path) -> None:
    patch = _patch("applied")
    sha = hashlib.sha256(patch).hexdigest()
    httpd, url = _serve(patch)
    host = LiveHost(str(tmp_path))
    try:
        fork = parse_donor("donor", {"patch": url, "sha256": sha}, "config.toml")  # the version: the name's hint
        assert fork.donor is not None and fork.donor.versions == (TAG,)
        got = donor_patch(host, fork)
        assert (got.sha256, got.files, got.origin) == (sha, (REL,), url)
        kept = tmp_path / f"var/cache/fwman/donor-patches/{sha}.patch"
        assert kept.read_bytes() == patch and got.path == f"/var/cache/fwman/donor-patches/{sha}.patch"
        wrong = parse_donor("donor", {"patch": url, "sha256": "0" * 64}, "config.toml")
        with pytest.raises(VerificationError, match=f"its sha256 is {sha}, but \\[forks.donor\\] pins 0000"):
            donor_patch(host, wrong)
        assert not (tmp_path / f"var/cache/fwman/donor-patches/{'0' * 64}.patch").exists()
    finally:
        httpd.shutdown()
        httpd.server_close()
    # the kept copy serves later builds (the kernel hook) without the network
    assert donor_patch(host, fork).sha256 == sha


def test_the_hook_path_resolves_a_donor_fork_without_the_network(tmp_path: Path) -> None:
    # a kernel install must not wait on the network: once fetched, the tag and the verified patch are cached
    require_tools("git")
    base = tmp_path / "served"
    base.mkdir()
    commit = _upstream(base / "upstream.git")
    patch = _patch("applied")
    spec = SourceSpec(None, "donor", TAG)
    with git_daemon(base) as root_url:
        root = _root(tmp_path, f"{root_url}/upstream.git", patch, headers=False)
        host = LiveHost(str(root))
        online = resolve_source(host, spec)
    offline = resolve_source(host, spec, fetch=False)  # the daemon is gone
    assert offline == online
    assert offline.commit == commit and offline.source_id == f"{commit}+patch:{hashlib.sha256(patch).hexdigest()}"
    assert offline.donor_patch is not None and offline.donor_patch.origin == PATCH_AT
