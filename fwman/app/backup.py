"""``fwman backup``, ``backup list`` and ``backup verify``: the use cases, whose results own their JSON shapes
(``fwman.backup/2``, ``fwman.backup-list/2``, ``fwman.backup-verify/1``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.flash import Operator, record_json
from fwman.app.text import Out, Result, say, table
from fwman.core import paths
from fwman.core.errors import FwmanError, PartialError
from fwman.core.findings import Finding, Severity
from fwman.core.jsonout import OMIT, meta
from fwman.firmware.nvflash.runner import find_nvflash, require_live
from fwman.firmware.ops.backup import (
    BackupEntry,
    BackupError,
    backup_all,
    load_manifest,
    require_backup_host,
    stray_files,
    verify_entry,
)
from fwman.gpu.card import Card
from fwman.gpu.inventory import find_card, require_cards
from fwman.host.base import Host
from fwman.host.hostlock import exclusive


@dataclass
class BackupRun(Result):
    """What ``fwman backup`` saved (by bus id) and what failed, in run ``run``."""

    run: str
    cards: int = field(metadata=OMIT)  # how many cards were to be backed up
    #: in ``fwman.backup/2`` the entries saved, each as in the manifest but for its card, ``bus_id``
    done: dict[str, BackupEntry] = field(
        default_factory=dict,
        metadata=meta(key="backups", via=lambda d: [record_json(e.model_dump()) for e in d.values()]),
    )
    #: in ``fwman.backup/2`` each card that failed with its error's message
    failed: dict[str, FwmanError] = field(
        default_factory=dict, metadata=meta(via=lambda f: {k: v.message for k, v in f.items()})
    )

    def text(self, verbose: int = 0) -> Out:
        """Return the last line: the run and how to reuse it (nothing when nothing was saved; each card's line
        was reported as it came)."""
        if not self.done:
            return []
        return [
            say(f"run {self.run}: {len(self.done)} backup(s) verified (reuse with --reuse-backups-from {self.run})")
        ]

    def failure(self) -> FwmanError | None:
        """Return PartialError (exit 6) when some backups failed, BackupError (exit 4) when all did; else None."""
        if self.failed and self.done:
            return PartialError(f"{len(self.failed)} of {self.cards} backups failed", hint="see the lines above")
        if self.failed:
            first = next(iter(self.failed.values()))
            return BackupError(f"no backup taken: {first.message}", hint=first.hint)
        return None


def take_backups(
    operator: Operator, bus: str | None, timeout: float, *, tell: Callable[[str, bool], None] = lambda t, e: None
) -> BackupRun:
    """Back up every card (or the one at ``bus``) with nvflash in one run; return what was saved and what failed.

    ``tell`` is told each line as it comes (the line, and whether it tells of a failure): the nvflash version
    before the first card, then each card's backup or failure. Raises UsageError on a snapshot or for an unknown
    card, BlockedError when not root or the driver is loaded, MissingError without nvflash, LockHeld while
    another flash or backup runs.
    """

    def on_card(card: Card, entry: BackupEntry | None, err: FwmanError | None) -> None:
        if entry is not None:
            tell(f"{card.bus_id}  {entry.version}  {entry.path}  sha256 {entry.sha256[:16]}…", False)
        elif err is not None:
            tell(f"{card.bus_id}  FAILED: {err.message}", True)

    host = operator.host
    require_live(host, operator.is_replay, "fwman backup")
    require_backup_host(host, operator.euid)
    cards = require_cards(host)
    chosen: list[Card] = [find_card(cards, bus)] if bus else cards
    tool = find_nvflash(host, timeout)
    tell(f"backing up {len(chosen)} card(s) with nvflash {tool.version}", False)
    # a backup during another process's flash would save the EEPROM being written: one at a time
    with exclusive(host, operator.command, what="flash or backup", say=operator.say):
        run, done, failed = backup_all(host, tool, chosen, on_card=on_card)
    return BackupRun(run, len(chosen), done, failed)


#: the columns of ``backup list``
LIST_COLUMNS = ("RUN", "CARD", "SUBSYSTEM", "VERSION", "SHA256", "PATH")


@dataclass
class BackupList(Result):
    """The stored backups, newest first."""

    entries: list[BackupEntry]

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.backup-list/2`` (each entry's ``card`` printed as ``bus_id``)."""
        return {"root": paths.BACKUPS_DIR, "backups": [record_json(e.model_dump()) for e in self.entries]}

    def text(self, verbose: int = 0) -> Out:
        """Return the table of backups, or where none are and how to take them."""
        if not self.entries:
            return [say(f"no backups in {paths.BACKUPS_DIR} (take them with `fwman backup --all`)")]
        return [table(LIST_COLUMNS, self.rows())]

    def rows(self) -> list[list[str]]:
        """Return the table rows: run, card, subsystem, version, SHA-256 (16 digits), path."""
        return [[e.run, e.card, e.subsystem, e.version or "?", e.sha256[:16], e.path] for e in self.entries]


def list_backups(host: Host) -> BackupList:
    """Return the backups of the host's manifest, newest first. Raises what reading the manifest raises."""
    manifest = load_manifest(host)
    return BackupList(sorted(manifest.backups, key=lambda e: (e.run, e.card), reverse=True))


@dataclass
class BackupCheck(Result):
    """Each recorded backup with its findings, and the files in the backup tree the manifest does not name."""

    results: list[tuple[BackupEntry, list[Finding]]]
    unrecorded: list[str]

    @staticmethod
    def ok(findings: list[Finding]) -> bool:
        """Return True when no finding of a backup blocks."""
        return all(f.severity is not Severity.BLOCK for f in findings)

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.backup-verify/1``."""
        return {
            "backups": [{"path": e.path, "ok": self.ok(fs), "message": fs[0].message} for e, fs in self.results],
            "unrecorded": self.unrecorded,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: ok or BAD per backup, a warning per unrecorded file."""
        out = [f"{'ok  ' if self.ok(fs) else 'BAD '} {fs[0].message if not self.ok(fs) else e.path}"
               for e, fs in self.results]  # fmt: skip
        out += [f"warn {p}: not in the manifest (not taken by fwman; never used by restore)" for p in self.unrecorded]
        return [say(text) for text in (out if self.results else [*out, "no backups recorded"])]

    def failure(self) -> FwmanError | None:
        """Return BackupError (exit 4) when any backup does not verify; else None."""
        failed = [f for _, fs in self.results for f in fs if f.severity is Severity.BLOCK]
        if not failed:
            return None
        return BackupError(f"{len(failed)} of {len(self.results)} backups do not verify", hint=failed[0].message)


def verify_backups(host: Host) -> BackupCheck:
    """Re-check every recorded backup (file present, SHA-256, a full dump of the recorded card); return each."""
    manifest = load_manifest(host)
    return BackupCheck([(e, verify_entry(host, e)) for e in manifest.backups], stray_files(host, manifest))
