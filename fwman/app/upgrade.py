"""``fwman upgrade --dry-run``, ``--apply`` and ``--check``: the use cases, whose results own their JSON shapes
(``fwman.upgrade-plan/2``, ``fwman.upgrade-apply/2``, ``fwman.upgrade-check/2``). The plan is
:func:`fwman.firmware.upgrade.plan.build_upgrade_plan`'s and its execution
:func:`fwman.firmware.upgrade.apply.apply_upgrade`'s; this module picks the cards and says what came of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fwman.app.flash import Operator
from fwman.app.text import Cell, Line, Out, Result, Span, line, say, table
from fwman.core.errors import FwmanError, MissingError, UsageError, VerificationError
from fwman.core.findings import Severity
from fwman.core.jsonout import encode, meta
from fwman.core.units import human_bytes
from fwman.firmware.catalog.load import load_catalog
from fwman.firmware.nvflash.runner import require_live
from fwman.firmware.ops.flash import FlashOptions
from fwman.firmware.upgrade.apply import ApplyResult, CheckRow, apply_upgrade, check_upgrade
from fwman.firmware.upgrade.model import CardPlan, UpgradePlan
from fwman.firmware.upgrade.plan import build_upgrade_plan, short_bus
from fwman.gpu.inventory import find_card, require_cards, scan_cards
from fwman.host.base import Host


def choose_mode(dry_run: bool, apply: bool, check: bool) -> str:
    """Return ``"dry-run"``, ``"apply"`` or ``"check"``: the one mode the flags ask for.

    Raises UsageError for none, or for two at once (a dry run never flashes; a reboot goes between apply and
    check).
    """
    if dry_run and (apply or check):  # a dry run never flashes or records anything: refuse the mix outright
        raise UsageError(
            f"--dry-run and {'--apply' if apply else '--check'} contradict each other: nothing was done",
            hint="fwman upgrade --dry-run prints the plan; fwman upgrade --apply runs it",
        )
    if apply and check:
        raise UsageError("--apply and --check are separate steps: a reboot goes between them")
    if apply or check:  # docs/flash.md: back up all, flash, reboot, then --check
        return "apply" if apply else "check"
    if not dry_run:
        raise UsageError(
            "say what to do: --dry-run prints the plan, --apply runs it, --check checks it after the reboot",
            hint="start with: fwman upgrade --dry-run",
        )
    return "dry-run"


#: the columns of the plan's table
PLAN_COLUMNS = ("BUS", "SUBSYSTEM", "FIRMWARE", "BAR1", "PLAN")
#: the columns of ``--check``
CHECK_COLUMNS = ("CARD", "RESULT", "DETAIL")


@dataclass
class PlanResult(Result):
    """The upgrade plan of the host (``--dry-run``), and the cards whose firmware version could not be read."""

    plan: UpgradePlan
    #: which card each ``--card N`` (nvidia-smi's index) named, said above the plan
    chosen: list[str] = field(default_factory=list)

    @property
    def unreadable(self) -> list[str]:
        """Return the short bus ids of the cards the plan cannot decide for (firmware version unread)."""
        return [short_bus(c.bus_id) for c in self.plan.cards if c.action == "check"]

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.upgrade-plan/2`` (the plan's JSON names, docs/json.md)."""
        return {"dry_run": True, "ready": self.plan.ready, **self.plan.model_dump(mode="json", by_alias=True)}

    def text(self, verbose: int = 0) -> Out:
        """Return the head, the table of cards, the body, and (when every card's firmware could be read: no
        "nothing to flash" about cards it could not) the verdict."""
        out: Out = [*(say(c) for c in self.chosen), *self.head(), table(PLAN_COLUMNS, self.rows()), *self.body()]
        return out if self.unreadable else [*out, say(self.verdict())]

    def head(self) -> list[Line]:
        """Return the lines above the table: the command, the host, the catalog and its notes."""
        plan, cat = self.plan, self.plan.catalog
        notes = cat.get("notes")
        return [
            line(Span("fwman upgrade --dry-run", "bold"), Span(f"  ({plan.host}; nothing is changed)", "dim")),
            say(f"catalog: {cat['source']}, serial {cat['serial']}, {cat['date']}", "dim"),
            *(say(f"  note: {note}", "dim") for note in (notes if isinstance(notes, list) else [])),
            say(),
        ]

    @staticmethod
    def action(c: CardPlan) -> Cell:
        """Return what the plan does to card ``c``: flash to a version, keep, left alone, cannot decide."""
        if not c.selected and c.action == "flash":
            return f"not selected (would get {c.target_version})"
        if c.action == "flash":
            return Span(f"flash -> {c.target_version}", "change")
        if c.action == "keep":
            return "keep (ReBAR: setup switch only)" if c.setup_switch_only else "keep"
        if c.action == "unknown-board":
            return Span("not in catalog: left alone", "yellow")
        return Span("cannot decide", "yellow")

    def rows(self) -> list[list[Cell]]:
        """Return the table rows: bus, subsystem, firmware (and its catalog status), BAR1 (and what it offers),
        the plan for the card."""
        rows: list[list[Cell]] = []
        for c in self.plan.cards:
            bar1 = human_bytes(c.bar1_bytes) if c.bar1_bytes else "?"
            if c.max_rebar_bytes and c.max_rebar_bytes != c.bar1_bytes:
                bar1 += f" (offers {human_bytes(c.max_rebar_bytes)})"
            status = "" if c.current_status in ("current", "unverified") else f" ({c.current_status})"
            firmware = f"{c.current_version or '?'}{status}"
            rows.append([short_bus(c.bus_id), c.subsystem, firmware, bar1, self.action(c)])
        return rows

    def body(self) -> list[Line]:
        """Return the lines below the table: the images of each board (used, skipped and why), the numbered
        steps (who does each), the findings (blocking first), then an empty line."""
        plan, out, seen = self.plan, list[Line](), set[str]()
        for c in plan.cards:
            if c.board is None or c.pci_key in seen or not c.options:
                continue
            seen.add(c.pci_key)
            on = [short_bus(x.bus_id) for x in plan.cards if x.pci_key == c.pci_key]
            out += [say(), say(f"Images for {c.subsystem} ({c.board}), cards {', '.join(on)}", "bold")]
            for o in c.options:
                running = "  (running now)" if o.version == c.current_version else ""
                mark = Span("use ", "good") if o.chosen else Span("skip", "dim")
                out.append(line("  ", mark, f" {o.version}  {o.status.value:<10}  {o.why}{running}"))
            out.append(say(f"  -> {c.reason}"))
        out += [say(), say("Plan", "bold")]
        for step in plan.steps:
            who = Span("you  ", "magenta") if step.by == "you" else Span("fwman", "blue")
            out.append(line(f"  {step.number}. [", who, "] ", Span(step.title, "bold")))
            out += [say(f"       - {d}") for d in step.details] + [say(f"       $ {cmd}") for cmd in step.commands]
        blocks = [f for f in plan.findings if f.severity is Severity.BLOCK]
        others = [f for f in plan.findings if f.severity is not Severity.BLOCK]
        if plan.findings:
            out.append(say())
        for f, tag in [*((f, Span("BLOCKED", "bad")) for f in blocks), *((f, Span(f.severity.value.upper(), "yellow"))
                                                                           for f in others)]:  # fmt: skip
            out.append(line(tag, f": {f.message}"))
            if f.fix:
                out.append(say(f"  fix: {f.fix}"))
        return [*out, say()]

    def verdict(self) -> str:
        """Return the last line: nothing to flash, not ready (how many gates block), or ready."""
        n = sum(1 for f in self.plan.findings if f.severity is Severity.BLOCK)
        if not self.plan.flash_cards:
            return "Nothing to flash: every card the catalog knows already runs its recommended image."
        if n:
            return f"Not ready: {n} gate{'s' if n != 1 else ''} above must be cleared before the flash can run."
        return "Ready: every gate of the plan is clear."

    def failure(self) -> FwmanError | None:
        """Return MissingError (exit 5) when the firmware version of some cards could not be read: no plan for
        them, never "nothing to flash"; else None."""
        unknown = self.unreadable
        if not unknown:
            return None
        return MissingError(
            f"cannot plan: the firmware version of {len(unknown)} card(s) could not be read ({', '.join(unknown)})",
            hint="load the NVIDIA driver so nvidia-smi can read it (or run as root), then plan again",
        )


def plan_upgrade(host: Host, selected: tuple[str, ...] = ()) -> PlanResult:
    """Return the plan for ``host`` (cards from the inventory, the catalog in use), flashing ``selected`` only
    when given. Raises UsageError for an unknown card, MissingError when there is no NVIDIA GPU or no catalog."""
    found = scan_cards(host)
    if not found:
        raise MissingError("no NVIDIA GPU found", hint="fwman scan shows what fwman sees")
    chosen: list[str] = []
    buses = [find_card(found, bus, chosen.append).bus_id for bus in selected]
    return PlanResult(build_upgrade_plan(host, found, load_catalog(host), buses), chosen)


@dataclass
class Applied(Result):
    """What ``--apply`` flashed, the backup run of every card, and what the user does next."""

    result: ApplyResult

    def to_json(self) -> dict[str, Any]:
        """Return the payload of ``fwman.upgrade-apply/2``."""
        r = self.result
        return {"operation": r.operation, "backup_run": r.backup_run,
                "flashed": encode(r.flashed), "next_steps": r.next_steps}  # fmt: skip

    def text(self, verbose: int = 0) -> Out:
        """Return the text lines: each card flashed, the backup run, the numbered next steps."""
        r = self.result
        out = [f"{f.card}: {f.before_version} -> {f.after_version}: written, read back and verified" for f in r.flashed]
        if not r.flashed:
            return []
        out += [f"backups of every card: run {r.backup_run} (fwman backup list)", "next steps:"]
        for i, step in enumerate(r.next_steps, 1):
            title, _, details = step.partition(": ")
            if "; " in details:  # a step with several details: one line each, easier to follow at the console
                out += [f"  {i}. {title}", *(f"       - {d}" for d in details.split("; "))]
            else:
                out.append(f"  {i}. {step}")
        return [say(text) for text in out]


def apply_plan(
    operator: Operator, selected: tuple[str, ...], options: FlashOptions, confirm: Callable[[str], bool] | None = None
) -> Applied:
    """Back up every card, then flash the plan's targets (``selected`` only when given) one at a time, with
    ``options`` (never a downgrade: a plan only moves to the recommended image). ``confirm`` (a terminal's
    question; None: ``--yes`` or a script) is asked once, after the plan and before any backup or write.

    Raises UsageError on a snapshot or for an unknown card, and what the flash raises (docs/flash.md).
    """
    host = operator.host
    require_live(host, operator.is_replay, "fwman upgrade --apply")
    cards = require_cards(host)
    buses = [find_card(cards, b, operator.say).bus_id for b in selected]
    options.allow_downgrade = False  # a plan never downgrades
    return Applied(apply_upgrade(host, operator.euid, cards, options, buses, say=operator.say,
                                 stream=operator.stream, command=operator.command, confirm=confirm))  # fmt: skip


@dataclass
class Checked(Result):
    """Each card after the reboot: its running firmware and BAR1 against its last flash (``fwman.upgrade-check/2``:
    the rows are its ``gpus``)."""

    rows: list[CheckRow] = field(metadata=meta(key="gpus"))

    def text(self, verbose: int = 0) -> Out:
        """Return the table: each card, its result and the detail."""
        return [table(CHECK_COLUMNS, [[r.bus_id, r.result, r.message] for r in self.rows])]

    def failure(self) -> FwmanError | None:
        """Return VerificationError (exit 4) when a card is not as flashed, MissingError (exit 5) when a card's
        firmware could not be read (never exit 0 as if the check had passed); else None."""
        bad = [r for r in self.rows if r.result == "mismatch"]
        if bad:
            return VerificationError(f"{len(bad)} card(s) not as flashed: {bad[0].bus_id}: {bad[0].message}")
        unknown = [r.bus_id for r in self.rows if r.running is None]
        if unknown:
            return MissingError(
                f"cannot check {len(unknown)} card(s): firmware version unreadable ({', '.join(unknown)})",
                hint="load the NVIDIA driver so nvidia-smi can read it, then run `fwman upgrade --check` again",
            )
        return None


def check_flashed(host: Host) -> Checked:
    """Compare each card's running firmware and BAR1 with its last flash and record the outcome; return each.

    Raises MissingError when there is no NVIDIA card.
    """
    return Checked(check_upgrade(host, require_cards(host)))
