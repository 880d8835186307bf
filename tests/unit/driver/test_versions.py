"""Driver version strings and P2P branch names: parsing, ordering, round trip."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.driver_version import DriverVersion
from fwman.core.errors import ParseError
from fwman.driver.versions import Revision, is_p2p_name, nearest, newest_first, parse_p2p_branch, parse_version_mk


@pytest.mark.parametrize("text", ["570.86.16", "565.77", "595.71.05", "550.54.15", "96.43.23"])
def test_parse_round_trips_exact_text(text: str) -> None:
    assert str(DriverVersion.parse(text)) == text


def test_leading_zero_is_kept_but_ordered_numerically() -> None:
    v = DriverVersion.parse("595.71.05")
    assert v.patch == 5 and str(v) == "595.71.05"
    assert DriverVersion.parse("595.71.04") < v < DriverVersion.parse("595.71.10")


def test_total_ordering() -> None:
    texts = ["595.71.05", "565.77", "570.86.16", "550.90.07", "565.57.01", "560.35.03", "570.133.07"]
    ordered = [str(v) for v in sorted(DriverVersion.parse(t) for t in texts)]
    assert ordered == ["550.90.07", "560.35.03", "565.57.01", "565.77", "570.86.16", "570.133.07", "595.71.05"]


def test_two_part_version_sorts_before_same_minor_with_patch() -> None:
    assert DriverVersion.parse("565.77") < DriverVersion.parse("565.77.1")
    assert DriverVersion.parse("565.77") == DriverVersion.parse(" 565.77 ")


@pytest.mark.parametrize("bad", ["", "570", "570.", "v570.86.16", "570.86.16-p2p", "570.86.16.1", "abc", "5.7"])
def test_not_a_version_is_a_parse_error(bad: str) -> None:
    with pytest.raises(ParseError, match="not an NVIDIA driver version"):
        DriverVersion.parse(bad)


def test_search_in_proc_version_line() -> None:
    line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16)"
    assert str(DriverVersion.search(line)) == "580.159.04"
    assert DriverVersion.search("no version here") is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("570.86.16-p2p", "570.86.16"),
        ("565.77-p2p", "565.77"),
        ("595.71.05-p2p", "595.71.05"),
        ("refs/heads/550.54.15-p2p", "550.54.15"),
        ("515", None),
        ("515.65", None),
        ("VK551_06", None),
        ("main", None),
        ("570.86.16", None),
        ("-p2p", None),
        ("570.86.16-p2p-old", None),
        ("610.57.04-p2p-v3", "610.57.04"),  # aikitoria's revisions: the name is a hint, the tree says
        ("570.86.16-p2p-v2", "570.86.16"),
        ("bar1-p2p", None),
        ("570.86.16-v2", None),
        (" 570.86.16-p2p", None),
    ],
)
def test_parse_p2p_branch(name: str, expected: str | None) -> None:
    got = parse_p2p_branch(name)
    assert (str(got) if got else None) == expected


def test_branch_and_run_names() -> None:
    v = DriverVersion.parse("570.86.16")
    assert v.branch_name == "570.86.16-p2p"
    assert v.run_file == "NVIDIA-Linux-x86_64-570.86.16.run"


def test_nearest() -> None:
    have = [DriverVersion.parse(t) for t in ["550.90.07", "565.77", "570.86.16"]]
    below, above = nearest(DriverVersion.parse("570.124.04"), have)
    assert (str(below), above) == ("570.86.16", None)
    below, above = nearest(DriverVersion.parse("560.35.03"), have)
    assert (str(below), str(above)) == ("550.90.07", "565.77")


versions = st.builds(
    lambda a, b, c: f"{a}.{b}" + (f".{c:02d}" if c is not None else ""),
    st.integers(10, 9999),
    st.integers(0, 999),
    st.one_of(st.none(), st.integers(0, 999)),
)


@settings(max_examples=200, deadline=None)
@given(versions)
def test_property_round_trip(text: str) -> None:
    assert str(DriverVersion.parse(text)) == text
    assert str(parse_p2p_branch(text + "-p2p")) == text


@settings(max_examples=200, deadline=None)
@given(versions, versions)
def test_property_order_is_consistent(a: str, b: str) -> None:
    va, vb = DriverVersion.parse(a), DriverVersion.parse(b)
    assert (va < vb) + (va == vb) + (va > vb) == 1
    if va == vb:
        assert hash(va) == hash(vb) and str(va) == str(vb)
    assert sorted([va, vb]) == sorted([vb, va])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_property_any_text_parses_or_raises_parse_error(text: str) -> None:
    with contextlib.suppress(ParseError):
        DriverVersion.parse(text)
    parse_p2p_branch(text)  # never raises
    DriverVersion.search(text)  # never raises


# the version.mk of NVIDIA/open-gpu-kernel-modules (550.40.82: `NVIDIA_VERSION = 550.40.82` first, make rules after)
REAL_VERSION_MK = """NVIDIA_VERSION = 550.40.82

# This file.
VERSION_MK_FILE := $(lastword $(MAKEFILE_LIST))
$(OUTPUTDIR)/version.h: $(VERSION_MK_FILE)
\t@$(MKDIR) $(OUTPUTDIR)
\t@$(ECHO) '#define NVIDIA_VERSION "$(NVIDIA_VERSION)"' > $@
"""


def test_parse_version_mk_reads_nvidias_file() -> None:
    assert str(parse_version_mk(REAL_VERSION_MK)) == "550.40.82"
    assert str(parse_version_mk("NVIDIA_VERSION = 595.71.05\nNVIDIA_NVID_VERSION = 595.71.05\n")) == "595.71.05"
    with pytest.raises(ParseError, match="no 'NVIDIA_VERSION = X' line"):
        parse_version_mk("NVIDIA_NVID_VERSION = 595.71.05\n")
    with pytest.raises(ParseError, match="not a driver version"):
        parse_version_mk("NVIDIA_VERSION = $(SOMETHING)\n")


@given(st.text())
@settings(max_examples=300)
def test_parse_version_mk_any_text_is_a_version_or_a_parse_error(text: str) -> None:
    with contextlib.suppress(ParseError):
        assert isinstance(parse_version_mk(text), DriverVersion)


def test_p2p_names_and_newest_first() -> None:
    assert is_p2p_name("bar1-p2p") and is_p2p_name("570.86.16-P2P-v2") and not is_p2p_name("515")
    revs = [
        Revision(branch="a-p2p", date="2026-03-01T10:00:00+00:00"),
        Revision(branch="b-p2p"),  # unknown date: last
        Revision(branch="c-p2p", date="2026-06-01T12:00:00+02:00"),
        Revision(branch="d-p2p", date="2026-06-01T11:00:00+00:00"),  # later than c's instant (10:00 UTC)
    ]
    assert [r.branch for r in newest_first(revs)] == ["d-p2p", "c-p2p", "a-p2p", "b-p2p"]
