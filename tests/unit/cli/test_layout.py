"""Fitting to a terminal's width (fwman.cli.layout): tables and long lines wrap at words, never cut a fact; and
the bundled host's scan, doctor and audit at COLUMNS=80."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fwman.cli.layout import fit_table, wrap_pieces
from tests.support.env import EXAMPLE_HOST, FwmanEnv

word = st.from_regex(r"[A-Za-z0-9:./()-]{1,14}", fullmatch=True)
cell = st.lists(word, max_size=5).map(" ".join)


def _words(lines: list[list[str]]) -> list[str]:
    return [w for line in lines for c in line for w in c.split()]


@given(st.lists(word, min_size=1, max_size=6), st.lists(st.lists(cell, max_size=7), max_size=6),
       st.integers(min_value=10, max_value=200))  # fmt: skip
def test_a_fitted_table_keeps_every_word_and_no_line_is_wider_than_allowed(headers: list[str],
                                                                          rows: list[list[str]],
                                                                          width: int) -> None:  # fmt: skip
    fitted = fit_table(headers, rows, width)
    n = len(headers)
    if fitted.records:
        printed = [c for (c,) in fitted.lines]
        for line in printed:  # a line is wider only where a single word is
            assert len(line) <= width or max(len(w) for w in line.split()) > width - 30
        for row in rows:
            for w in " ".join(row[:n]).split():
                assert any(w in line for line in printed)
        return
    widths = [max(len(line[i]) for line in fitted.lines) for i in range(n)]
    assert sum(widths) + 2 * (n - 1) <= width or fitted.lines[: len(rows) + 1] == [headers, *rows]
    expected = [w for row in [headers, *[[*r, *[""] * n][:n] for r in rows]] for c in row for w in c.split()]
    assert sorted(_words(fitted.lines)) == sorted(expected)


def test_a_table_that_fits_is_left_as_it_is_and_no_width_means_no_limit() -> None:
    rows = [["01:00.0", "RTX 3090"], ["21:00.0", "RTX 3090"]]
    assert fit_table(["BUS", "NAME"], rows, 80).lines == [["BUS", "NAME"], *rows]
    assert fit_table(["BUS", "NAME"], [["x" * 300, "y"]], None).lines == [["BUS", "NAME"], ["x" * 300, "y"]]


@given(st.lists(st.tuples(st.lists(word, min_size=1, max_size=6).map(" ".join), st.sampled_from(["", "bad", "dim"])),
                min_size=1, max_size=6), st.integers(min_value=20, max_value=120))  # fmt: skip
def test_a_wrapped_line_keeps_its_words_and_styles_in_order(pieces: list[tuple[str, str]], width: int) -> None:
    line = [(("   " if k == 0 else " ") + t, s) for k, (t, s) in enumerate(pieces)]
    wrapped = wrap_pieces(line, width)
    styled = [(w, s) for t, s in line for w in t.split()]
    assert [(w, s) for ln in wrapped for t, s in ln for w in t.split()] == styled
    for ln in wrapped:
        text = "".join(t for t, _ in ln)
        assert len(text) <= width or len(text.split()) == 1
    assert all("".join(t for t, _ in ln).startswith("     ") for ln in wrapped[1:])  # hung past the indent


def test_the_bundled_host_at_80_columns() -> None:
    env = FwmanEnv(variables={"COLUMNS": "80"})
    for argv in (["scan"], ["doctor"], ["audit"]):
        r = env("--snapshot", str(EXAMPLE_HOST), *argv)
        lines = (r.stdout + r.stderr).splitlines()
        too_wide = [ln for ln in lines if len(ln) > 80]  # not even a line of one long path or command
        assert too_wide == [], (argv, too_wide)
    scan = env("--snapshot", str(EXAMPLE_HOST), "scan").stdout
    assert "BUS 41:00.0" in scan and "  VBIOS: 94.02.26.48.15" in scan and "  REBAR OFFERED: none" in scan
    # wider, and without COLUMNS on a pipe, the table as it was
    assert "41:00.0  10de:2204  3842:3987" in FwmanEnv(variables={"COLUMNS": "200"})("--snapshot", str(EXAMPLE_HOST),
                                                                                     "scan").stdout  # fmt: skip
    assert "41:00.0  10de:2204  3842:3987" in FwmanEnv()("--snapshot", str(EXAMPLE_HOST), "scan").stdout


def test_a_word_too_long_for_its_indent_starts_further_left_whole_and_inside_the_width() -> None:
    """doctor's ACS fix ends in a 76-character kernel parameter: hung at 12 it would print 88 columns."""
    param = "`pci=disable_acs_redir=0000:00:01.1;0000:20:01.1;0000:40:01.1;0000:60:01.1`."
    lines = ["".join(t for t, _ in ln) for ln in wrap_pieces([("          fix: or boot with " + param, "")], 80)]
    assert lines == ["          fix: or boot with", " " * (80 - len(param)) + param]
    wider = "x" * 90  # wider than the width itself: whole, at the margin (cutting it would lose the fact)
    assert ["".join(t for t, _ in ln) for ln in wrap_pieces([("  a " + wider, "")], 80)] == ["  a", wider]


def test_a_record_value_whose_word_does_not_fit_after_its_header_goes_below_it() -> None:
    path = "/var/lib/lxc/101/rootfs/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.16"
    fitted = fit_table(["COMPONENT", "WHERE"], [["container 101: libnvidia-ml.so " * 3, path]], 80)
    assert fitted.records and fitted.lines[-2:] == [["  WHERE:"], ["    " + path]]
