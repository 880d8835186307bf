"""The flash history: one record per flash, restore or post-reboot check, kept forever.

Stored as JSON lines in ``/var/lib/fwman/history.jsonl`` (rewritten atomically with the new record appended, so a crash
never leaves half a line). ``fwman flash history`` prints it."""

from __future__ import annotations

from pydantic import BaseModel

from fwman.core import paths
from fwman.core.errors import VerificationError
from fwman.host.base import Host
from fwman.host.jsonl import append_json_line, read_json_lines


class HistoryRecord(BaseModel):
    """One flash (``kind`` flash / restore) or one ``upgrade --check`` result (``kind`` check).

    ``board_id``, ``bar1_bytes``, ``bar1_offers_bytes`` and the power limits are the card's state when the
    record was made: before the new firmware ran for a flash, after the reboot for a check (``fwman flash report``
    puts the two side by side). Each is None where it could not be read (nvidia-smi needs the driver, which a
    flash unloads).
    """

    time: str
    kind: str
    card: str
    subsystem: str | None = None
    result: str  # "success", "failed", "refused", "interrupted", "confirmed", "mismatch"
    before_version: str | None = None
    after_version: str | None = None
    image: str | None = None
    image_sha256: str | None = None
    #: what vouched for the image: "catalog", "extracted from a package signed by <maker> (<subject>)", ...
    verified_by: str | None = None
    image_chain_sha256: str | None = None
    before_chain_sha256: str | None = None
    after_chain_sha256: str | None = None
    backup: str | None = None
    bar1_bytes: int | None = None
    bar1_offers_bytes: list[int] | None = None  # the BAR1 sizes the card offers (Resizable BAR capability)
    board_id: str | None = None  # as nvflash (or nvidia-smi) reads it, "0x0240"
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    operation: str | None = None
    log: str | None = None
    message: str = ""


def read_history_checked(host: Host) -> tuple[list[HistoryRecord], list[str]]:
    """Return (every readable record oldest first, ``"path line N: what is wrong"`` for every damaged line)."""
    return read_json_lines(host, paths.FLASH_HISTORY_FILE, HistoryRecord.model_validate)


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
    append_json_line(host, paths.FLASH_HISTORY_FILE, record.model_dump_json().encode())
