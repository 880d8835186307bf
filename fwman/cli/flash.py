"""``fwman flash``, ``fwman flash status``, ``fwman flash resume``, ``fwman flash history``, ``fwman restore``.

Options and rendering only: the use cases are in :mod:`fwman.app.flash`. Imports only click at module level:
``fwman upgrade`` loads it for the flash options.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from fwman.cli.context import AppContext, leaf_options, runs_subcommand, timeout_option
from fwman.core.errors import UsageError

if TYPE_CHECKING:
    from fwman.app.flash import Flashed, FlashOptions, Operator

F = TypeVar("F", bound=Callable[..., Any])


def operator(app: AppContext, what: str) -> Operator:
    """Return this invocation as the use cases' Operator (after the change gate: never on a snapshot replay)."""
    from fwman.app.flash import Operator

    app.require_change(what, needs_root=False)  # the root gate is the flash's own finding (flash.root)
    return Operator(app.host, app.env.euid, app.is_replay, app.command_line, lambda t: app.echo(t, err=True),
                    terminal_stream(app))  # fmt: skip


def terminal_stream(app: AppContext) -> Callable[[str], None] | None:
    """Return a writer showing nvflash's own output (its progress bar) on a terminal, None otherwise."""
    if not app.env.stderr_isatty:
        return None
    from fwman.core.termtext import visible

    def write(text: str) -> None:
        # nvflash quotes strings of the image (from outside): only its carriage returns (its bar) are obeyed
        try:
            app.env.stderr.write(visible(text).replace("\\r", "\r"))
            app.env.stderr.flush()
        except (OSError, ValueError):  # the terminal went away (ssh dropped): the write goes on, unseen
            pass

    return write


def show(app: AppContext, result: Flashed, as_json: bool) -> None:
    """Print what a flash, restore or resume did."""
    from fwman.cli.render import render

    if as_json:
        app.emit_json(*result.to_json())
    else:
        render(app, result.text())


def flash_options(*, downgrade: bool = True) -> Callable[[F], F]:
    """Return the decorator adding the flash options (flash, restore, resume; ``upgrade`` without
    ``--allow-downgrade``), handed to the command as one ``flash_opts: FlashOptions``: declared once, so the help is
    the same wherever they are shown."""

    def add(f: F) -> F:
        @functools.wraps(f)
        def with_options(*args: Any, **kwargs: Any) -> Any:
            from fwman.app.flash import FlashOptions

            chosen = [kwargs.pop(k, False) for k in ("reuse", "no_backup_bios_ok", "allow_downgrade", "timeout")]
            return f(*args, flash_opts=FlashOptions(*chosen), **kwargs)

        bios = "Flash a board the catalog does not list with a second firmware chip."
        g = click.option("--i-understand-no-backup-bios", "no_backup_bios_ok", is_flag=True, help=bios)(with_options)
        if downgrade:
            g = click.option("--allow-downgrade", is_flag=True, help="Accept an image older than the card's.")(g)
        g = click.option("--reuse-backups-from", "reuse", metavar="RUN",
                         help="Use the verified backups of run RUN instead of taking new ones.")(g)  # fmt: skip
        return timeout_option(300.0, "Seconds before nvflash is given up on.")(g)  # type: ignore[return-value]

    return add


@click.group(invoke_without_command=True)
@click.option("--card", "bus", metavar="BUS", help="The card to flash: bus id (41:00.0) or nvidia-smi index (2).")
@click.option(
    "--image", metavar="FILE|BOARD/VERSION", help="The image: a file, or a catalog image fetched with `fwman fetch`."
)
@flash_options()
@leaf_options
@click.pass_context
def flash(
    ctx: click.Context, app: AppContext, bus: str | None, image: str | None, flash_opts: FlashOptions, as_json: bool
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
      fwman flash history         every flash, restore and post-reboot check

    Exit: 0 flashed and verified, 2 bad usage / snapshot, 3 a gate blocked (nothing written),
    4 the write or read-back failed (see `fwman flash status`), 5 nvflash missing, 130 interrupted.
    """
    if runs_subcommand(ctx, app):
        return
    if not bus or not image:
        raise UsageError("fwman flash needs --card BUS and --image FILE|BOARD/VERSION", hint="fwman flash --help")
    from fwman.app.flash import flash_card

    show(app, flash_card(operator(app, "fwman flash"), bus, image, flash_opts), as_json)


@flash.command("status")
@click.option("-n", "--count", "count", type=int, default=5, show_default=True, help="How many operations to show.")
@leaf_options
def flash_status(app: AppContext, count: int, as_json: bool) -> None:
    """Show the last flash/restore/upgrade operations and the step each stopped at.

    \b
    Example:
      fwman flash status --json
    """
    from fwman.app.flash import flash_status as status
    from fwman.cli.render import finish

    finish(app, "flash-status", status(app.host, count), as_json)  # unreadable journal: exit 3, the file named


@flash.command("resume")
@flash_options()
@leaf_options
def flash_resume(app: AppContext, flash_opts: FlashOptions, as_json: bool) -> None:
    """Continue the newest unfinished flash or restore from where it stopped.

    Gates run again; the backups of its run are re-verified and reused; the card is read back first so a
    write that already completed is not repeated, and a damaged card is written again.

    \b
    Example:
      fwman flash resume --i-understand-no-backup-bios
    """
    from fwman.app.flash import resume_flash

    show(app, resume_flash(operator(app, "fwman flash resume"), flash_opts), as_json)


@click.command()
@click.option("--card", "bus", required=True, metavar="BUS", help="The card to restore (e.g. 41:00.0).")
@click.option(
    "--backup", "backup_path", required=True, metavar="FILE", help="One of this card's backups (fwman backup list)."
)
@flash_options()
@leaf_options
def restore(app: AppContext, bus: str, backup_path: str, flash_opts: FlashOptions, as_json: bool) -> None:
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
    from fwman.app.flash import restore_card

    show(app, restore_card(operator(app, "fwman restore"), bus, backup_path, flash_opts), as_json)


@flash.command("history")
@click.option("--card", "bus", metavar="BUS", help="Only this card.")
@leaf_options
def history(app: AppContext, bus: str | None, as_json: bool) -> None:
    """Show every flash, restore and post-reboot check fwman made on this host.

    \b
    Example:
      fwman flash history --card 41:00.0
    """
    from fwman.app.flash import flash_history
    from fwman.cli.render import finish

    # what could be read is shown, then the damaged lines are reported (exit 4), never skipped
    finish(app, "history", flash_history(app.host, bus), as_json)


def _report_command() -> click.Command:
    """Return ``flash report`` (its own module: the owner report's options and rendering)."""
    from fwman.cli.report import report

    return report


flash.add_command(_report_command(), "report")
