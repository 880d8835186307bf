"""The patches.d parser and what a patch does to the object cache key (issue 26, item 2)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import ParseError
from fwman.driver.build.patches import KernelPatch, cache_salt, failed_hunks, parse_patch

OPEN = "--- a/kernel-open/nvidia/nv-pci.c\n+++ b/kernel-open/nvidia/nv-pci.c\n@@ -1 +1 @@\n-a\n+b\n"
SHARED = "--- a/src/nvidia/arch/x.c\n+++ b/src/nvidia/arch/x.c\n@@ -1 +1 @@\n-a\n+b\n"


def test_kernels_line_and_files() -> None:
    p = parse_patch("10.patch", "/etc/fwman/patches.d/10.patch", ("Kernels: ^6\\.17\\.\nwhy\n" + OPEN).encode())
    assert p.kernels == "^6\\.17\\." and p.files == ("kernel-open/nvidia/nv-pci.c",)
    assert p.applies_to("6.17.13-pve") and not p.applies_to("6.1.0-53-amd64")
    every = parse_patch("20.patch", "/p/20.patch", OPEN.encode())
    assert every.kernels is None and every.applies_to("6.1.0-50-amd64")  # no Kernels: every kernel, as DKMS


def test_a_kernels_line_inside_the_diff_is_not_the_pattern() -> None:
    p = parse_patch("x.patch", "/p", (OPEN + "+Kernels: nothing\n").encode())
    assert p.kernels is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("just text\n", "not a unified diff"),
        ("--- a/../x\n+++ b/../x\n", "not a -p1 path"),
        ("--- /etc/x\n+++ /etc/passwd\n", "not a -p1 path"),
        ("Kernels: ([\n" + OPEN, "not a regular expression"),
    ],
)
def test_what_is_not_a_patch(text: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        parse_patch("bad.patch", "/p", text.encode())


@given(st.binary(max_size=2000))
@settings(max_examples=300)
def test_any_bytes_are_a_patch_or_a_parse_error(data: bytes) -> None:
    with contextlib.suppress(ParseError):
        assert isinstance(parse_patch("x.patch", "/p", data), KernelPatch)


def test_only_kernel_independent_patches_change_the_cache_key() -> None:
    kopen = parse_patch("a.patch", "/p", OPEN.encode())
    shared = parse_patch("b.patch", "/p", SHARED.encode())
    assert cache_salt([]) == "" and cache_salt([kopen]) == ""  # kernel-open/ is rebuilt per kernel anyway
    assert shared.sha256 in cache_salt([kopen, shared]) and kopen.sha256 not in cache_salt([kopen, shared])


def test_failed_hunks_name_the_file() -> None:
    out = (
        "checking file kernel-open/nvidia/nv-pci.c\n"
        "patching file kernel-open/nvidia/nv-pci.c\n"
        "Hunk #1 FAILED at 14.\n"
        "1 out of 1 hunk FAILED -- saving rejects to file kernel-open/nvidia/nv-pci.c.rej\n"
    )
    assert failed_hunks(out)[0] == "kernel-open/nvidia/nv-pci.c: Hunk #1 FAILED at 14."
