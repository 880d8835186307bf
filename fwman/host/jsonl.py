"""History files of JSON lines (flash history, P2P verification history): one reader, one appender.

A history is evidence: a line that is not JSON, or not what its owner expects, is reported with its line number,
never skipped. Appending rewrites the whole file through the Host (temp file, fsync, rename), so a crash never
leaves half a line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fwman.core.errors import MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host.base import Host

T = TypeVar("T")


def read_json_lines(host: Host, path: str, parse: Callable[[Any], T]) -> tuple[list[T], list[str]]:
    """Return (the records of ``path`` oldest first, ``"<path> line N: what is wrong"`` for each damaged line).

    ``parse`` turns one decoded line into a record and raises ValueError or TypeError (pydantic's
    ValidationError is a ValueError) for a line it refuses. An absent file is an empty history. Raises
    NotRecordedError on a snapshot that did not record the file.
    """
    try:
        if not host.exists(path):
            return [], []
        text = host.read_text(path)
    except MissingError:
        return [], []
    records: list[T] = []
    damaged: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(parse(parse_json(line, path, f"line {number}")))
        except ParseError as e:
            damaged.append(f"{path} line {number}: {e.detail[:120]}")
        except (ValueError, TypeError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            damaged.append(f"{path} line {number}: {first[:120]}")
    return records, damaged


def append_json_line(host: Host, path: str, line: bytes) -> None:
    """Append one JSON document (``line``, without its newline) to ``path``, rewriting the file atomically."""
    try:
        old = host.read_bytes(path) if host.exists(path) else b""
    except MissingError:
        old = b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    host.write_bytes(path, old + line + b"\n")
