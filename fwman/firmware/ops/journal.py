"""The operation journal: every step of a flash, restore or upgrade, written before and after it runs.

One JSON file per operation in ``/var/lib/fwman/journal/<id>.json``, rewritten atomically (through ``Host.write_bytes``)
at every step change, so a killed fwman leaves the exact step it was in. ``fwman flash status`` reads these files;
``fwman flash resume`` continues the newest unfinished one."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from fwman.core import clock, paths
from fwman.core.errors import BlockedError, MissingError, ParseError
from fwman.core.jsontext import parse_json
from fwman.host import hostlock
from fwman.host.base import Host

FORMAT = "fwman-journal"
VERSION = 1


class StepState(StrEnum):
    """Where one step is."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


class OpState(StrEnum):
    """Where one operation is. ``running`` in a file whose process is gone means fwman was killed."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    BLOCKED = "blocked"  # a gate stopped it before any write to a card
    INTERRUPTED = "interrupted"  # Ctrl-C honoured between steps


class Step(BaseModel):
    """One journaled step."""

    name: str
    state: StepState = StepState.PENDING
    started: str | None = None
    finished: str | None = None
    detail: str = ""


class Operation(BaseModel):
    """One flash / restore / upgrade run."""

    format: str = FORMAT
    version: int = VERSION
    id: str
    kind: str  # "flash", "restore", "upgrade"
    created: str
    pid: int
    state: OpState = OpState.RUNNING
    card: str | None = None  # bus id
    cards: list[str] = Field(default_factory=list)  # upgrade: targets in order
    image: str | None = None
    image_sha256: str | None = None
    image_chain_sha256: str | None = None
    before_chain_sha256: str | None = None
    before_version: str | None = None
    target_version: str | None = None
    backup_run: str | None = None  # the backup run every card's backup came from
    log: str | None = None
    steps: list[Step] = Field(default_factory=list)
    message: str = ""
    next_steps: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    def step(self, name: str) -> Step:
        """Return the step called ``name``, adding it (pending) when absent."""
        for s in self.steps:
            if s.name == name:
                return s
        s = Step(name=name)
        self.steps.append(s)
        return s

    @property
    def current_step(self) -> Step | None:
        """Return the step running or failed last, else the first pending one, else None."""
        for s in reversed(self.steps):
            if s.state in (StepState.RUNNING, StepState.FAILED):
                return s
        for s in self.steps:
            if s.state is StepState.PENDING:
                return s
        return None

    def done(self, name: str) -> bool:
        """Return True when step ``name`` finished."""
        return any(s.name == name and s.state is StepState.DONE for s in self.steps)


def now() -> str:
    """Return the current UTC time as ``2026-11-29T08:30:00Z``."""
    return clock.timestamp()


def new_id(kind: str) -> str:
    """Return a sortable, unique operation id: ``20261129T083000Z-flash-<pid>``."""
    stamp = clock.now_utc().strftime("%Y%m%dT%H%M%S%fZ")
    return f"{stamp}-{kind}-{os.getpid()}"


class Journal:
    """Reads and writes operations under ``paths.FLASH_JOURNAL_DIR`` on a Host."""

    def __init__(self, host: Host, directory: str = paths.FLASH_JOURNAL_DIR) -> None:
        self.host = host
        self.directory = directory
        #: "path: what is wrong" of every journal file the last :meth:`all` could not read (None: not read yet)
        self.unreadable: list[str] | None = None

    def path(self, op: Operation) -> str:
        """Return the host path of ``op``'s file."""
        return f"{self.directory}/{op.id}.json"

    def create(self, kind: str, **fields: Any) -> Operation:
        """Return a new running operation, already written."""
        op = Operation(id=new_id(kind), kind=kind, created=now(), pid=os.getpid(), **fields)
        self.save(op)
        return op

    def save(self, op: Operation) -> None:
        """Write ``op`` atomically."""
        self.host.write_bytes(self.path(op), (op.model_dump_json(indent=2) + "\n").encode())

    def begin(self, op: Operation, name: str, detail: str = "") -> None:
        """Mark step ``name`` running (written before the step acts)."""
        s = op.step(name)
        s.state, s.started, s.finished = StepState.RUNNING, now(), None
        if detail:
            s.detail = detail
        op.state, op.pid = OpState.RUNNING, os.getpid()
        self.save(op)

    def finish(self, op: Operation, name: str, detail: str = "") -> None:
        """Mark step ``name`` done."""
        s = op.step(name)
        s.state, s.finished = StepState.DONE, now()
        if detail:
            s.detail = detail
        self.save(op)

    def fail(self, op: Operation, name: str, detail: str, state: OpState = OpState.FAILED) -> None:
        """Mark step ``name`` failed and the operation ``state``."""
        s = op.step(name)
        s.state, s.finished, s.detail = StepState.FAILED, now(), detail
        op.state, op.message = state, detail
        self.save(op)

    def close(self, op: Operation, state: OpState, message: str = "", next_steps: list[str] | None = None) -> None:
        """Record the operation's final state."""
        op.state = state
        if message:
            op.message = message
        if next_steps is not None:
            op.next_steps = next_steps
        self.save(op)

    def load(self, op_id: str) -> Operation:
        """Return the operation ``op_id``. Raises MissingError if absent, ParseError if unreadable."""
        path = f"{self.directory}/{op_id}.json"
        return parse_operation(self.host.read_text(path), path)

    def all(self) -> list[Operation]:
        """Return every readable operation, oldest first.

        A journal file that cannot be read is never skipped silently: it is kept in :attr:`unreadable`
        (``path: what is wrong``) for the caller to report, and :meth:`require_readable` blocks on it.
        """
        self.unreadable = []
        try:
            names = self.host.listdir(self.directory)
        except MissingError:
            return []
        ops = []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = f"{self.directory}/{name}"
            try:
                ops.append(parse_operation(self.host.read_text(path), path))
            except ParseError as e:
                self.unreadable.append(e.message)
            except MissingError as e:
                self.unreadable.append(f"{path}: {e.message}")
        return sorted(ops, key=lambda o: o.id)

    def require_readable(self) -> None:
        """Raise BlockedError (exit 3) when a journal file is unreadable: it may record a half-finished flash.

        Call after :meth:`all` (or :meth:`unfinished`). A flash or resume must not start while fwman cannot
        tell whether a card was left half-written.
        """
        if self.unreadable is None:
            self.all()
        if self.unreadable:
            raise BlockedError(
                f"unreadable flash journal: {self.unreadable[0]}"
                + (f" (and {len(self.unreadable) - 1} more)" if len(self.unreadable) > 1 else ""),
                hint="it may record a half-finished flash: read it, check the card (fwman scan), then move the "
                f"file out of {self.directory} to continue",
            )

    def alive(self, op: Operation) -> bool:
        """Return True when the process that wrote a running ``op`` is still at work on it.

        A flash holds the host-wide flash lock from its first backup to its last read-back, so the op is alive
        exactly when the lock is held by its pid: this is right under ``--root`` too (where ``/proc/PID`` would
        be looked up in the tree), and after a reboot (the kernel released the lock). A snapshot has no lock:
        there the recorded ``/proc`` answers.
        """
        if not hostlock.has_locks(self.host):
            return op.pid != os.getpid() and self.host.exists(f"/proc/{op.pid}") if op.pid else False
        held = hostlock.holder_now(self.host)
        return held is not None and held.pid == op.pid

    def unfinished(self) -> list[Operation]:
        """Return operations that stopped without finishing (killed, failed or interrupted), oldest first.

        Raises BlockedError when a journal file is unreadable (it could be the unfinished one).
        """
        ops = self.all()
        self.require_readable()
        return [
            op
            for op in ops
            if op.state in (OpState.RUNNING, OpState.FAILED, OpState.INTERRUPTED)
            and not op.extra.get("resolved")
            and not (op.state is OpState.RUNNING and self.alive(op))
        ]


def parse_operation(text: str, where: str = "journal") -> Operation:
    """Return the Operation in ``text``. Raises ParseError when it is not a journal file of this version."""
    data = parse_json(text, where, "json")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ParseError(where, "format", f"not an {FORMAT} file")
    if data.get("version") != VERSION:
        raise ParseError(where, "version", f"version {data.get('version')} is not {VERSION}")
    try:
        return Operation.model_validate(data)
    except ValidationError as e:
        raise ParseError(where, "fields", str(e).splitlines()[0]) from e
