"""Print what a use case returned: its JSON document, or its text (``fwman.app.text``), then its failure."""

from __future__ import annotations

from typing import Any

from fwman.app.text import Cell, Line, Out, Result, Span
from fwman.cli.context import AppContext
from fwman.core.termtext import one_line

#: a style name of fwman.app.text -> click's style arguments
STYLES: dict[str, dict[str, Any]] = {
    "red": {"fg": "red"}, "yellow": {"fg": "yellow"}, "green": {"fg": "green"}, "blue": {"fg": "blue"},
    "magenta": {"fg": "magenta"},
    "bad": {"fg": "red", "bold": True}, "loud": {"fg": "yellow", "bold": True}, "good": {"fg": "green", "bold": True},
    "info": {"fg": "blue", "bold": True}, "change": {"fg": "cyan", "bold": True},
    "bold": {"bold": True}, "dim": {"dim": True},
}  # fmt: skip


def _span(app: AppContext, cell: Cell, block: bool = False) -> str:
    """Return ``cell`` styled; on one line (a newline written out) unless it is part of a ``block``."""
    text, style = (cell, "") if isinstance(cell, str) else (cell.text, cell.style)
    text = text if block else one_line(text)
    return app.style(text, **STYLES[style]) if style else text


def render(app: AppContext, out: Out) -> None:
    """Print ``out``: each line (on stderr where it says so) and each table; a line or a cell is one line (a
    newline in it written out; then wrapped at words to the width, fwman.cli.layout), a ``document`` keeps its
    newlines."""
    from fwman.cli.layout import wrap_pieces

    for item in out:
        if isinstance(item, Line) and item.block:
            app.echo("".join(_span(app, p, True) for p in item.parts), err=item.err)
        elif isinstance(item, Line):
            pieces = [(one_line(p.text), p.style) for p in item.parts]
            for pieces_line in wrap_pieces(pieces, app.env.width):
                app.echo("".join(_span(app, Span(t, s), True) for t, s in pieces_line), err=item.err)
        else:
            app.table(item.headers, [[_span(app, c) for c in row] for row in item.rows])


def finish(app: AppContext, schema: str, result: Result, as_json: bool) -> None:
    """Show ``result`` (the ``fwman.<schema>/1`` document with ``as_json``, else its text), then raise its
    failure, if any (the exit status is that error's)."""
    if as_json:
        app.emit_json(schema, result.to_json())
    else:
        render(app, result.text(app.verbose))
    failure = result.failure()
    if failure is not None:
        raise failure


__all__ = ["STYLES", "finish", "render"]
