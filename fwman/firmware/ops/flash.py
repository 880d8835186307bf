"""Flashing a card: every gate before any write, verified backups of all cards, nvflash through a terminal, success
judged by the success line *and* a read-back, every step journaled.

The gates themselves are pure functions over facts (:mod:`fwman.firmware.ops.flash_gates`); the :class:`Flasher` gathers
the facts, asks the gates, and runs nvflash only when their verdict allows it.

Steps of one operation (``/var/lib/fwman/journal/<id>.json``), a list run by one loop with one failure path
(:meth:`Flasher.steps`, :meth:`Flasher.stop`): ``gates`` (the image staged) → ``backups`` → ``size`` (journaled when it
blocks) → what the card holds now → ``protectoff`` → ``write`` → ``readback`` → ``record``: after fwupd's detach / write
/ verify / attach. A resumed operation re-runs the gates, reuses the backups of its run, and reads the card back before
writing, so it never writes twice what is already there."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field

from fwman.core import paths
from fwman.core.errors import BlockedError, ExitCode, FwmanError, MissingError, ParseError, VerificationError
from fwman.core.findings import Finding
from fwman.core.jsonout import OMIT, meta
from fwman.firmware.nvflash import protocol as nvflash
from fwman.firmware.nvflash.runner import NvflashTool, device_holders, find_nvflash, last_error, loaded_nvidia_modules
from fwman.firmware.ops.backup import BackupEntry, backup_all, reuse_backups
from fwman.firmware.ops.flash_gates import (
    Adapter,
    HostFacts,
    ImageFacts,
    gates_verdict,
    host_gates,
    image_gates,
    overrides,
    reused_backups_verdict,
    size_verdict,
    taken_backups_verdict,
)
from fwman.firmware.ops.history import HistoryRecord, append_history
from fwman.firmware.ops.images import ImageSource
from fwman.firmware.ops.journal import Journal, Operation, OpState, now
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.gpu.card import Card
from fwman.host import hostlock
from fwman.host.base import Host


class FlashFailed(VerificationError):
    """The write did not verify: the card may hold a damaged image (exit 4)."""


class Interrupted(FwmanError):
    """Ctrl-C honoured between steps (the write itself is never cut)."""

    exit_code = ExitCode.INTERRUPTED


@dataclass
class FlashOptions:
    """Choices the user made on the command line."""

    reuse_backups_from: str | None = None
    no_backup_bios_ok: bool = False
    allow_downgrade: bool = False
    timeout: float = 300.0


@dataclass
class FlashResult:
    """The outcome of one flash (or restore).

    Its JSON form (``fwman.flash/2``, and each of ``upgrade --apply``; :func:`fwman.core.jsonout.fields_of`): the
    operation by its id, the card as ``bus_id``, the operation's backup run and next steps after ``verified_by``
    and ``log``, the findings left out.
    """

    op: Operation = field(metadata=meta(key="operation", via=lambda op: op.id))
    card: str = field(metadata=meta(key="bus_id"))
    before_version: str | None
    after_version: str | None
    changed: bool
    readback_chain_sha256: str | None
    #: what vouched for the image written (ImageSource.verified_by): "catalog", "extracted from a package ..."
    verified_by: str | None = field(default=None, metadata=meta(then=("backup_run",)))
    log: str | None = field(default=None, metadata=meta(then=("next_steps",)))
    findings: list[Finding] = field(default_factory=list, metadata=OMIT)

    @property
    def backup_run(self) -> str | None:
        """Return the backup run of the operation (the backups taken or reused before the write)."""
        return self.op.backup_run

    @property
    def next_steps(self) -> list[str]:
        """Return what the owner does next (the operation's next steps)."""
        return self.op.next_steps


@dataclass
class FlashRun:
    """One flash as its steps go: what a step found that a later one needs."""

    card: Card
    source: ImageSource
    rom: RomImage
    op: Operation
    staged: str  #: the image's copy that nvflash writes (removed when a step fails before any write)
    identity: nvflash.FirmwareBlock | None = None  #: nvflash's identity of the card, read at the gates
    index: int = -1  #: nvflash's index of the card
    own: BackupEntry | None = None  #: the card's own verified backup
    after_chain: str | None = None  #: the chain hash read back after the write
    interrupted: bool = False  #: a Ctrl-C came during the write (deferred until it finished)


@dataclass(eq=False)  # an exception compares and hashes by identity
class StepFailed(Exception):
    """A flash step's failure, for the one failure path (:meth:`Flasher.stop`): the error the flash ends with,
    the journal's detail and the operation's state, whether nothing was written (the staged copy goes: nothing
    to resume), the history record's result (and the chain read back), and the next steps to say."""

    error: FwmanError
    detail: str
    state: OpState = OpState.FAILED
    _: KW_ONLY
    nothing_written: bool = False
    history: str | None = None
    chain: str | None = None
    next_steps: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.detail)


@dataclass(frozen=True)
class FlashStep:
    """One named step of a flash: journaled under ``name`` (begun with ``detail``, finished with the line
    ``act`` returns) unless ``journaled`` is False (the step journals what it does itself, or only a failure);
    a step that ``blocks`` turns any FwmanError into a blocked operation with nothing written."""

    name: str
    act: Callable[[FlashRun], str | FlashResult]
    blocks: bool = False
    journaled: bool = True
    detail: Callable[[FlashRun], str] | None = None


@dataclass
class Flasher:
    """Runs flash operations on one host, reporting progress through ``say``."""

    host: Host
    euid: int
    cards: list[Card]
    options: FlashOptions
    say: Callable[[str], None] = lambda text: None
    stream: Callable[[str], None] | None = None
    journal: Journal = field(init=False)
    tool: NvflashTool | None = None
    backups: dict[str, BackupEntry] = field(default_factory=dict)
    backup_run: str | None = None
    backups_taken_now: bool = False  # True when self.backups were saved from the cards in this process
    #: the command line recorded in the host-wide flash lock (who holds it, for a second flash's refusal)
    command: str = "fwman flash"
    _lock_depth: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.journal = Journal(self.host)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the host-wide flash lock for the ``with`` block (re-entrant within this Flasher).

        Raises hostlock.LockHeld (exit 3, naming the holder) when another flash, restore, backup or upgrade
        runs; a stale lock is taken over with a line through ``say``.
        """
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        with hostlock.exclusive(self.host, self.command, say=self.say):
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0

    # -- facts for the gates (flash_gates.py decides) --------------------------------------------------------
    def host_facts(self) -> HostFacts:
        """Return what the host-wide gates look at, read in their order and no further than they go (nothing
        past a failed root check; nvflash is not asked while the driver holds the cards). Raises
        ToolMissingError (exit 5) when nvflash is not installed."""
        if self.euid != 0:
            return HostFacts(self.euid)
        holders = tuple(device_holders(self.host))
        modules = tuple(loaded_nvidia_modules(self.host))
        if holders or modules:
            return HostFacts(self.euid, holders, modules)  # nvflash would refuse anyway; do not even list adapters
        if self.tool is None:
            self.tool = find_nvflash(self.host, self.options.timeout)
        adapters = []
        for card in self.cards:
            try:
                adapters.append(Adapter(card.bus_id, index=self.tool.adapter_for(card).index))
            except BlockedError as e:
                adapters.append(Adapter(card.bus_id, problem=e.message))
        return HostFacts(self.euid, holders, modules, (self.tool.version, self.tool.path), tuple(adapters))

    def base_gates(self) -> list[Finding]:
        """Return the host-wide gates (root, nvflash, driver, adapters). Raises ToolMissingError (exit 5)."""
        return host_gates(self.host_facts())

    def adapter_block(self, card: Card) -> nvflash.FirmwareBlock:
        """Return nvflash's identity block for ``card`` (version, board ID). Raises FwmanError when unreadable."""
        assert self.tool is not None
        adapter = self.tool.adapter_for(card)
        result = self.tool.run(nvflash.version_argv(index=adapter.index, tool=self.tool.path))
        try:
            return nvflash.parse_block(result.stdout)
        except ParseError as e:
            raise FwmanError(f"nvflash --version for {card.bus_id}: {last_error(result.stdout + result.stderr)}") from e

    def image_board_id(self, path: str) -> str | None:
        """Return the board ID nvflash reads from image file ``path`` (a real path), None when it prints none."""
        assert self.tool is not None
        result = self.tool.run(nvflash.version_argv(file=path, tool=self.tool.path))
        try:
            return nvflash.parse_block(result.stdout).board_id
        except ParseError:
            return None

    def image_facts(
        self, card: Card, source: ImageSource, rom: RomImage, staged: str, block: nvflash.FirmwareBlock
    ) -> ImageFacts:
        """Return what the image gates look at for writing ``source`` (staged at ``staged``) onto ``card``.

        ``block`` is nvflash's identity of the card, read now (:meth:`adapter_block`): its version and board ID
        win over the inventory's.
        """
        live = card.model_copy(
            update={"vbios_version": block.version or card.vbios_version, "board_id": block.board_id or card.board_id}
        )
        local = self.host.local_path(staged)
        return ImageFacts(live, rom, self.image_board_id(local) if local else None, source)

    def ensure_backups(self, op: Operation | None) -> None:
        """Back up every card now (or reuse a run); raises BlockedError unless every card has a verified backup."""
        if self.backup_run is not None and len(self.backups) == len(self.cards):
            return
        assert self.tool is not None
        run = self.options.reuse_backups_from or (op.backup_run if op is not None else None)
        if run is not None:
            self.backups, findings = reuse_backups(self.host, self.cards, run)
            verdict = reused_backups_verdict(run, findings)
            if not verdict.allowed:
                raise verdict.error()
            self.backup_run = run
            self.say(f"reusing verified backups of run {run} for {len(self.backups)} card(s)")
            return

        def report(card: Card, entry: BackupEntry | None, err: FwmanError | None) -> None:
            if entry is not None:
                self.say(f"backed up {card.bus_id} ({entry.version}) -> {entry.path}")
            elif err is not None:
                self.say(f"backup of {card.bus_id} FAILED: {err.message}")

        run, done, failed = backup_all(self.host, self.tool, self.cards, on_card=report)
        verdict = taken_backups_verdict(len(self.cards), {bus: e.message for bus, e in failed.items()})
        if not verdict.allowed:
            raise verdict.error()
        self.backups, self.backup_run, self.backups_taken_now = done, run, True

    # -- the operation -------------------------------------------------------------------------------------
    def flash(self, card: Card, source: ImageSource, op: Operation | None = None, kind: str = "flash") -> FlashResult:
        """Run (or resume, with ``op``) one flash of ``source`` onto ``card``; return the verified outcome.

        Raises BlockedError (exit 3) when a gate stops it before any write, ToolMissingError (5) without nvflash,
        FlashFailed (4) when the write or read-back fails, Interrupted (130) on a Ctrl-C after the write;
        a Ctrl-C between steps marks the operation ``interrupted`` (resumable) and propagates.
        """
        with self.locked():
            return self._flash_locked(card, source, op, kind)

    def _flash_locked(self, card: Card, source: ImageSource, op: Operation | None, kind: str) -> FlashResult:
        rom = parse_rom(source.data)
        if op is None:
            # an unreadable journal file may be a half-finished flash: never start another one over it
            self.journal.require_readable()
            op = self.journal.create(
                kind,
                card=card.bus_id,
                image=source.label,
                image_sha256=source.sha256,
                image_chain_sha256=rom.chain_sha256,
                target_version=rom.version,
            )
        try:
            return self._flash(card, source, rom, op)
        except KeyboardInterrupt:
            step = op.current_step
            self.journal.close(
                op,
                OpState.INTERRUPTED,
                f"Ctrl-C at step {step.name if step else '?'} (never during the write)",
                ["fwman flash resume continues from there"],
            )
            raise

    def _flash(self, card: Card, source: ImageSource, rom: RomImage, op: Operation) -> FlashResult:
        """Run the steps of :meth:`steps` in order until one returns the result; on a step's failure, take the
        one failure path (:meth:`stop`) and raise its error."""
        op.log = op.log or f"{paths.FLASH_LOGS_DIR}/{op.id}.log"
        run = FlashRun(card, source, rom, op, staged=f"{paths.FLASH_STAGING_DIR}/{op.id}.rom")
        for step in self.steps():
            if step.journaled:
                self.journal.begin(op, step.name, step.detail(run) if step.detail else "")
            failed: StepFailed | None = None
            try:
                outcome = step.act(run)
            except StepFailed as e:
                failed = e
            except FwmanError as e:
                if not step.blocks:
                    raise
                failed = StepFailed(e, e.message, OpState.BLOCKED, nothing_written=True)
            if failed is not None:
                self.stop(run, step.name, failed)
                raise failed.error
            if isinstance(outcome, FlashResult):
                return outcome
            if step.journaled:
                self.journal.finish(op, step.name, outcome)
        raise AssertionError("the last step returns the result")  # pragma: no cover

    def steps(self) -> list[FlashStep]:
        """Return the steps of one flash, in order: the gates, the backups and the size check (each may block:
        nothing is written yet), what the card holds now, then fwupd's detach / write / verify / attach as
        nvflash has them (``protectoff``, ``write``, ``readback``, ``record``)."""
        return [
            FlashStep("gates", self.check_gates, blocks=True),
            FlashStep("backups", self.take_backups, blocks=True),
            FlashStep("size", self.check_size, blocks=True, journaled=False),
            FlashStep("before", self.read_before, journaled=False),
            FlashStep("protectoff", self.detach),
            FlashStep("write", self.write, detail=lambda run: f"nvflash {run.index} <- {run.source.label}"),
            FlashStep("readback", self.verify, journaled=False),
            FlashStep("record", self.attach, journaled=False),
        ]

    def stop(self, run: FlashRun, name: str, failed: StepFailed) -> None:
        """The one failure path: journal step ``name`` as failed (begun first when the journal has not seen it),
        with the next steps the failure names; remove the staged copy when nothing was written (nothing to
        resume); append the history record the failure asks for. The caller raises ``failed.error``."""
        op = run.op
        if all(s.name != name for s in op.steps):
            self.journal.begin(op, name)
        self.journal.fail(op, name, failed.detail, failed.state)
        if failed.next_steps:
            op.next_steps = failed.next_steps
            self.journal.save(op)
        if failed.nothing_written:
            self.host.unlink(run.staged)
        if failed.history is not None:
            self.record(run, failed.history, failed.chain, failed.detail)

    # -- the steps (each returns its journal line, or the flash's result) -------------------------------------
    def check_gates(self, run: FlashRun) -> str:
        """Run the host-wide gates, stage the image, then the image gates (always re-run on resume: the host
        may have changed). Raises StepFailed (blocked) on a verdict that does not allow the flash, FwmanError
        when a fact cannot be read."""
        card, source = run.card, run.source
        self.say(f"[{card.bus_id}] checking gates")
        findings = self.base_gates()
        verdict = gates_verdict(card.bus_id, findings)
        if verdict.allowed:
            if not self.host.exists(run.staged):
                self.host.write_bytes(run.staged, source.data, mode=0o400)
            if hashlib.sha256(self.host.read_bytes(run.staged)).hexdigest() != source.sha256:
                raise VerificationError(f"staged copy {run.staged} differs from the image")
            run.identity = self.adapter_block(card)
            findings += image_gates(self.image_facts(card, source, run.rom, run.staged, run.identity))
            accepted = overrides(
                no_backup_bios_ok=self.options.no_backup_bios_ok,
                allow_downgrade=self.options.allow_downgrade,
                restore=source.restore_of is not None,
            )
            verdict = gates_verdict(card.bus_id, findings, accepted)
        if not verdict.allowed:
            raise StepFailed(verdict.error(), verdict.detail, OpState.BLOCKED, nothing_written=True)
        assert self.tool is not None
        run.index = self.tool.adapter_for(card).index
        return f"{len(findings)} checks passed"

    def take_backups(self, run: FlashRun) -> str:
        """Back up every card (or reuse a run). Raises FwmanError (blocked) unless every card has a verified
        backup."""
        self.ensure_backups(run.op)
        run.op.backup_run = self.backup_run
        run.own = self.backups[run.card.bus_id]
        return f"run {self.backup_run}: {len(self.backups)} verified"

    def check_size(self, run: FlashRun) -> str:
        """Check the image's size against the card's EEPROM (its backup). Raises StepFailed (blocked)."""
        assert run.own is not None
        size = size_verdict(run.card.bus_id, run.source, run.rom, run.own)
        if not size.allowed:
            raise StepFailed(size.error(), size.detail, OpState.BLOCKED, nothing_written=True)
        return ""

    def read_before(self, run: FlashRun) -> str | FlashResult:
        """Learn what the card holds now; return the result when it already holds the image (a resumed write
        that completed, or flashing the running firmware)."""
        assert run.own is not None
        card, op = run.card, run.op
        # the backup tells only when it was taken in this run; reused backups (an older run may predate a flash
        # since) and a resumed operation (whose write may have started) say nothing about the card now: read it
        current: str | None
        held_version: str | None
        if self.backups_taken_now and not op.done("protectoff"):
            current, held_version = run.own.chain_sha256, run.own.version
        else:
            held = self.read_card(card, run.index, op)
            current = held.chain_sha256 if held is not None else None
            # an unreadable dump: the version nvflash reported in the gates, never the reused backup's
            held_version = held.version if held is not None else (run.identity.version if run.identity else None)
        if op.before_chain_sha256 is None and op.before_version is None:
            # the "before" of the history and the result is the card's own state at the first attempt; a
            # resumed operation keeps what its first attempt found (its write may have changed the card since)
            op.before_chain_sha256, op.before_version = current, held_version
            self.journal.save(op)
        if current == run.rom.chain_sha256:
            self.say(f"[{card.bus_id}] already holds this firmware ({run.rom.version}): nothing to write")
            return self.finish(run, current, changed=False)
        return ""

    def detach(self, run: FlashRun) -> str:
        """Lift the EEPROM's write protection (``nvflash --protectoff``: fwupd's detach). Raises StepFailed."""
        assert self.tool is not None
        result = self.tool.run(nvflash.protectoff_argv(run.index, self.tool.path))
        if nvflash.PROTECTION_DONE not in result.stdout:
            why = last_error(result.stdout + result.stderr)
            error = FlashFailed(
                f"{run.card.bus_id}: nvflash --protectoff failed: {why}", hint="nothing was written to the card"
            )
            raise StepFailed(error, why)
        return ""

    def write(self, run: FlashRun) -> str:
        """Write the staged image with nvflash on a terminal (its confirmation answered, its output logged and
        streamed). Raises StepFailed: blocked when nvflash refused and nothing changed, else failed with what
        the card holds now."""
        assert self.tool is not None
        card, rom, op = run.card, run.rom, run.op
        self.say(f"[{card.bus_id}] writing {rom.version} with nvflash (Ctrl-C is deferred until it finishes)")
        local = self.host.local_path(run.staged)
        assert local is not None and op.log is not None
        argv = nvflash.flash_argv(run.index, local, tool=self.tool.path)
        log_chunks: list[str] = [f"# {now()} {' '.join(argv)}\n"]

        def on_output(text: str) -> None:
            log_chunks.append(text)
            if self.stream is not None:
                self.stream(text)

        pty = self.host.run_interactive(
            argv, answers=[(nvflash.CONFIRM_PROMPT, "y")], on_output=on_output, timeout=self.options.timeout
        )
        self.host.write_bytes(op.log, "".join(log_chunks).encode())
        run.interrupted = pty.interrupted
        transcript = nvflash.parse_flash(pty.output)
        if transcript.outcome is nvflash.FlashOutcome.SUCCESS and not pty.timed_out:
            return "nvflash printed the success line"
        state = f"timed out after {self.options.timeout:g}s" if pty.timed_out else transcript.outcome.value
        if transcript.nothing_changed and transcript.outcome is not nvflash.FlashOutcome.INCOMPLETE:
            detail = f"nvflash refused ({state}): {last_error(pty.output)}; nothing changed"
            refused = BlockedError(f"{card.bus_id}: {detail}", hint=f"log: {op.log}")
            raise StepFailed(refused, detail, OpState.BLOCKED, nothing_written=True, history="refused")
        # the write may have started: look at the card
        chain = self.read_card_chain(card, run.index, op)
        where = "unchanged" if chain == op.before_chain_sha256 else "DAMAGED (neither old nor new firmware)"
        if chain == rom.chain_sha256:
            where = "holding the new firmware although nvflash did not confirm"
        detail = f"write {state} (signal {pty.signal})" if pty.signal else f"write {state} (exit {pty.rc})"
        detail += f"; the card is {where}"
        assert run.own is not None
        next_steps = [
            "do not reboot or power off while the card is damaged",
            f"run `fwman flash resume` to write {rom.version} again (backups of run {self.backup_run} are kept)",
            f"or put the old firmware back: fwman restore --card {card.bus_id} --backup {run.own.path}",
        ]
        error = FlashFailed(f"{card.bus_id}: {detail}", hint=f"fwman flash resume (log: {op.log})")
        raise StepFailed(error, detail, history="failed", chain=chain, next_steps=next_steps)

    def verify(self, run: FlashRun) -> str:
        """Read the card back (journaled as ``readback``) and compare its chain hash with the image's. Raises
        StepFailed when the write did not take."""
        run.after_chain = self.read_card_chain(run.card, run.index, run.op)
        if run.after_chain != run.rom.chain_sha256:
            detail = "read-back chain hash differs from the image's: the write did not take"
            error = FlashFailed(f"{run.card.bus_id}: {detail}", hint="fwman flash resume, or restore the backup")
            raise StepFailed(error, detail, history="failed", chain=run.after_chain)
        return ""

    def attach(self, run: FlashRun) -> FlashResult:
        """Record the verified write and hand the card back (history, journal closed: the new firmware runs
        after a reboot); return the result. Raises Interrupted when a Ctrl-C came during the write (deferred,
        honoured now that the write is verified)."""
        op = run.op
        result = self.finish(run, run.after_chain, changed=True)
        if run.interrupted:
            self.journal.close(op, OpState.DONE, "Ctrl-C received during the write: deferred, honoured after it")
            raise Interrupted(
                f"{run.card.bus_id}: interrupted after the write finished and verified",
                hint="the flash itself succeeded",
            )
        return result

    def read_card_chain(self, card: Card, index: int, op: Operation) -> str | None:
        """Save ``card``'s EEPROM to a temp file and return its chain hash (None when unreadable). Journaled."""
        held = self.read_card(card, index, op)
        return held.chain_sha256 if held is not None else None

    def read_card(self, card: Card, index: int, op: Operation) -> RomImage | None:
        """Save ``card``'s EEPROM to a temp file and return it parsed (None when unreadable). Journaled."""
        assert self.tool is not None
        self.journal.begin(op, "readback")
        tmp = f"{paths.FLASH_STAGING_DIR}/{op.id}-readback.rom"
        local = self.host.local_path(tmp)
        assert local is not None
        self.host.mkdir(paths.FLASH_STAGING_DIR)
        result = self.tool.run(nvflash.save_argv(index, local, self.tool.path))
        try:
            data = self.host.read_bytes(tmp) if result.rc == 0 else b""
        except MissingError:
            data = b""
        finally:
            self.host.unlink(tmp)
        try:
            held = parse_rom(data) if data else None
        except ParseError:
            held = None
        self.journal.finish(op, "readback", f"chain sha256 {held.chain_sha256 if held is not None else None}")
        return held

    def finish(self, run: FlashRun, chain: str | None, *, changed: bool) -> FlashResult:
        """Record ``run``'s verified outcome (history, journal; ``chain``: the card's chain hash now) and return it."""
        op, card, source, rom, before = run.op, run.card, run.source, run.rom, run.op.before_version
        self.journal.begin(op, "record")
        self.record(run, "success" if changed else "unchanged", chain, "")
        self.journal.finish(op, "record")
        self.host.unlink(f"{paths.FLASH_STAGING_DIR}/{op.id}.rom")
        for older in self.journal.unfinished():
            # the card now holds a verified image: an older failed flash or restore of it is settled, so
            # `fwman flash resume` never writes an image the owner has since replaced
            if older.card == card.bus_id and older.id != op.id and older.kind in ("flash", "restore"):
                older.extra["resolved"] = f"settled by {op.id}"
                self.journal.save(older)
        done = f"{card.bus_id}: {before} -> {rom.version}, read-back verified"
        then = ["reboot (or power-cycle) for the new firmware to run", "after the reboot: fwman upgrade --check"]
        self.journal.close(op, OpState.DONE, done if changed else "already on this firmware", then if changed else [])
        return FlashResult(op, card.bus_id, before, rom.version, changed, chain, source.verified_by, op.log)

    def record(self, run: FlashRun, result: str, chain: str | None, message: str) -> None:
        """Append one history record for ``run``'s operation."""
        op, card, source, rom = run.op, run.card, run.source, run.rom
        append_history(
            self.host,
            HistoryRecord(
                time=now(),
                kind=op.kind,
                card=card.bus_id,
                subsystem=card.subsystem,
                result=result,
                before_version=op.before_version,
                after_version=rom.version if result in ("success", "unchanged") else None,
                image=source.label,
                image_sha256=source.sha256,
                verified_by=source.verified_by,
                image_chain_sha256=rom.chain_sha256,
                before_chain_sha256=op.before_chain_sha256,
                after_chain_sha256=chain,
                backup=self.backups[card.bus_id].path if card.bus_id in self.backups else None,
                # the card as it was before the new firmware runs (what `fwman flash report` calls "before")
                bar1_bytes=card.bar1_bytes,
                bar1_offers_bytes=list(card.rebar_sizes_bytes) or None,
                board_id=card.board_id,
                power_limit_w=card.power_limit_w,
                default_power_limit_w=card.default_power_limit_w,
                operation=op.id,
                log=op.log,
                message=message,
            ),
        )
