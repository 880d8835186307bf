"""Styled lines from the use cases (``fwman.app.text``) rendered for the terminal: the one map of style names."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fwman.app.text import Line
from fwman.cli.context import AppContext

#: the style names results use, and what each looks like on a colour terminal
STYLES: dict[str, dict[str, Any]] = {
    "bold": {"bold": True},
    "dim": {"dim": True},
    "red": {"fg": "red"},
    "red!": {"fg": "red", "bold": True},
    "yellow": {"fg": "yellow"},
    "yellow!": {"fg": "yellow", "bold": True},
    "green": {"fg": "green"},
    "green!": {"fg": "green", "bold": True},
    "cyan!": {"fg": "cyan", "bold": True},
    "blue": {"fg": "blue"},
    "blue!": {"fg": "blue", "bold": True},
    "magenta": {"fg": "magenta"},
}


def shown(app: AppContext, line: Line) -> str:
    """Return ``line`` as text for ``app``'s stdout: each piece in its style (plain without colour)."""
    if isinstance(line, str):
        return line
    return "".join(app.style(text, **STYLES[style]) if style else text for text, style in line)


def echo_lines(app: AppContext, lines: Iterable[Line]) -> None:
    """Print each line, styled."""
    for line in lines:
        app.echo(shown(app, line))
