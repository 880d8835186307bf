"""The flash history: one record per flash, restore or post-reboot check, kept forever.

Stored as JSON lines in ``/var/lib/fwman/history.jsonl`` (rewritten atomically with the new record appended,
so a crash never leaves half a line). ``fwman history`` prints it.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ValidationError

from fwman.core import paths
from fwman.core.errors import MissingError, VerificationError
from fwman.host.base import Host


class HistoryRecord(BaseModel):
    """One flash (``kind`` flash / restore) or one ``upgrade --check`` result (``kind`` check)."""

    time: str
    kind: str
    card: str
    subsystem: str | None = None
    result: str  # "success", "failed", "refused", "interrupted", "confirmed", "mismatch"
    before_version: str | None = None
    after_version: str | None = None
    image: str | None = None
    image_sha256: str | None = None
    image_chain_sha256: str | None = None
    before_chain_sha256: str | None = None
    after_chain_sha256: str | None = None
    backup: str | None = None
    bar1_bytes: int | None = None
    operation: str | None = None
    log: str | None = None
    message: str = ""


def read_history_checked(host: Host) -> tuple[list[HistoryRecord], list[str]]:
    """Return (every readable record oldest first, ``"path line N: what is wrong"`` for every damaged line)."""
    try:
        text = host.read_text(paths.FLASH_HISTORY_FILE)
    except MissingError:
        return [], []
    records, damaged = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(HistoryRecord.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            damaged.append(f"{paths.FLASH_HISTORY_FILE} line {number}: {first[:120]}")
    return records, damaged


def history_error(damaged: list[str]) -> VerificationError:
    """Return the error that reports damaged history lines (exit 4), naming the first and what to do."""
    more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
    return VerificationError(
        f"damaged flash history: {damaged[0]}{more}",
        hint="the history is the record of what was flashed: inspect the line, repair or remove it by hand",
    )


def read_history(host: Host) -> list[HistoryRecord]:
    """Return every record, oldest first. Raises VerificationError when a line is damaged (never skipped)."""
    records, damaged = read_history_checked(host)
    if damaged:
        raise history_error(damaged)
    return records


def append_history(host: Host, record: HistoryRecord) -> None:
    """Append ``record`` (atomic rewrite of the file)."""
    try:
        old = host.read_bytes(paths.FLASH_HISTORY_FILE)
    except MissingError:
        old = b""
    if old and not old.endswith(b"\n"):
        old += b"\n"
    host.write_bytes(paths.FLASH_HISTORY_FILE, old + record.model_dump_json().encode() + b"\n")
