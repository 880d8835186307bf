"""`fwman modules ...` on temp roots where nothing needs compiling: usage errors, status, catch-up fast path."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import FwmanEnv

KVER = "6.1.0-50-amd64"


def _root(tmp: Path, headers: bool) -> Path:
    (tmp / "lib/modules" / KVER).mkdir(parents=True)
    if headers:
        (tmp / "usr/src/h/include").mkdir(parents=True)
        (tmp / "lib/modules" / KVER / "build").symlink_to("/usr/src/h")
    return tmp


def test_build_needs_a_source_and_a_kernel(tmp_path: Path) -> None:
    run = FwmanEnv()
    root = str(_root(tmp_path, headers=False))
    r = run("modules", "build", "--kernel", KVER, "--root", root)
    assert r.code == 2 and "--source DIR, or --fork" in r.stderr
    r = run("modules", "build", "--kernel", KVER, "--source", "/s", "--fork", "a/b", "--branch", "x", "--root", root)
    assert r.code == 2
    r = run("modules", "build", "--source", "/s", "--root", root)
    assert r.code == 2 and "name a kernel" in r.stderr


def test_not_root_is_blocked(tmp_path: Path) -> None:
    r = FwmanEnv(euid=1000)("modules", "build", "--kernel", KVER, "--source", "/s")
    assert r.code == 3 and "needs root" in r.stderr


def test_missing_headers_mark_the_kernel_pending(tmp_path: Path) -> None:
    root = _root(tmp_path, headers=False)
    (root / "src/fork/kernel-open").mkdir(parents=True)
    (root / "src/fork/Makefile").write_text("modules:\n")
    r = FwmanEnv()("modules", "build", "--kernel", KVER, "--source", "/src/fork", "--root", str(root))
    assert r.code == 5 and "marked pending" in r.stderr
    marker = json.loads((root / f"var/lib/fwman/modules/{KVER}.pending").read_text())
    assert marker["reason"] == "no headers"


def test_status_json_and_text(tmp_path: Path) -> None:
    root = _root(tmp_path, headers=True)
    run = FwmanEnv(variables={"PATH": "/nonexistent"})  # no dkms on this host: dkms part is empty
    doc = run("modules", "status", "--json", "--root", str(root)).json()
    assert doc["schema"] == "fwman.modules-status/1"
    (row,) = doc["kernels"]
    assert (row["kernel"], row["headers"], row["modules"], row["safe_to_boot"]) == (KVER, True, "none", False)
    assert row["why"] == "no patched modules built for this kernel" and row["next_boot"] is True
    assert doc["pin"] is None and doc["source"] is None
    text = run("modules", "status", "--root", str(root)).stdout
    assert "SAFE TO BOOT" in text and f"> {KVER}" in text and "no module source configured yet" in text


def test_catchup_fast_path_and_unpin_without_pin(tmp_path: Path) -> None:
    run = FwmanEnv()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("modules", "catchup", "--root", str(empty))
    assert r.code == 0 and r.stdout.strip() == "every kernel has current patched modules"
    r = run("modules", "unpin", "--root", str(empty))
    assert r.code == 0 and "no boot pin" in r.stdout
    r = run("modules", "check-boot", "--root", str(empty))
    assert r.code == 5


def test_catchup_without_source_marks_pending_and_exits_zero(tmp_path: Path) -> None:
    root = _root(tmp_path, headers=True)
    r = FwmanEnv()("modules", "catchup", "--root", str(root))
    assert r.code == 0, r.stderr
    assert "no module source configured" in r.stderr
    assert (root / f"var/lib/fwman/modules/{KVER}.pending").exists()
    assert "the next boot (6.1.0-50-amd64) has no working patched modules" in r.stderr


def test_a_broken_forks_table_is_an_error_not_a_fork_path(tmp_path: Path) -> None:
    # before, an invalid [forks] table was swallowed and "aikitoria" was cloned as a relative path
    root = _root(tmp_path, headers=True)
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text("[forks]\naikitoria = 3\n")
    r = FwmanEnv()(
        "modules", "build", "--kernel", KVER, "--fork", "aikitoria", "--branch", "570.86.16-p2p", "--root", str(root)
    )
    assert r.code == 2 and "config.toml:2:" in r.stderr and "`aikitoria` in [forks]" in r.stderr
    assert not (root / "var/lib/fwman/modules/source.json").exists()


def test_build_json_says_what_changed(tmp_path: Path) -> None:
    root = _root(tmp_path, headers=False)
    (root / "src/fork/kernel-open").mkdir(parents=True)
    (root / "src/fork/Makefile").write_text("modules:\n")
    r = FwmanEnv()("modules", "build", "--json", "--kernel", KVER, "--source", "/src/fork", "--root", str(root))
    doc = r.json()
    assert r.code == 5 and doc["schema"] == "fwman.modules-build/2"
    # pending: nothing was installed, no boot pin made (there is no other kernel)
    assert doc["changed"] is False and doc["kernels"][0]["changed"] is False and doc["boot"]["changed"] is False


def _remembered(root: Path) -> dict[str, str | None]:
    doc: dict[str, str | None] = json.loads((root / "var/lib/fwman/modules/source.json").read_text())
    return doc


def test_a_source_is_remembered_only_once_it_resolved(tmp_path: Path) -> None:
    import subprocess

    root = _root(tmp_path, headers=False)
    record = root / "var/lib/fwman/modules/source.json"
    record.parent.mkdir(parents=True)
    good = '{"source": null, "fork": "aikitoria", "branch": "570.86.16-p2p"}\n'
    record.write_text(good)
    run = FwmanEnv()
    # a --source typo: refused before anything, the working source stays
    r = run("modules", "build", "--kernel", KVER, "--source", "/srv/src/typo", "--root", str(root))
    assert r.code == 2, r.stderr
    assert r.stderr.startswith("fwman: error: --source /srv/src/typo is not an open-gpu-kernel-modules tree")
    assert record.read_text() == good and not (root / f"var/lib/fwman/modules/{KVER}.pending").exists()
    # a branch name that is not one: refused, never fetched
    for branch in ("570.86.16-p2p;rm", "--x"):
        r = run("modules", "build", "--kernel", KVER, "--fork", "aikitoria", "--branch", branch, "--root", str(root))
        assert r.code == 2 and "--branch" in r.stderr, r.stderr
    assert record.read_text() == good
    # a fork branch that cannot be fetched: the kernel is pending, the record unchanged
    fork = tmp_path / "fork"
    fork.mkdir()
    git = ["git", "-C", str(fork), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(fork)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    r = run("modules", "build", "--kernel", KVER, "--fork", str(fork), "--branch", "abc", "--root", str(root))
    assert r.code == 5, r.stderr
    assert "is not remembered as the source of later builds" in r.stderr
    assert record.read_text() == good
    # a tree that is there is remembered, even while the kernel waits for its headers
    (root / "src/fork/kernel-open").mkdir(parents=True)
    (root / "src/fork/Makefile").write_text("modules:\n")
    r = run("modules", "build", "--kernel", KVER, "--source", "/src/fork", "--root", str(root))
    assert r.code == 5 and "marked pending" in r.stderr
    assert _remembered(root) == {"source": "/src/fork", "fork": None, "branch": None}


def test_catchup_names_a_kernel_still_waiting_for_headers(tmp_path: Path) -> None:
    root = _root(tmp_path, headers=False)
    run = FwmanEnv()
    (root / "src/fork/kernel-open").mkdir(parents=True)
    (root / "src/fork/Makefile").write_text("modules:\n")
    assert run("modules", "build", "--kernel", KVER, "--source", "/src/fork", "--root", str(root)).code == 5
    r = run("modules", "catchup", "--root", str(root))
    assert r.code == 0, r.stderr  # documented: kernels without headers stay pending
    assert "every kernel has current patched modules" not in r.stdout
    assert f"{KVER}: NO current patched modules (pending: no headers)" in r.stdout
    assert r.stderr == ""
    # the build the headers wait for needs the remembered source: a damaged record is said now
    (root / "var/lib/fwman/modules/source.json").write_text('{"source": 3}\n')
    r = run("modules", "catchup", "--root", str(root))
    assert r.code == 0 and f"{KVER}: NO current patched modules" in r.stdout
    assert "WARNING: unreadable module source record /var/lib/fwman/modules/source.json" in r.stderr


def test_a_failed_depmod_on_import_is_exit_4_and_writes_no_manifest(tmp_path: Path) -> None:
    import hashlib

    from fixtures.tinymod.elfgen import build_module, nvidia_tags
    from fwman.driver.bundle.format import BundleDoc, BundleModule, pack
    from fwman.gpu.kernel_modules import MODULE_NAMES

    files = {n: build_module(nvidia_tags("570.86.16", KVER, name=n.replace("-", "_"))) for n in MODULE_NAMES}
    doc = BundleDoc(
        kernel=KVER,
        vermagic=f"{KVER} SMP preempt mod_unload modversions",
        modules={n: BundleModule(hashlib.sha256(d).hexdigest(), len(d)) for n, d in files.items()},
    )
    bundle = tmp_path / "p2p.fwbundle"
    bundle.write_bytes(pack(doc.to_json(), files))
    root = _root(tmp_path / "root", headers=False)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "depmod").write_text("#!/bin/sh\necho 'depmod: ERROR: could not open directory' >&2\nexit 1\n")
    (tools / "depmod").chmod(0o755)
    r = FwmanEnv(path_prepend=[tools])("modules", "import", str(bundle), "--root", str(root))
    assert r.code == 4, r.stderr
    assert f"fwman: error: depmod failed for {KVER}: depmod: ERROR: could not open directory" in r.stderr
    assert "not in effect" in r.stderr and "unexpected" not in r.stderr
    assert not (root / f"var/lib/fwman/modules/{KVER}.json").exists()  # no manifest claims the import


# -- issue 23: a configured fork name resolves everywhere; a source failure is not a headers failure --------
def _fork_root(tmp_path: Path) -> tuple[Path, str]:
    """A root with fake headers (nothing compiles) and the stand-in fork at /srv/git/fork.git; (root, commit)."""
    from tests.support.modules import make_fork_repo
    from tests.support.tools import require_tools

    require_tools("git")
    root = _root(tmp_path / "root", headers=True)
    (root / "srv/git").mkdir(parents=True)
    tree = tmp_path / "tree"  # a module tree whose build fails at once: these tests are about the source
    (tree / "kernel-open").mkdir(parents=True)
    (tree / "kernel-open/Kbuild").write_text("obj-m := nvidia.o\n")
    (tree / "Makefile").write_text("modules:\n\t@echo 'conftest: no kernel here'; exit 2\n")
    return root, make_fork_repo(root / "srv/git/fork.git", tree)


def test_the_hook_resolves_the_fork_named_in_config(tmp_path: Path) -> None:
    # the form docs/driver-branches.md shows; before, the hook ran `git remote add origin aikitoria`
    root, head = _fork_root(tmp_path)
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text(
        '[forks]\naikitoria = "/srv/git/fork.git"\n\n[modules]\nfork = "aikitoria"\nbranch = "570.86.16-p2p"\n'
    )
    r = FwmanEnv()("modules", "hook", "--kernel", KVER, "--from", "header_postinst", "--root", str(root))
    assert "source unavailable" not in r.stdout + r.stderr and "remote add" not in r.stdout + r.stderr
    # the tree's build fails at once: the build itself failed, from the right fork and commit
    marker = json.loads((root / f"var/lib/fwman/modules/{KVER}.failed").read_text())
    assert (marker["fork"], marker["branch"], marker["commit"]) == ("aikitoria", "570.86.16-p2p", head)
    assert not (root / f"var/lib/fwman/modules/{KVER}.pending").exists()


def test_an_unknown_fork_name_is_a_usage_error_naming_the_known_ones(tmp_path: Path) -> None:
    root, _head = _fork_root(tmp_path)
    (root / "etc/fwman").mkdir(parents=True)
    (root / "etc/fwman/config.toml").write_text('[forks]\nlocal = "/srv/git/fork.git"\n')
    r = FwmanEnv()(
        "modules", "build", "--kernel", KVER, "--fork", "lcoal", "--branch", "570.86.16-p2p", "--root", str(root)
    )
    assert r.code == 2, r.stderr
    assert "--fork 'lcoal': no fork of that name (known forks: aikitoria, tinygrad, mylesgoose, local)" in r.stderr
    assert not (root / "var/cache/fwman/src").exists()  # nothing fetched
    # the same name in [modules]: `modules build` without --fork says where it came from
    (root / "etc/fwman/config.toml").write_text(
        '[forks]\nlocal = "/srv/git/fork.git"\n\n[modules]\nfork = "lcoal"\nbranch = "570.86.16-p2p"\n'
    )
    r = FwmanEnv()("modules", "build", "--kernel", KVER, "--root", str(root))
    assert r.code == 2, r.stderr
    assert "/etc/fwman/config.toml: [modules] fork 'lcoal': no fork of that name" in r.stderr


def test_a_source_that_cannot_be_had_is_not_a_missing_headers_error(tmp_path: Path) -> None:
    root, _head = _fork_root(tmp_path)
    run = FwmanEnv()
    argv = ("modules", "build", "--kernel", KVER, "--fork", "gone=/srv/git/nothing.git", "--branch", "570.86.16-p2p")
    r = run(*argv, "--root", str(root))
    assert r.code == 5, r.stderr
    assert "install the headers" not in r.stderr
    assert "hint: the kernel headers are not the problem: check that fork gone is reachable" in r.stderr
    assert f"then run `fwman modules build --kernel {KVER}`" in r.stderr
    # git's whole reason, not its last line alone ("and the repository exists.")
    assert "does not appear to be a git repository" in r.stderr and "and the repository exists." in r.stderr
    r = run(*argv, "--json", "--root", str(root))
    assert r.code == 5
    entry = r.json()["kernels"][0]
    assert entry["status"] == "pending" and entry["source_error"]["fork"] == "gone"
    assert entry["source_error"]["url"] == "/srv/git/nothing.git" and entry["source_error"]["branch"] == "570.86.16-p2p"
    git_lines = entry["source_error"]["git_stderr"].splitlines()
    assert len(git_lines) >= 3 and git_lines[-1] == "and the repository exists."
    marker = json.loads((root / f"var/lib/fwman/modules/{KVER}.pending").read_text())
    assert marker["reason"].startswith("source unavailable: cannot reach fork gone")
    assert "does not appear to be a git repository" in marker["detail"]["git_stderr"]


def test_lockstep_reads_the_version_of_a_fork_branch_from_its_tree(tmp_path: Path) -> None:
    # a branch name that carries no version (`bar1-p2p`): the lockstep check used to be skipped for it
    from tests.support.modules import make_fork_repo

    root, _head = _fork_root(tmp_path)
    tree = tmp_path / "tree"
    (tree / "version.mk").write_text("NVIDIA_VERSION = 570.86.16\n")
    make_fork_repo(root / "srv/git/bar1.git", tree, branch="bar1-p2p")
    libs = root / "usr/lib/x86_64-linux-gnu"
    libs.mkdir(parents=True)
    (libs / "libcuda.so.575.51.02").write_bytes(b"")
    r = FwmanEnv()(
        "modules",
        "build",
        "--kernel",
        KVER,
        "--fork",
        "bar1=/srv/git/bar1.git",
        "--branch",
        "bar1-p2p",
        "--root",
        str(root),
    )
    assert r.code == 3, r.stderr
    assert "the branch builds driver 570.86.16 but the user space differs (host has 575.51.02)" in r.stderr
    assert not (root / f"var/lib/fwman/modules/{KVER}.failed").exists()  # refused before any build
