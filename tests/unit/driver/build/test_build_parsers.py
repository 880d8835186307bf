"""Build pipeline pieces that need no compiler: failure parsing, tree arguments, source identity, manifests,
modules.dep, the object cache (real cp/touch/find on a temp root), the module lock."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import MissingError, ParseError, UsageError
from fwman.driver.build import objcache
from fwman.driver.build.checkout import cache_dir
from fwman.driver.build.failure import parse_build_failure
from fwman.driver.build.install import parse_modules_dep
from fwman.driver.build.kbuild import kernel_tree_args
from fwman.driver.build.lock import LockTimeout, module_lock
from fwman.driver.build.manifest import Manifest, ModuleEntry, manifest_is_current, write_manifest
from fwman.driver.build.source import check_source_options, local_source, tree_hash
from fwman.driver.forks.config import clonable_url
from fwman.host.live import LiveHost

GCC_LOG = """\
make[1]: Entering directory '/var/cache/fwman/build/6.1.0-53-amd64/kernel-open'
  CC [M]  /var/cache/fwman/build/6.1.0-53-amd64/kernel-open/nvidia/nv-pci.o
/var/cache/fwman/build/6.1.0-53-amd64/kernel-open/nvidia/nv-pci.c: In function 'nv_resize_pcie_bars':
/var/cache/fwman/build/6.1.0-53-amd64/kernel-open/nvidia/nv-pci.c:17:12: error: too few arguments to function 'pci_resize_resource'
   17 |     return pci_resize_resource(pdev, bar, size);
/var/cache/fwman/build/6.1.0-53-amd64/kernel-open/nvidia/nv-pci.c:18:1: error: control reaches end of non-void function
make[4]: *** [scripts/Makefile.build:255: nv-pci.o] Error 1
"""  # noqa: E501


def test_first_compiler_error_names_file_relative_to_the_tree() -> None:
    f = parse_build_failure(GCC_LOG, "/var/cache/fwman/build/6.1.0-53-amd64")
    assert (f.file, f.line) == ("kernel-open/nvidia/nv-pci.c", 17)
    assert f.message == "too few arguments to function 'pci_resize_resource'"
    assert f.excerpt[1].strip().startswith("17 |")


def test_relative_file_of_a_sub_make_is_placed_in_its_directory() -> None:
    log = (
        "make[1]: Entering directory '/b/tree/src/nvidia'\n"
        "cc -c -o _out/Linux_x86_64/nv-rm-core.o nv-rm-core.c\n"
        "nv-rm-core.c:12:1: error: unknown type name 'this'\n"
        "make[1]: Leaving directory '/b/tree/src/nvidia'\n"
    )
    f = parse_build_failure(log, "/b/tree")
    assert f.file == "src/nvidia/nv-rm-core.c" and f.line == 12


def test_conftest_and_make_failures_without_a_compiler_line() -> None:
    conftest = "sh ./conftest.sh cc /x /x conftest\nconftest: cannot compile against the kernel headers in /x\n"
    assert parse_build_failure(conftest).message.startswith("conftest: cannot compile")
    assert parse_build_failure("<command-line>: fatal error: /x/kconfig.h: No such file or directory\n").message == (
        "/x/kconfig.h: No such file or directory"
    )
    assert parse_build_failure("foo\nmake: *** [Makefile:34: modules] Error 2\n").message == (
        "[Makefile:34: modules] Error 2"
    )
    assert parse_build_failure("").message == "the build failed without output"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.one_of(st.none(), st.text(max_size=20)))
def test_failure_parser_never_raises(log: str, tree: str | None) -> None:
    f = parse_build_failure(log, tree)
    assert isinstance(f.message, str) and f.message


def test_kernel_tree_args_use_split_headers_when_present(tmp_path: Path) -> None:
    base = tmp_path / "lib/modules/6.1.0-50-amd64"
    (tmp_path / "usr/src/hdr-arch/include").mkdir(parents=True)
    (tmp_path / "usr/src/hdr-common/include").mkdir(parents=True)
    base.mkdir(parents=True)
    (base / "build").symlink_to("/usr/src/hdr-arch")
    host = LiveHost(str(tmp_path))
    args = kernel_tree_args(host, "6.1.0-50-amd64")
    assert args == [
        "KERNEL_UNAME=6.1.0-50-amd64",
        f"SYSSRC={tmp_path}/usr/src/hdr-arch",
        f"SYSOUT={tmp_path}/usr/src/hdr-arch",
    ]
    (base / "source").symlink_to("/usr/src/hdr-common")
    args = kernel_tree_args(host, "6.1.0-50-amd64")
    assert args[1:] == [f"SYSSRC={tmp_path}/usr/src/hdr-common", f"SYSOUT={tmp_path}/usr/src/hdr-arch"]


def test_source_options_and_fork_names() -> None:
    with pytest.raises(UsageError):
        check_source_options(None, None, None)
    with pytest.raises(UsageError):
        check_source_options("/src", "a/b", "570.86.16-p2p")
    with pytest.raises(UsageError):
        check_source_options(None, "a/b", None)
    check_source_options(None, "a/b", "570.86.16-p2p")
    assert (
        clonable_url("aikitoria/open-gpu-kernel-modules") == "https://github.com/aikitoria/open-gpu-kernel-modules.git"
    )
    assert clonable_url("file:///srv/fork.git") == "file:///srv/fork.git"
    a, b = cache_dir("https://x/a.git"), cache_dir("https://x/b.git")
    assert a != b and a.startswith("/var/cache/fwman/src/")


def _tree(root: Path) -> Path:
    tree = root / "src/fork"
    (tree / "kernel-open").mkdir(parents=True)
    (tree / "src/nvidia").mkdir(parents=True)
    (tree / "Makefile").write_text("modules:\n")
    (tree / "src/nvidia/a.c").write_text("int a;\n")
    return tree


def test_tree_hash_follows_sources_and_ignores_products(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    host = LiveHost(str(tmp_path))
    first = tree_hash(host, "/src/fork")
    (tree / "src/nvidia/_out").mkdir()
    (tree / "src/nvidia/_out/a.o").write_bytes(b"\x7fELF")
    (tree / "kernel-open/nvidia.ko").write_bytes(b"\x7fELF")
    assert tree_hash(host, "/src/fork") == first
    (tree / "src/nvidia/a.c").write_text("int a = 1;\n")
    assert tree_hash(host, "/src/fork") != first
    source = local_source(host, "/src/fork")
    assert source.source_id.startswith("tree:") and source.commit is None
    with pytest.raises(MissingError):
        local_source(host, "/nowhere")


def _manifest(kver: str, path: str, data: bytes) -> Manifest:
    import hashlib

    entry = ModuleEntry(path, hashlib.sha256(data).hexdigest(), len(data))
    return Manifest(kver, "f", "570.86.16-p2p", "abc", {"nvidia": entry}, "2026-01-01T00:00:00+00:00")


def test_manifest_round_trip_and_fast_currency_check(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    ko = tmp_path / "lib/modules/k1/updates/fwman/nvidia.ko"
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"module")
    m = _manifest("k1", "/lib/modules/k1/updates/fwman/nvidia.ko", b"module")
    assert Manifest.from_json(m.to_json()) == m
    assert not manifest_is_current(host, "k1")
    write_manifest(host, m)
    doc = json.loads((tmp_path / "var/lib/fwman/modules/k1.json").read_text())
    assert set(doc) >= {"kernel", "fork", "branch", "commit", "modules", "built_at"}
    assert manifest_is_current(host, "k1")
    ko.write_bytes(b"modul")  # another file of another size: not current
    assert not manifest_is_current(host, "k1")
    ko.unlink()
    assert not manifest_is_current(host, "k1")
    (tmp_path / "var/lib/fwman/modules/k1.json").write_text("{broken")
    assert not manifest_is_current(host, "k1")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=70)),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.sampled_from(
        ["kernel", "modules", "nvidia", "path", "sha256", "size", "fork", "built_at"]), c, max_size=4)),
    max_leaves=12,
).map(lambda v: json.dumps(v).encode())))  # fmt: skip
def test_manifest_parser_gives_a_model_or_a_parse_error(data: bytes) -> None:
    try:
        m = Manifest.from_json(data)
    except ParseError:
        return
    assert m.kernel and m.modules


def test_modules_dep() -> None:
    text = "updates/fwman/nvidia.ko:\nupdates/fwman/nvidia-uvm.ko: updates/fwman/nvidia.ko\nkernel/x/y.ko.zst:\n"
    assert parse_modules_dep(text) == {
        "nvidia": "updates/fwman/nvidia.ko",
        "nvidia_uvm": "updates/fwman/nvidia-uvm.ko",
        "y": "kernel/x/y.ko.zst",
    }
    with pytest.raises(ParseError):
        parse_modules_dep("garbage line\n")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_modules_dep_parser_gives_a_model_or_a_parse_error(text: str) -> None:
    try:
        result = parse_modules_dep(text)
    except ParseError as e:
        assert e.offset is not None
        return
    assert all("-" not in name for name in result)


def test_object_cache_store_and_restore(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    tree = tmp_path / "build/k1"
    for rel in objcache.OBJECT_FILES:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_bytes(b"obj " + rel.encode())
    (tree / "src/nvidia/_out/Linux_x86_64/part.o").write_bytes(b"part")
    key = objcache.cache_key("tree:abc", "cc (Debian 12.2.0-14) 12.2.0")
    assert key != objcache.cache_key("tree:abc", "cc (Debian 13.1.0) 13.1.0")
    assert key != objcache.cache_key("tree:abd", "cc (Debian 12.2.0-14) 12.2.0")
    assert not objcache.has_entry(host, key)
    assert objcache.store(host, key, "/build/k1")
    assert objcache.has_entry(host, key)
    # only the two objects are kept: with `-o` make never looks at the intermediates
    entry = tmp_path / objcache.entry_dir(key).lstrip("/")
    assert sorted(str(p.relative_to(entry)) for p in entry.rglob("*") if p.is_file()) == sorted(objcache.OBJECT_FILES)

    other = tmp_path / "build/k2"
    (other / "src/nvidia").mkdir(parents=True)
    source = other / "src/nvidia/a.c"
    source.write_text("int a;\n")
    os.utime(source, (4_000_000_000, 4_000_000_000))  # a checkout newer than the cached objects
    objcache.restore(host, key, "/build/k2")
    for rel in objcache.OBJECT_FILES:
        assert (other / rel).read_bytes() == b"obj " + rel.encode()
    assert objcache.assume_made() == ["-o", objcache.OBJECT_FILES[0], "-o", objcache.OBJECT_FILES[1]]


def test_object_cache_sees_a_sub_make_that_ran_anyway() -> None:
    ran = "make -C src/nvidia\nmake -C src/nvidia-modeset\nmake[1]: Nothing to be done for 'all'.\n"
    assert objcache.rebuilt_anyway(ran)
    assert not objcache.rebuilt_anyway(
        "cd kernel-open/nvidia/ && ln -sf ../../src/nvidia/_out/x.o x\nmake -C kernel-open modules\n"
    )


def test_object_cache_refuses_a_half_build(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    first = tmp_path / "build/k1" / objcache.OBJECT_FILES[0]
    first.parent.mkdir(parents=True)
    first.write_bytes(b"only one")
    assert not objcache.store(host, "k", "/build/k1")
    assert not (tmp_path / "var/cache/fwman/objects/k").exists()


def test_lock_times_out_while_held(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    with module_lock(host, timeout=0):
        with pytest.raises(LockTimeout) as info, module_lock(LiveHost(str(tmp_path)), timeout=0.3, poll=0.05):
            pass
        assert info.value.exit_code == 3
    with module_lock(host, timeout=0):  # released again
        pass


def test_newer_branches_come_from_the_branch_cache_only(tmp_path: Path) -> None:
    from fwman.driver.build.source import Source, newer_branches

    host = LiveHost(str(tmp_path))
    source = Source(
        "/src", "abc", "abc", "https://github.com/aikitoria/open-gpu-kernel-modules.git", "570.86.16-p2p", "u"
    )
    assert newer_branches(host, source) == []  # no cache: nothing, and no network
    cache = tmp_path / "var/cache/fwman/branches.json"
    cache.parent.mkdir(parents=True)
    entry = {"fork": "aikitoria", "source": "git", "fetched_at": "2026-01-01T00:00:00+00:00"}
    cache.write_text(
        json.dumps(
            {
                "format": "fwman-branch-cache",
                "version": 1,
                "forks": {
                    "https://github.com/aikitoria/open-gpu-kernel-modules": {
                        **entry,
                        "branches": ["main", "565.57.01-p2p", "570.86.16-p2p", "575.51.02-p2p", "580.65.06-p2p"],
                    },
                    "https://github.com/tinygrad/open-gpu-kernel-modules": {
                        **entry,
                        "fork": "tinygrad",
                        "branches": ["550.54.15-p2p", "575.51.02"],
                    },
                },
            }
        )
    )
    assert newer_branches(host, source) == ["aikitoria: 575.51.02-p2p", "aikitoria: 580.65.06-p2p"]
    tree = tmp_path / "local"
    tree.mkdir()
    (tree / "version.mk").write_text("NVIDIA_VERSION = 575.51.02\n")
    local = Source("/local", "tree:x", None, None, None, "/local")
    assert newer_branches(host, local) == ["aikitoria: 580.65.06-p2p"]
