"""The one parser of /proc/driver/nvidia/version (scan's inventory and audit both read through it)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.gpu.proc_version import ProcVersion, parse_proc_version

OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Mon"
PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.16  Fri Jan 24 03:17:16 UTC 2025"


def test_open_and_proprietary_lines() -> None:
    assert parse_proc_version(OPEN + "\nGCC version:  gcc version 12.2.0\n") == ProcVersion("580.159.04", "open", OPEN)
    assert parse_proc_version(PROPRIETARY + "\n") == ProcVersion("570.86.16", "proprietary", PROPRIETARY)


def test_the_architecture_in_the_line_is_not_a_version_and_text_is_kept_as_written() -> None:
    # x86_64 must not read as a version; 595.71.05 keeps its leading zero (the exact string is compared)
    line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  595.71.05  Release Build"
    assert parse_proc_version(line).version == "595.71.05"


def test_no_nvrm_line_gives_nothing() -> None:
    assert parse_proc_version("") == ProcVersion(None, None, None)
    assert parse_proc_version("GCC version: gcc 12.2.0\n") == ProcVersion(None, None, None)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_model_never_an_exception(text: str) -> None:
    parsed = parse_proc_version(text)
    assert parsed.flavour in (None, "open", "proprietary")
    assert parsed.version is None or parsed.version in text
