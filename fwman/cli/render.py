"""Print what a use case returned: its JSON document, or its text (``fwman.app.text``), then its failure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fwman.app.text import Cell, Line, Out, PieceLine, Result, Span
from fwman.cli.context import AppContext

#: a style name of fwman.app.text -> click's style arguments
STYLES: dict[str, dict[str, Any]] = {
    "red": {"fg": "red"}, "yellow": {"fg": "yellow"}, "green": {"fg": "green"}, "blue": {"fg": "blue"},
    "bad": {"fg": "red", "bold": True}, "loud": {"fg": "yellow", "bold": True}, "good": {"fg": "green", "bold": True},
    "bold": {"bold": True},
    # the firmware commands' names (fwman.app.text.PieceLine), until they move to the names above
    "dim": {"dim": True}, "red!": {"fg": "red", "bold": True}, "yellow!": {"fg": "yellow", "bold": True},
    "green!": {"fg": "green", "bold": True}, "cyan!": {"fg": "cyan", "bold": True},
    "blue!": {"fg": "blue", "bold": True}, "magenta": {"fg": "magenta"},
}  # fmt: skip


def _span(app: AppContext, cell: Cell) -> str:
    if isinstance(cell, str):
        return cell
    return app.style(cell.text, **STYLES[cell.style]) if cell.style else cell.text


def render(app: AppContext, out: Out) -> None:
    """Print ``out``: each line (on stderr where it says so) and each table."""
    for item in out:
        if isinstance(item, Line):
            app.echo("".join(_span(app, p) for p in item.parts), err=item.err)
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


def shown(app: AppContext, line: PieceLine) -> str:
    """Return ``line`` (the firmware commands' form) as text for ``app``'s stdout, each piece in its style."""
    if isinstance(line, str):
        return line
    return "".join(app.style(text, **STYLES[style]) if style else text for text, style in line)


def echo_lines(app: AppContext, lines: Iterable[PieceLine]) -> None:
    """Print each line of the firmware commands' form, styled."""
    for line in lines:
        app.echo(shown(app, line))


__all__ = ["Span", "echo_lines", "finish", "render", "shown"]
