"""``fwman backup``: save every card's firmware with nvflash, verified and never overwritten; list; verify.

Options and rendering only: the use cases are in :mod:`fwman.app.backup`.
"""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options, runs_subcommand, timeout_option
from fwman.cli.render import finish


@click.group(invoke_without_command=True)
@click.option("--card", "bus", metavar="BUS", help="Back up only this card: bus id (41:00.0) or nvidia-smi index (2).")
@click.option("--all", "all_cards", is_flag=True, help="Back up every NVIDIA card (the default).")
@timeout_option(300.0, "Seconds before nvflash is given up on.")
@leaf_options
@click.pass_context
def backup(
    ctx: click.Context, app: AppContext, bus: str | None, all_cards: bool, timeout: float, as_json: bool
) -> None:
    """Save each card's firmware with `nvflash --save`, check it, and keep it forever.

    \b
    Files go to /var/lib/fwman/backups/<subsystem>/<card>/<run>-<version>.rom, with their hashes in
    manifest.json. A backup counts only if it is a full dump whose subsystem and version equal the card's.
    Needs root and the NVIDIA driver unloaded (nvflash refuses otherwise).

    \b
    Examples:
      fwman backup --all                 back up every card (one run id for all)
      fwman backup --card 41:00.0        back up one card
      fwman backup list                  what is stored
      fwman backup verify                re-check every stored backup (hash, parse, identity)

    Exit: 0 all saved, 3 driver loaded / not root, 4 no backup could be taken, 5 nvflash missing, 6 some failed.
    """
    if runs_subcommand(ctx, app):
        return
    from fwman.app.backup import take_backups
    from fwman.cli.flash import operator

    report = (lambda line, failed: None) if as_json else (lambda line, failed: app.echo(line, err=failed))
    result = take_backups(operator(app, "fwman backup"), None if all_cards else bus, timeout, tell=report)
    finish(app, "backup", result, as_json)


@backup.command("list")
@leaf_options
def backup_list(app: AppContext, as_json: bool) -> None:
    """List stored backups, newest first.

    \b
    Example:
      fwman backup list --json
    """
    from fwman.app.backup import list_backups

    finish(app, "backup-list", list_backups(app.host), as_json)


@backup.command("verify")
@leaf_options
def backup_verify(app: AppContext, as_json: bool) -> None:
    """Re-check every stored backup: file present, SHA-256 as recorded, a full dump of the recorded card.

    \b
    Example:
      fwman backup verify        exit 0 when all verify, 4 when any does not
    """
    from fwman.app.backup import verify_backups

    finish(app, "backup-verify", verify_backups(app.host), as_json)
