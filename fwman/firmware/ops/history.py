"""The flash history: one record per flash, restore or post-reboot check, kept forever.

Stored as JSON lines in ``/var/lib/fwman/history.jsonl`` (rewritten atomically with the new record appended,
so a crash never leaves half a line). ``fwman history`` prints it.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ValidationError

from fwman.core import paths
from fwman.core.errors import MissingError
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


def read_history(host: Host) -> list[HistoryRecord]:
    """Return every readable record, oldest first (a damaged line is skipped, never fatal)."""
    try:
        text = host.read_text(paths.FLASH_HISTORY_FILE)
    except MissingError:
        return []
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(HistoryRecord.model_validate(json.loads(line)))
        except (ValueError, ValidationError):
            continue
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
