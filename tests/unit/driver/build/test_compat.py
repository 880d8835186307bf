"""fwman's compat patches (issue 39): the declaration parser, the shipped patch, and which kernels get it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver.build import compat
from fwman.driver.build.kbuild import kernel_patches
from fwman.driver.build.patches import Declaration, load_patches, masked_names
from fwman.host.live import LiveHost
from tests.support.env import FIXTURES
from tests.support.kernels import installed_pair

#: include/linux/pci.h of Debian 12's headers, the lines that matter (linux-headers-6.1.0-57-common 6.1.192-3 and
#: 6.1.0-47-common)
PCI_H_57 = """u32 pci_rebar_get_possible_sizes(struct pci_dev *pdev, int bar);
int __must_check pci_resize_resource(struct pci_dev *dev, int i, int size,
\t\t\t\t     int exclude_bars);
int pci_select_bars(struct pci_dev *dev, unsigned long flags);
"""
PCI_H_47 = """u32 pci_rebar_get_possible_sizes(struct pci_dev *pdev, int bar);
int __must_check pci_resize_resource(struct pci_dev *dev, int i, int size);
int pci_select_bars(struct pci_dev *dev, unsigned long flags);
"""
SHIPPED = "pci-resize-resource-exclude-bars.patch"
NV_PCI = "kernel-open/nvidia/nv-pci.c"


def test_the_declaration_of_debians_headers() -> None:
    assert compat.declared_arguments(PCI_H_57, "pci_resize_resource") == 4
    assert compat.declared_arguments(PCI_H_47, "pci_resize_resource") == 3
    assert compat.declared_arguments(PCI_H_47, "pci_enable_device") is None


def test_calls_comments_and_stubs_are_not_the_declaration() -> None:
    calls = (
        "static inline int f(struct pci_dev *d) { return pci_resize_resource(d, 1, 2); }\n"
        "static void g(void) { r = pci_resize_resource(a, b); if (pci_resize_resource(a)) x(); }\n"
        "/* int pci_resize_resource(struct pci_dev *dev, int i); */\n"
        "// int pci_resize_resource(int);\n"
    )
    assert compat.declared_arguments(calls, "pci_resize_resource") is None
    stub = "static inline int pci_resize_resource(struct pci_dev *d, int i, int s, int x) { return -ENOTSUPP; }"
    assert compat.declared_arguments(calls + stub, "pci_resize_resource") == 4
    assert compat.declared_arguments("int f(void);", "f") == 0
    assert compat.declared_arguments("void f(int (*cb)(int, int), int n);", "f") == 2
    assert compat.declared_arguments("int f(int a,\n", "f") is None  # cut off


@pytest.mark.skipif(installed_pair() is None, reason="needs a pair of Debian headers (tests/support/kernels.py)")
def test_the_parser_reads_the_installed_headers_as_the_test_suite_does() -> None:
    pair = installed_pair()
    assert pair is not None
    for kver, expected in zip(pair, (3, 4), strict=True):
        pci_h = Path(f"/usr/src/linux-headers-{kver.removesuffix('-amd64')}-common/include/linux/pci.h")
        assert compat.declared_arguments(pci_h.read_text(errors="replace"), "pci_resize_resource") == expected, kver


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["int a", "struct pci_dev *dev", "u64 size", "int (*cb)(int, int)", "const char *s"]),
             min_size=1, max_size=6),
    st.sampled_from(["int", "int __must_check", "static inline u32", "extern void"]),
    st.sampled_from([";", " { return 0; }", "\n\t__attribute__((unused));"]),
)  # fmt: skip
def test_a_declaration_gives_its_parameter_count(params: list[str], ret: str, end: str) -> None:
    joined = ",\n\t".join(params)
    text = f"int other(int x);\n{ret} pci_resize_resource({joined}){end}\n"
    assert compat.declared_arguments(text, "pci_resize_resource") == len(params)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_header_text_gives_a_count_or_none(text: str) -> None:
    n = compat.declared_arguments(text, "pci_resize_resource")
    assert n is None or n >= 0


def test_the_shipped_patch_and_what_it_is_for() -> None:
    (patch,) = compat.shipped_patches()
    assert patch.name == SHIPPED and patch.files == (NV_PCI,) and patch.kernels is None
    assert patch.declaration == Declaration("include/linux/pci.h", "pci_resize_resource", 4)
    assert patch.to_json()["declaration"] == "include/linux/pci.h declares pci_resize_resource() with 4 arguments"
    assert not patch.kernel_independent  # kernel-open only: the object cache key stays


def test_the_shipped_patch_adds_the_fourth_argument_to_the_stand_in_tree(tmp_path: Path) -> None:
    """The stand-in's nv-pci.c has the real fork's call site; the patch applies as fwman applies it (--fuzz=0)."""
    (patch,) = compat.shipped_patches()
    tree = tmp_path / "tree"
    (tree / NV_PCI).parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "kmod-tree/fork" / NV_PCI, tree / NV_PCI)
    argv = ["patch", "-p1", "--fuzz=0", "--forward", "--batch", "-i", patch.path]
    done = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tree / NV_PCI).read_text()
    assert "r = pci_resize_resource(pci_dev, NV_GPU_BAR1, requested_size, 0);" in text
    assert "requested_size);" not in text


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("no declaration\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n", "Declares"),
        ("Declares: /usr/include/linux/pci.h f 4\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n", "Declares"),
        ("Declares: include/linux/pci.h f 4\njust text\n", "diff"),
    ],
)
def test_what_is_not_a_compat_patch(text: str, field: str) -> None:
    with pytest.raises(ParseError) as info:
        compat.parse_compat_patch("x.patch", "/x.patch", text.encode())
    assert info.value.field == field


def _root(tmp_path: Path, pci_h: str, kver: str = "6.1.0-57-amd64") -> LiveHost:
    common = tmp_path / "usr/src/linux-headers-common"
    (common / "include/linux").mkdir(parents=True)
    (common / "include/linux/pci.h").write_text(pci_h)
    (tmp_path / "usr/src/linux-headers-arch/include").mkdir(parents=True)
    mod = tmp_path / "lib/modules" / kver
    mod.mkdir(parents=True)
    (mod / "source").symlink_to("/usr/src/linux-headers-common")
    (mod / "build").symlink_to("/usr/src/linux-headers-arch")
    return LiveHost(str(tmp_path))


OWNER = "--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-a\n+b\n"


def test_a_kernel_gets_the_patch_by_what_its_headers_declare(tmp_path: Path) -> None:
    four = _root(tmp_path / "four", PCI_H_57)
    assert [p.name for p in kernel_patches(four, "6.1.0-57-amd64")] == [SHIPPED]
    # the release says nothing: the same kernel name with three-argument headers gets no patch
    three = _root(tmp_path / "three", PCI_H_47)
    assert kernel_patches(three, "6.1.0-57-amd64") == []


def test_the_owners_patches_d_wins(tmp_path: Path) -> None:
    host = _root(tmp_path, PCI_H_57)
    patches_d = tmp_path / "etc/fwman/patches.d"
    patches_d.mkdir(parents=True)
    said: list[str] = []
    (patches_d / "10-mine.patch").write_text(OWNER.format(file=NV_PCI))  # the owner's fix of the same file
    assert [p.name for p in kernel_patches(host, "6.1.0-57-amd64", tell=said.append)] == ["10-mine.patch"]
    assert said == [
        f"fwman's compat patch {SHIPPED} left out: the owner's patches.d/10-mine.patch changes {NV_PCI} for "
        "6.1.0-57-amd64"
    ]
    (patches_d / "10-mine.patch").write_text("Kernels: ^6\\.17\\.\n" + OWNER.format(file=NV_PCI))
    assert [p.name for p in kernel_patches(host, "6.1.0-57-amd64")] == [SHIPPED]  # not for this kernel
    (patches_d / SHIPPED).write_text(OWNER.format(file="kernel-open/nvidia/nv.c"))  # same name: replaces it
    assert [p.name for p in kernel_patches(host, "6.1.0-57-amd64")] == [SHIPPED]
    assert kernel_patches(host, "6.1.0-57-amd64")[0].declaration is None  # the owner's, not fwman's
    (patches_d / SHIPPED).write_text("")  # empty: turned off, and not a patch of its own
    assert kernel_patches(host, "6.1.0-57-amd64") == []
    assert masked_names(host) == [SHIPPED] and [p.name for p in load_patches(host)] == ["10-mine.patch"]
