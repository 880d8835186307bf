"""``fwman flash``, ``flash resume``, ``restore``, ``flash status`` and ``history``: the use cases. Each returns a
result that owns its JSON shape (``fwman.flash/2``, ``fwman.flash-resume/1``, ``fwman.flash-status/2``,
``fwman.history/2``) and the lines the CLI prints. The flash itself is :class:`fwman.firmware.ops.flash.Flasher`'s; this
module picks the card and the image and hands them over."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.text import Out, Result, say, table
from fwman.core.errors import FwmanError
from fwman.core.jsonout import fields_of, meta
from fwman.core.names import count as at_least_one
from fwman.firmware.nvflash.runner import require_live
from fwman.firmware.ops.flash import Flasher, FlashResult
from fwman.firmware.ops.flash import FlashOptions as FlashOptions  # the choices a flash takes, for the CLI
from fwman.firmware.ops.history import HistoryRecord, history_error, read_history_checked
from fwman.firmware.ops.images import backup_image, resolve_image, resume_source
from fwman.firmware.ops.journal import Journal, Operation, OpState
from fwman.firmware.rom.parse import parse_rom
from fwman.gpu.card import Card
from fwman.gpu.inventory import find_card, normalise_bus, require_cards
from fwman.host.base import Host
from fwman.host.hostlock import LockHolder, holder_now


@dataclass
class Operator:
    """Who runs a card operation and how it talks back: the host, the user, the command line, the streams."""

    host: Host
    euid: int
    is_replay: bool
    command: str  # this invocation as one line (recorded in the flash lock: who holds it)
    say: Callable[[str], None] = lambda text: None  # progress and notes for people (stderr)
    stream: Callable[[str], None] | None = None  # nvflash's own output (its progress bar), on a terminal only

    def flasher(self, options: FlashOptions, what: str) -> tuple[Flasher, list[Card]]:
        """Return a Flasher over every card of the live host, and the cards.

        Raises UsageError on a snapshot, MissingError when there is no NVIDIA card.
        """
        require_live(self.host, self.is_replay, what)
        cards = require_cards(self.host)
        flasher = Flasher(self.host, self.euid, cards, options, say=self.say, command=self.command)
        flasher.stream = self.stream
        return flasher, cards


def record_json(record: dict[str, Any]) -> dict[str, Any]:
    """Return a persisted record (backup manifest entry, history line) as printed: its ``card`` (a bus id, the
    file format's name, kept on disk) as ``bus_id``, in the same place."""
    return {("bus_id" if k == "card" else k): v for k, v in record.items()}


def flashed_line(r: FlashResult) -> str:
    """Return the one line that says what a flash did to its card."""
    if r.changed:
        why = f" (image {r.verified_by})" if r.verified_by and r.verified_by.startswith("extracted") else ""
        return f"{r.card}: {r.before_version} -> {r.after_version}: written, read back and verified{why}"
    return f"{r.card}: already on {r.after_version}; nothing written"


@dataclass
class Flashed:
    """What ``flash``, ``restore`` or ``flash resume`` did; ``resumed`` is None when nothing was left to resume."""

    resumed: FlashResult | None
    message: str = ""  # said when there was nothing to resume

    def to_json(self) -> tuple[str, dict[str, Any]]:
        """Return (schema, payload): ``flash`` for a flash, ``flash-resume`` when nothing was resumed."""
        if self.resumed is None:
            return "flash-resume", {"resumed": None, "message": self.message}
        return "flash", fields_of(self.resumed)

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines of the result: what the flash did, then the next steps. (Not a
        :class:`Result`: its JSON names its own schema, ``flash`` or ``flash-resume``.)"""
        if self.resumed is None:
            return [say(self.message)]
        return [say(flashed_line(self.resumed)), *(say(f"  next: {step}") for step in self.resumed.op.next_steps)]


def flash_card(operator: Operator, bus: str, image: str, options: FlashOptions) -> Flashed:
    """Flash ``image`` (a file or BOARD/VERSION) onto the card at ``bus`` with every gate; return what was done.

    Raises UsageError (snapshot, unknown card or image), BlockedError (a gate), VerificationError (the write or
    read-back failed), MissingError (nvflash or the image missing).
    """
    flasher, cards = operator.flasher(options, "fwman flash")
    card = find_card(cards, bus, operator.say)
    source = resolve_image(operator.host, image, bus_id=bus)
    return Flashed(flasher.flash(card, source))


def resume_flash(operator: Operator, options: FlashOptions) -> Flashed:
    """Continue the newest unfinished flash or restore (its backups reused unless ``options`` names a run).

    Returns ``resumed`` None when every journaled operation finished. Raises as :func:`flash_card`.
    """
    journal = Journal(operator.host)
    pending = [o for o in journal.unfinished() if o.kind in ("flash", "restore")]
    if not pending:
        return Flashed(None, "nothing to resume: every journaled operation finished")
    op = pending[-1]
    options.reuse_backups_from = options.reuse_backups_from or op.backup_run
    flasher, cards = operator.flasher(options, "fwman flash resume")
    card = find_card(cards, op.card or "")
    source = resume_source(operator.host, op, card)
    operator.say(
        f"resuming {op.id} ({op.kind} {op.card}) stopped at {op.current_step.name if op.current_step else '?'}"
    )
    result = flasher.flash(card, source, op=op, kind=op.kind)
    others = [o for o in journal.unfinished() if o.kind in ("flash", "restore")]
    if others:
        operator.say(f"{len(others)} more unfinished operation(s): run `fwman flash resume` again")
    return Flashed(result)


def restore_card(operator: Operator, bus: str, backup_path: str, options: FlashOptions) -> Flashed:
    """Put the card's own backup ``backup_path`` back, with the gates of a flash; return what was done.

    Raises as :func:`flash_card`; UsageError for a backup that is not this card's.
    """
    flasher, cards = operator.flasher(options, "fwman restore")
    card = find_card(cards, bus, operator.say)
    source = backup_image(operator.host, card, backup_path)
    rom = parse_rom(source.data)
    with flasher.locked():  # before the journal entry: a refused second restore leaves no "running" record
        op = flasher.journal.create("restore", card=card.bus_id, image=backup_path, extra={"backup": backup_path})
        op.image_sha256, op.image_chain_sha256, op.target_version = source.sha256, rom.chain_sha256, rom.version
        return Flashed(flasher.flash(card, source, op=op, kind="restore"))


def operation_json(op: Operation, journal: Journal) -> dict[str, Any]:
    """Return the stable JSON form of a journaled operation (a running one whose process is gone: "killed")."""
    state = op.state.value
    if op.state is OpState.RUNNING and not journal.alive(op):
        state = "killed"
    step = op.current_step
    return {
        "id": op.id,
        "kind": op.kind,
        "state": state,
        "bus_id": op.card,
        "image": op.image,
        "target_version": op.target_version,
        "backup_run": op.backup_run,
        "stopped_at": step.name if step and op.state is not OpState.DONE else None,
        "message": op.message,
        "steps": [s.model_dump() for s in op.steps],
        "next_steps": op.next_steps,
    }


@dataclass
class FlashStatus(Result):
    """The last journaled operations, the journal files that could not be read, and who holds the flash lock."""

    journal: Journal
    operations: list[Operation]
    unreadable: list[str]
    holder: LockHolder | None

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.flash-status/2``."""
        return {
            "operations": [operation_json(o, self.journal) for o in self.operations],
            "unreadable": self.unreadable,
            "lock": self.holder.to_dict() if self.holder else None,
        }

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: the lock holder, then each operation with its steps and next steps."""
        out = [f"flash lock held by {self.holder.describe()}"] if self.holder is not None else []
        if not self.operations and not self.unreadable:
            out.append("no operations journaled yet")
        for op in self.operations:
            j = operation_json(op, self.journal)
            where = f" at step {j['stopped_at']}" if j["stopped_at"] else ""
            out.append(f"{op.id}  {op.kind} {op.card or ','.join(op.cards)}  {j['state']}{where}  {op.message}")
            out += [f"    {s.state.value:<8} {s.name:<11} {s.detail}" for s in op.steps]
            out += [f"    next: {n}" for n in op.next_steps]
        return [say(text) for text in out]

    def failure(self) -> FwmanError | None:
        """Return BlockedError (exit 3, the file named) when a journal file could not be read; else None."""
        if not self.unreadable:
            return None
        try:
            self.journal.require_readable()
        except FwmanError as e:
            return e
        return None


def flash_status(host: Host, count: int) -> FlashStatus:
    """Return the last ``count`` operations of the journal. Raises UsageError when ``count`` is below one."""
    at_least_one(count)
    journal = Journal(host)
    return FlashStatus(journal, journal.all()[-count:], journal.unreadable or [], holder_now(host))


#: the columns of ``history``
HISTORY_COLUMNS = ("TIME", "KIND", "CARD", "RESULT", "BEFORE", "AFTER", "IMAGE")


@dataclass
class History(Result):
    """Every recorded flash, restore and post-reboot check (of one card when asked), and the damaged lines."""

    #: in ``fwman.history/2`` each record as on disk but for its card, ``bus_id`` (the JSON name, docs/json.md;
    #: the history file keeps ``card``)
    records: list[HistoryRecord] = field(metadata=meta(via=lambda rs: [record_json(r.model_dump()) for r in rs]))
    damaged: list[str] = field(default_factory=list)

    def text(self, verbose: int = 0) -> Out:
        """Return the table of records (what could be read), or that nothing was recorded yet."""
        if not self.records and not self.damaged:
            return [say("no flash recorded yet")]
        return [table(HISTORY_COLUMNS, self.rows())] if self.records else []

    def rows(self) -> list[list[str]]:
        """Return the table rows: time, kind, card, result, before, after, image."""
        return [
            [r.time, r.kind, r.card, r.result, r.before_version or "?", r.after_version or "-", r.image or ""]
            for r in self.records
        ]

    def failure(self) -> FwmanError | None:
        """Return history_error when some lines could not be read (reported after what could, never skipped);
        else None."""
        return history_error(self.damaged) if self.damaged else None


def flash_history(host: Host, bus: str | None = None) -> History:
    """Return the flash history of the host, of the card at ``bus`` only when given."""
    records, damaged = read_history_checked(host)
    if bus:
        wanted = normalise_bus(bus)
        records = [r for r in records if r.card == wanted]
    return History(records, damaged)
