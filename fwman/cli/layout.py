"""Fitting text to a terminal's width: tables and long lines wrapped at word boundaries, never cut.

Pure functions over plain cells and styled pieces; the caller (``AppContext``) measures the width: ``COLUMNS``
when set, else the terminal's when stdout is one, else no limit (a pipe or a file gets one line per row, as
before, for grep and scripts).

A table wider than the width first wraps its widest cells inside their columns (each column keeps at least its
longest word); where even that cannot fit, every row is printed as a record: its first cell, then one
``HEADER: value`` line per other cell, each wrapped. No fact is dropped or shortened in either form.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

GAP = 2  # spaces between columns
Piece = tuple[str, str]  # (text, style name; "" plain)


@dataclass(frozen=True)
class Fitted:
    """A table fitted to a width: ``lines`` of cells (one list a printed line), the first ``header`` of them the
    header's; in ``records`` form each line is one cell (a row's first cell, then ``  HEADER: value`` lines)."""

    lines: list[list[str]]
    header: int
    records: bool = False


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None,
              measure: Callable[[str], int] = len) -> Fitted:  # fmt: skip
    """Return the table fitted so that no line is wider than ``width`` (None: no limit): cells wrapped inside
    their columns, or the record form (see the module's docstring). ``measure`` gives a cell's printed width
    (styled cells are measured without their escapes and never broken). Never raises."""
    n = len(headers)
    cells = [list(headers), *([*r, *[""] * (n - len(r))][:n] for r in rows)]
    natural = [max(measure(row[i]) for row in cells) for i in range(n)]
    if width is None or sum(natural) + GAP * (n - 1) <= width:
        return Fitted(cells, 1)
    # the narrowest each column can be: its longest word (styled cells are never wrapped: they stay whole)
    least = [max(max((len(w) for w in row[i].split()), default=0) if measure(row[i]) == len(row[i])
                 else measure(row[i]) for row in cells) for i in range(n)]  # fmt: skip
    room = width - GAP * (n - 1)
    if sum(least) > room:
        return Fitted(_records(headers, cells[1:], width, measure), 0, records=True)
    widths = list(least)
    spare = room - sum(widths)
    wants = [natural[i] - least[i] for i in range(n)]
    total = sum(wants)
    for i in range(n):  # share what is left in proportion to what each column would still take
        widths[i] += min(wants[i], spare * wants[i] // total) if total else 0
    lines: list[list[str]] = []
    header = 0
    for number, row in enumerate(cells):
        parts = [
            [row[i]] if measure(row[i]) != len(row[i]) or measure(row[i]) <= widths[i]
            else textwrap.wrap(row[i], widths[i], break_long_words=False, break_on_hyphens=False) or [""]
            for i in range(n)
        ]  # fmt: skip
        lines += [[p[k] if k < len(p) else "" for p in parts] for k in range(max(len(p) for p in parts))]
        if number == 0:
            header = len(lines)
    return Fitted(lines, header)


def _records(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int,
             measure: Callable[[str], int]) -> list[list[str]]:  # fmt: skip
    """Return each row as its first cell, then ``  HEADER: value`` lines wrapped to ``width``."""
    lines: list[list[str]] = []
    for row in rows:
        first = f"{headers[0]} {row[0]}" if row[0] else headers[0]
        if measure(first) != len(first) or len(first) <= width:  # styled, or fits: whole
            lines.append([first])
        else:
            wrapped = textwrap.wrap(first, width, break_long_words=False, break_on_hyphens=False)
            lines += [[part if k == 0 else f"  {part}"] for k, part in enumerate(wrapped)]
        for header, cell in zip(headers[1:], row[1:], strict=False):
            if not cell:
                continue
            lead = f"  {header}: "
            if measure(cell) != len(cell):  # styled: whole
                lines.append([lead + cell])
                continue
            if len(lead) + max((len(w) for w in cell.split()), default=0) > width:
                # a word (a long path) that does not fit after the header: the value goes below it, indented
                # less, so that the word stays whole and inside the width where it can
                lines.append([lead.rstrip()])
                lead = "    "
            wrapped = textwrap.wrap(cell, max(width - len(lead), 20), break_long_words=False, break_on_hyphens=False)
            lines += [[(lead if k == 0 else " " * len(lead)) + part] for k, part in enumerate(wrapped or [""])]
    return lines


def wrap_pieces(pieces: Sequence[Piece], width: int | None) -> list[list[Piece]]:
    """Return the styled line ``pieces`` as one or more lines no wider than ``width`` (None: as it is), broken
    at spaces only; a continuation is indented two spaces past the line's own indentation. Never raises."""
    text = "".join(t for t, _ in pieces)
    if width is None or len(text) <= width or not text.strip():
        return [list(pieces)]
    indent = len(text) - len(text.lstrip(" "))
    hang = " " * min(indent + 2, max(width // 2, 0))
    # words with their style, and the spaces before each (kept as they were inside a line)
    words: list[tuple[str, list[Piece]]] = []
    gap = ""
    current: list[Piece] = []
    for t, style in pieces:
        for ch in t:
            if ch == " ":
                if current:
                    words.append((gap, current))
                    current, gap = [], ""
                gap += ch
            elif current and current[-1][1] == style:
                current[-1] = (current[-1][0] + ch, style)
            else:
                current.append((ch, style))
    if current:
        words.append((gap, current))
    lines: list[list[Piece]] = [[]]
    used = 0
    for k, (space, word) in enumerate(words):
        size = sum(len(t) for t, _ in word)
        if k == 0:
            lines[-1] = [(space, ""), *word]
            used = len(space) + size
        elif used + len(space) + size <= width:
            lines[-1] += [(space, ""), *word]
            used += len(space) + size
        else:
            # a word that would not fit after the hanging indent (a long command or path) starts further left:
            # whole, and inside the width where it is not wider than the width itself
            lead = hang if len(hang) + size <= width else " " * max(width - size, 0)
            lines.append([(lead, ""), *word])
            used = len(lead) + size
    return lines
