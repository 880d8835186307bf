"""``fwman upgrade --apply`` and ``--check``: run the catalog's upgrade plan with the flash safety rails.

Apply: host gates (root, driver unloaded, nvflash, every card mapped) → the running version and board ID of every card
read with nvflash (nvidia-smi is gone with the driver) → the plan → verified backups of *every* card in one run → the
targets flashed one at a time, each with its own gates and read-back → stop at the first failure, leaving the remaining
cards untouched → the steps left to the owner (firmware setup, reboot). Check (after the reboot, driver loaded): each
card's running version and BAR1 size against the last flash recorded for it, written to the history."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fwman.core.errors import BlockedError, FwmanError
from fwman.core.findings import blocking
from fwman.core.jsonout import meta
from fwman.firmware.catalog.load import load_catalog
from fwman.firmware.ops.flash import Flasher, FlashOptions, FlashResult
from fwman.firmware.ops.flash_gates import NO_BACKUP_BIOS_FLAG
from fwman.firmware.ops.history import HistoryRecord, append_history, read_history
from fwman.firmware.ops.images import catalog_image
from fwman.firmware.ops.journal import Journal, OpState, now
from fwman.firmware.upgrade.model import LEGACY_BAR1, UpgradePlan
from fwman.firmware.upgrade.plan import build_upgrade_plan
from fwman.gpu.card import Card
from fwman.host.base import Host


@dataclass
class ApplyResult:
    """What ``--apply`` did."""

    plan: UpgradePlan
    backup_run: str | None
    flashed: list[FlashResult] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    operation: str | None = None


def with_nvflash_identity(flasher: Flasher) -> list[Card]:
    """Return the flasher's cards with version and board ID as nvflash reads them from each EEPROM."""
    cards = []
    for card in flasher.cards:
        block = flasher.adapter_block(card)
        read = {"vbios_version": block.version or card.vbios_version, "board_id": block.board_id or card.board_id}
        cards.append(card.model_copy(update=read))
    flasher.cards = cards
    return cards


def rerun_command(run: str | None, selected: list[str], error: FwmanError) -> str:
    """Return the ``fwman upgrade --apply`` command that runs the rest of a stopped upgrade.

    It reuses backup run ``run``, keeps the ``--card`` selection, and carries the flag that accepts the warning
    which stopped it, when that flag is one ``upgrade --apply`` takes (the dual-firmware one).
    """
    argv = ["fwman", "upgrade", "--apply"]
    argv += [arg for bus in selected for arg in ("--card", bus)]
    if run:
        argv += ["--reuse-backups-from", run]
    findings = error.findings if isinstance(error, BlockedError) else []
    if any(getattr(f, "override", None) == NO_BACKUP_BIOS_FLAG for f in findings):
        argv.append(NO_BACKUP_BIOS_FLAG)
    return " ".join(argv)


def apply_upgrade(
    host: Host,
    euid: int,
    cards: list[Card],
    options: FlashOptions,
    selected: list[str],
    say: Callable[[str], None],
    stream: Callable[[str], None] | None = None,
    command: str = "fwman upgrade --apply",
    confirm: Callable[[str], bool] | None = None,
) -> ApplyResult:
    """Run the upgrade plan on a live host; return what was flashed.

    ``confirm`` is asked once, with the cards to flash, after the plan and before the lock, any backup or write;
    a "no" raises BlockedError (nothing changed). None (``--yes``, or no terminal) asks nothing.

    Raises BlockedError (3) when a gate or the plan blocks (nothing written), ToolMissingError (5) without
    nvflash, and the failing flash's own error (3 refused, 4 write/read-back failed, 130 interrupted) after
    the cards before it were flashed and verified: the message names them and the cards left untouched.
    """
    flasher = Flasher(host, euid, cards, options, say=say, stream=stream, command=command)
    bad = blocking(flasher.base_gates())
    if bad:
        raise BlockedError(f"upgrade blocked before any write: {bad[0].message}", hint=bad[0].fix)
    live_cards = with_nvflash_identity(flasher)
    plan = build_upgrade_plan(host, live_cards, load_catalog(host), selected)
    if plan.blocks:
        raise BlockedError(f"upgrade plan blocked: {plan.blocks[0].message}", hint=plan.blocks[0].fix)
    targets = plan.flash_cards
    result = ApplyResult(plan, None)
    if not targets:
        say("nothing to flash: every card is on its recommended firmware (or not in the catalog)")
        return result
    if confirm is not None:
        moves = ", ".join(f"{t.bus_id} {t.current_version or '?'} -> {t.target_version}" for t in targets)
        if not confirm(f"flash {len(targets)} card(s): {moves} (every card is backed up first). Perform it?"):
            raise BlockedError(
                "upgrade not confirmed: nothing was backed up or written",
                hint="run again and answer y, or without the question: fwman upgrade --apply --yes"
                + "".join(f" --card {bus}" for bus in selected),
            )
    # one flash at a time: held from the first backup to the last read-back
    with flasher.locked():
        return _apply_targets(host, flasher, plan, live_cards, result, selected)


def _apply_targets(
    host: Host, flasher: Flasher, plan: UpgradePlan, live_cards: list[Card], result: ApplyResult, selected: list[str]
) -> ApplyResult:
    """Back up every card, then flash the plan's targets in order (under the flash lock); return the result."""
    targets = plan.flash_cards
    journal = Journal(host)
    op = journal.create("upgrade", cards=[t.bus_id for t in targets])
    result.operation = op.id
    journal.begin(op, "backups")
    try:
        flasher.ensure_backups(None)
    except FwmanError as e:
        journal.fail(op, "backups", e.message, OpState.BLOCKED)
        raise
    result.backup_run = op.backup_run = flasher.backup_run
    journal.finish(op, "backups", f"run {flasher.backup_run}: {len(flasher.backups)} cards verified")
    by_bus = {c.bus_id: c for c in live_cards}
    for i, target in enumerate(targets):
        step = f"flash {target.bus_id}"
        journal.begin(op, step, f"-> {target.target_version}")
        try:
            source = catalog_image(host, f"{target.subsystem}/{target.target_version}")
            done = flasher.flash(by_bus[target.bus_id], source)
        except FwmanError as e:
            result.untouched = [t.bus_id for t in targets[i + 1 :]]
            journal.fail(op, step, e.message)
            flashed = ", ".join(r.card for r in result.flashed) or "none"
            run = flasher.backup_run
            again = rerun_command(run, selected, e)
            if isinstance(e, BlockedError):
                # a gate stopped it before any write: there is nothing to resume, the same upgrade runs again
                # once the cause is dealt with (or the named flag accepts the warning)
                cause = e.hint or "fix the cause"
                if again.endswith(NO_BACKUP_BIOS_FLAG):  # the finding's fix says "pass the flag": the command has it
                    cause = "only if you can recover the card without a second firmware chip "
                    cause += "(another GPU for display, a programmer)"
                op.next_steps = [
                    f"flashed and verified before the gate: {flashed}",
                    f"left untouched: {', '.join(result.untouched) or 'none'} (and {target.bus_id}: nothing written)",
                    f"{cause}; then `{again}` (reuses the backups taken before any write)",
                ]
                e.hint = f"{cause}; then: {again}"
            else:
                op.next_steps = [
                    f"flashed and verified before the failure: {flashed}",
                    f"left untouched: {', '.join(result.untouched) or 'none'}",
                    f"fix the cause (fwman flash status), then `fwman flash resume` for {target.bus_id}",
                    f"then `{again}` for the rest (the backups taken before any write: a damaged card cannot be "
                    "backed up again)",
                ]
                e.hint = f"fwman flash resume, then {again}"
            journal.close(op, OpState.FAILED, e.message)
            e.message = f"upgrade stopped at {target.bus_id}: {e.message} (flashed before: {flashed})"
            raise
        result.flashed.append(done)
        journal.finish(op, step, f"{done.before_version} -> {done.after_version}")
    result.next_steps = [
        step.title + (": " + "; ".join(step.details) if step.details else "")
        for step in plan.steps
        if step.by == "you" and step.id not in ("fetch",)
    ] or ["reboot", "after the reboot: fwman upgrade --check"]
    if not any("upgrade --check" in s for s in result.next_steps):
        result.next_steps.append("after the reboot: fwman upgrade --check")
    journal.close(op, OpState.DONE, f"{len(result.flashed)} card(s) flashed and verified", result.next_steps)
    return result


@dataclass
class CheckRow:
    """One card after the reboot (a ``gpus[]`` entry of ``fwman.upgrade-check/2``: ``running`` is its
    ``vbios_version``)."""

    bus_id: str
    running: str | None = field(metadata=meta(key="vbios_version"))
    expected: str | None
    bar1_bytes: int | None
    vram_bytes: int | None
    result: str  # "confirmed", "mismatch", "not flashed", "unknown"
    message: str


def check_upgrade(host: Host, cards: list[Card]) -> list[CheckRow]:
    """Compare each card's running firmware and BAR1 with its last successful flash; record the outcome.

    Returns one row per card. Cards fwman never flashed are reported, not recorded.
    """
    records = read_history(host)
    rows: list[CheckRow] = []
    for card in cards:
        flashes = (r for r in reversed(records) if r.card == card.bus_id and r.kind in ("flash", "restore"))
        last = next((r for r in flashes if r.result == "success"), None)
        running = card.vbios_version.upper() if card.vbios_version else None
        bar1 = card.bar1_bytes
        bar_text = f"BAR1 {bar1 // (1024 * 1024)} MiB" if bar1 else "BAR1 unknown"
        if last is None:
            found = f"{running or 'firmware version unknown'}, {bar_text}"
            rows.append(CheckRow(card.bus_id, running, None, bar1, card.vram_bytes, "not flashed", found))
            continue
        expected = last.after_version
        if running is None:
            result, message = "unknown", "running version unreadable (is the driver loaded? nvidia-smi?)"
        elif running != (expected or "").upper():
            result, message = "mismatch", f"runs {running}, fwman flashed {expected}: reboot (power-cycle) pending?"
        elif bar1 is not None and bar1 <= LEGACY_BAR1:
            result = "mismatch"
            message = (
                f"runs {running} but {bar_text}: enable Above 4G Decoding and Re-Size BAR Support in the firmware "
                "setup (systemctl reboot --firmware-setup)"
            )
        else:
            result, message = "confirmed", f"runs {running}, {bar_text}"
        rows.append(CheckRow(card.bus_id, running, expected, bar1, card.vram_bytes, result, message))
        append_history(
            host,
            HistoryRecord(
                time=now(),
                kind="check",
                card=card.bus_id,
                subsystem=card.subsystem,
                result=result,
                before_version=last.before_version,
                after_version=running,
                image=last.image,
                bar1_bytes=bar1,
                bar1_offers_bytes=list(card.rebar_sizes_bytes) or None,
                board_id=card.board_id or last.board_id,
                power_limit_w=card.power_limit_w,
                default_power_limit_w=card.default_power_limit_w,
                operation=last.operation,
                message=message,
            ),
        )
    return rows
