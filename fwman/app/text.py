"""What a command tells people, as data: lines of styled spans and tables, made by the use cases' results. A result of
``fwman/app/`` owns both its shapes: ``to_json()`` (the ``--json`` document's payload) and ``text()`` (what a person
reads). The payload is the result type itself, encoded by ``fwman.core.jsonout``: a dataclass result needs no
``to_json`` of its own, its fields are the document's keys in declaration order (field metadata, ``jsonout.meta``, names
the few exceptions: a JSON name that differs, a field left out, a property written after a field); a result overrides
``to_json`` only where its document is more than its fields (keys renamed or derived, a record flattened). docs/json.md
lists every key, and ``tests/unit/cli/test_json_vocabulary`` checks each document against it. Styles are names
(:data:`STYLES`), not escapes: the CLI (``cli/render.py``) turns them into colour on a terminal and drops them
elsewhere, so this module knows nothing of click or terminals. ``failure()`` is the error the command ends with once it
has shown the result (None: exit 0)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fwman.core.jsonout import fields_of

if TYPE_CHECKING:
    from fwman.core.errors import FwmanError

#: the styles a span may name: ``red``/``yellow``/``green``/``blue``/``magenta`` (the colour), ``bad`` (red,
#: bold), ``loud`` (yellow, bold), ``good`` (green, bold), ``info`` (blue, bold: a finding that only informs),
#: ``change`` (cyan, bold: what a plan would change), ``bold``, ``dim`` (context: which catalog, what signed it)
STYLES = ("red", "yellow", "green", "blue", "magenta", "bad", "loud", "good", "info", "change", "bold", "dim")


@dataclass(frozen=True)
class Span:
    """A piece of a line in one style (``""``: plain)."""

    text: str
    style: str = ""


@dataclass(frozen=True)
class Line:
    """One line for people, on stdout (or stderr with ``err``): a newline in its text (from outside: a container's
    environment, a tool's message) is written out, never obeyed. ``block``: a whole document shown as it is (a
    board file, a TOML export), its newlines kept."""

    parts: tuple[Span, ...]
    err: bool = False
    block: bool = False

    @property
    def plain(self) -> str:
        """Return the line's text without styles."""
        return "".join(p.text for p in self.parts)


Cell = str | Span


@dataclass(frozen=True)
class Table:
    """An aligned table: a bold header row, then the rows (a cell may be styled)."""

    headers: tuple[str, ...]
    rows: Sequence[Sequence[Cell]] = field(default_factory=list)


Out = list[Line | Table]


def say(text: str = "", style: str = "", *, err: bool = False) -> Line:
    """Return a line of ``text`` in ``style``."""
    return Line((Span(text, style),), err)


def document(text: str, *, err: bool = False) -> Line:
    """Return ``text``, a whole document of several lines (a board file), shown with its newlines (its last one
    dropped: the line's own)."""
    return Line((Span(text.removesuffix("\n")),), err, block=True)


def line(*parts: str | Span, err: bool = False) -> Line:
    """Return a line made of ``parts`` (a plain string is an unstyled span)."""
    return Line(tuple(p if isinstance(p, Span) else Span(p) for p in parts), err)


def table(headers: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Table:
    """Return a table of ``rows`` under ``headers``."""
    return Table(tuple(headers), rows)


class Result:
    """A use case's result: its JSON payload, its text, and the error the command ends with (if any)."""

    def to_json(self) -> dict[str, Any]:
        """Return the payload of the command's ``fwman.<kind>/<n>`` document (without the schema key): the
        result's fields, encoded by :func:`fwman.core.jsonout.fields_of`. Raises TypeError for a result that is
        not a dataclass and does not override this."""
        return fields_of(self)

    def text(self, verbose: int = 0) -> Out:
        """Return what a person reads (``verbose``: the count of ``-v``)."""
        return []

    def failure(self) -> FwmanError | None:
        """Return the error the command exits with after showing the result (None: it succeeded)."""
        return None
