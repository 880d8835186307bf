"""``fwman flash``, ``fwman flash status``, ``fwman flash resume``, ``fwman restore``, ``fwman history``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app, runs_subcommand, timeout_option
from fwman.core.errors import UsageError
from fwman.core.termtext import visible
from fwman.firmware.nvflash.runner import require_live
from fwman.firmware.ops.flash import (
    Flasher,
    FlashOptions,
    FlashResult,
)
from fwman.firmware.ops.history import history_error, read_history_checked
from fwman.firmware.ops.images import backup_image, resolve_image, resume_source
from fwman.firmware.ops.journal import Journal, Operation, OpState
from fwman.gpu.card import Card
from fwman.gpu.inventory import find_card, require_cards


def make_flasher(app: AppContext, options: FlashOptions, what: str) -> tuple[Flasher, list[Card]]:
    """Return a Flasher over every card of the live host. Raises UsageError on a snapshot."""
    app.require_change(what, needs_root=False)  # the root gate is the flash's own finding (flash.root)
    host = app.host
    require_live(host, app.is_replay, what)
    cards = require_cards(host)
    flasher = Flasher(host, app.env.euid, cards, options, say=lambda t: app.echo(t, err=True), command=app.command_line)
    flasher.stream = terminal_stream(app)
    return flasher, cards


def terminal_stream(app: AppContext) -> Callable[[str], None] | None:
    """Return a writer showing nvflash's own output (its progress bar) on a terminal, None otherwise."""
    if not app.env.stderr_isatty:
        return None

    def write(text: str) -> None:
        # nvflash quotes strings of the image (from outside): only its carriage returns (its bar) are obeyed
        try:
            app.env.stderr.write(visible(text).replace("\\r", "\r"))
            app.env.stderr.flush()
        except (OSError, ValueError):  # the terminal went away (ssh dropped): the write goes on, unseen
            pass

    return write


def result_json(r: FlashResult) -> dict[str, Any]:
    """Return the stable JSON form of a flash result."""
    return {
        "operation": r.op.id,
        "card": r.card,
        "before_version": r.before_version,
        "after_version": r.after_version,
        "changed": r.changed,
        "readback_chain_sha256": r.readback_chain_sha256,
        "backup_run": r.op.backup_run,
        "log": r.log,
        "next_steps": r.op.next_steps,
    }


def show_result(app: AppContext, r: FlashResult, as_json: bool) -> None:
    """Print a flash result."""
    if as_json:
        app.emit_json("flash", result_json(r))
        return
    if r.changed:
        app.echo(f"{r.card}: {r.before_version} -> {r.after_version}: written, read back and verified")
    else:
        app.echo(f"{r.card}: already on {r.after_version}; nothing written")
    for step in r.op.next_steps:
        app.echo(f"  next: {step}")


def flash_options(f: Any) -> Any:
    """Add the options shared by flash, restore and resume."""
    f = click.option(
        "--i-understand-no-backup-bios",
        "no_backup_bios_ok",
        is_flag=True,
        help="Flash a board the catalog does not list with a second firmware chip.",
    )(f)
    f = click.option("--allow-downgrade", is_flag=True, help="Accept an image older than the card's.")(f)
    f = click.option(
        "--reuse-backups-from",
        "reuse",
        metavar="RUN",
        help="Use the verified backups of run RUN instead of taking new ones.",
    )(f)
    f = timeout_option(300.0, "Seconds before nvflash is given up on.")(f)
    return f


@click.group(invoke_without_command=True)
@click.option("--card", "bus", metavar="BUS", help="The card to flash (e.g. 41:00.0).")
@click.option(
    "--image", metavar="FILE|BOARD/VERSION", help="The image: a file, or a catalog image fetched with `fwman fetch`."
)
@flash_options
@json_option
@common_options
@pass_app
@click.pass_context
def flash(
    ctx: click.Context,
    app: AppContext,
    bus: str | None,
    image: str | None,
    no_backup_bios_ok: bool,
    allow_downgrade: bool,
    reuse: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Flash one card with every safety rail: gates, backups of ALL cards, nvflash, read-back.

    \b
    Before any write: root; nvflash found; no nvidia module loaded and no process on /dev/nvidia*
    (with the commands to stop them); the image verifies against this card (device, subsystem,
    board ID) and the catalog (published hash, not withdrawn); a dual-firmware switch (from the
    catalog) or --i-understand-no-backup-bios; a verified backup of every card (taken now, or
    --reuse-backups-from RUN). Then protect-off, nvflash through a terminal (fwman answers 'y'),
    and a read-back whose option-ROM chain hash must equal the image's. Ctrl-C waits for the write.

    \b
    Examples:
      fwman flash --card 41:00.0 --image 3842:3987/94.02.42.80.27
      fwman flash --card 41:00.0 --image ./evga.rom --reuse-backups-from 20261129T083000Z
      fwman flash status          where the last operations stopped
      fwman flash resume          continue (or explain) an interrupted one

    Exit: 0 flashed and verified, 2 bad usage / snapshot, 3 a gate blocked (nothing written),
    4 the write or read-back failed (see `fwman flash status`), 5 nvflash missing, 130 interrupted.
    """
    if runs_subcommand(ctx, app):
        return
    if not bus or not image:
        raise UsageError("fwman flash needs --card BUS and --image FILE|BOARD/VERSION", hint="fwman flash --help")
    options = FlashOptions(reuse, no_backup_bios_ok, allow_downgrade, timeout)
    flasher, cards = make_flasher(app, options, "fwman flash")
    card = find_card(cards, bus)
    source = resolve_image(app.host, image, card=bus)
    show_result(app, flasher.flash(card, source), as_json)


def op_json(op: Operation, journal: Journal) -> dict[str, Any]:
    """Return the stable JSON form of a journaled operation."""
    state = op.state.value
    if op.state is OpState.RUNNING and not journal.alive(op):
        state = "killed"
    step = op.current_step
    return {
        "id": op.id,
        "kind": op.kind,
        "state": state,
        "card": op.card,
        "image": op.image,
        "target_version": op.target_version,
        "backup_run": op.backup_run,
        "stopped_at": step.name if step and op.state is not OpState.DONE else None,
        "message": op.message,
        "steps": [s.model_dump() for s in op.steps],
        "next_steps": op.next_steps,
    }


@flash.command("status")
@click.option("-n", "count", type=int, default=5, show_default=True, help="How many operations to show.")
@json_option
@common_options
@pass_app
def flash_status(app: AppContext, count: int, as_json: bool) -> None:
    """Show the last flash/restore/upgrade operations and the step each stopped at.

    \b
    Example:
      fwman flash status --json
    """
    from fwman.core.names import count as at_least_one

    at_least_one(count)
    journal = Journal(app.host)
    ops = journal.all()[-count:]
    unreadable = journal.unreadable or []
    from fwman.host.hostlock import holder_now

    holder = holder_now(app.host)
    if as_json:
        app.emit_json(
            "flash-status",
            {
                "operations": [op_json(o, journal) for o in ops],
                "unreadable": unreadable,
                "lock": holder.to_dict() if holder else None,
            },
        )
    elif holder is not None:
        app.echo(f"flash lock held by {holder.describe()}")
    if not as_json and not ops and not unreadable:
        app.echo("no operations journaled yet")
    for op in [] if as_json else ops:
        j = op_json(op, journal)
        where = f" at step {j['stopped_at']}" if j["stopped_at"] else ""
        app.echo(f"{op.id}  {op.kind} {op.card or ','.join(op.cards)}  {j['state']}{where}  {op.message}")
        for s in op.steps:
            app.echo(f"    {s.state.value:<8} {s.name:<11} {s.detail}")
        for n in op.next_steps:
            app.echo(f"    next: {n}")
    if unreadable:
        journal.require_readable()  # raises: exit 3, the file named, what to do


@flash.command("resume")
@flash_options
@json_option
@common_options
@pass_app
def flash_resume(
    app: AppContext, no_backup_bios_ok: bool, allow_downgrade: bool, reuse: str | None, timeout: float, as_json: bool
) -> None:
    """Continue the newest unfinished flash or restore from where it stopped.

    Gates run again; the backups of its run are re-verified and reused; the card is read back first so a
    write that already completed is not repeated, and a damaged card is written again.

    \b
    Example:
      fwman flash resume --i-understand-no-backup-bios
    """
    app.require_change("fwman flash resume", needs_root=False)  # root: the flash's own gate
    journal = Journal(app.host)
    pending = [o for o in journal.unfinished() if o.kind in ("flash", "restore")]
    if not pending:
        message = "nothing to resume: every journaled operation finished"
        if as_json:
            app.emit_json("flash-resume", {"resumed": None, "message": message})
        else:
            app.echo(message)
        return
    op = pending[-1]
    options = FlashOptions(reuse or op.backup_run, no_backup_bios_ok, allow_downgrade, timeout)
    flasher, cards = make_flasher(app, options, "fwman flash resume")
    card = find_card(cards, op.card or "")
    source = resume_source(app.host, op, card)
    app.echo(
        f"resuming {op.id} ({op.kind} {op.card}) stopped at {op.current_step.name if op.current_step else '?'}",
        err=True,
    )
    result = flasher.flash(card, source, op=op, kind=op.kind)
    others = [o for o in journal.unfinished() if o.kind in ("flash", "restore")]
    if others:
        app.echo(f"{len(others)} more unfinished operation(s): run `fwman flash resume` again", err=True)
    show_result(app, result, as_json)


@click.command()
@click.option("--card", "bus", required=True, metavar="BUS", help="The card to restore (e.g. 41:00.0).")
@click.option(
    "--backup", "backup_path", required=True, metavar="FILE", help="One of this card's backups (fwman backup list)."
)
@flash_options
@json_option
@common_options
@pass_app
def restore(
    app: AppContext,
    bus: str,
    backup_path: str,
    no_backup_bios_ok: bool,
    allow_downgrade: bool,
    reuse: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Put a card's own backup back, with the same gates as a flash.

    Only a backup recorded in the manifest for this very card (same PCI location and subsystem) is
    accepted; another card's backup is refused. Fresh backups of every card are taken first.

    \b
    Example:
      fwman backup list
      fwman restore --card 41:00.0 \\
        --backup /var/lib/fwman/backups/3842-3987/0000-41-00.0/20261129T083000Z-94.02.26.48.15.rom

    Exit: as fwman flash.
    """
    options = FlashOptions(reuse, no_backup_bios_ok, allow_downgrade, timeout)
    flasher, cards = make_flasher(app, options, "fwman restore")
    card = find_card(cards, bus)
    source = backup_image(app.host, card, backup_path)
    data = source.data
    from fwman.firmware.rom.parse import parse_rom

    rom = parse_rom(data)
    with flasher.locked():  # before the journal entry: a refused second restore leaves no "running" record
        op = flasher.journal.create("restore", card=card.bus_id, image=backup_path, extra={"backup": backup_path})
        op.image_sha256, op.image_chain_sha256, op.target_version = source.sha256, rom.chain_sha256, rom.version
        result = flasher.flash(card, source, op=op, kind="restore")
    show_result(app, result, as_json)


@click.command()
@click.option("--card", "bus", metavar="BUS", help="Only this card.")
@json_option
@common_options
@pass_app
def history(app: AppContext, bus: str | None, as_json: bool) -> None:
    """Show every flash, restore and post-reboot check fwman made on this host.

    \b
    Example:
      fwman history --card 41:00.0
    """
    records, damaged = read_history_checked(app.host)
    if bus:
        from fwman.gpu.inventory import normalise_bus

        wanted = normalise_bus(bus)
        records = [r for r in records if r.card == wanted]
    if as_json:
        app.emit_json("history", {"records": [r.model_dump() for r in records], "damaged": damaged})
    elif not records and not damaged:
        app.echo("no flash recorded yet")
    elif records:
        app.table(
            ["TIME", "KIND", "CARD", "RESULT", "BEFORE", "AFTER", "IMAGE"],
            [
                [r.time, r.kind, r.card, r.result, r.before_version or "?", r.after_version or "-", r.image or ""]
                for r in records
            ],
        )
    if damaged:  # printed what could be read; the damaged lines are reported, never skipped
        raise history_error(damaged)
