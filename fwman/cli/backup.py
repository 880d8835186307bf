"""``fwman backup``: save every card's firmware with nvflash, verified and never overwritten; list; verify."""

from __future__ import annotations

from typing import Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app, runs_subcommand, timeout_option
from fwman.core import paths
from fwman.core.errors import FwmanError, PartialError
from fwman.core.findings import Severity
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


def entry_json(e: BackupEntry) -> dict[str, Any]:
    """Return the stable JSON form of a backup entry."""
    return e.model_dump()


@click.group(invoke_without_command=True)
@click.option("--card", "bus", metavar="BUS", help="Back up only this card (e.g. 41:00.0).")
@click.option("--all", "all_cards", is_flag=True, help="Back up every NVIDIA card (the default).")
@timeout_option(300.0, "Seconds before nvflash is given up on.")
@json_option
@common_options
@pass_app
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
    app.require_change("fwman backup", needs_root=False)  # root: require_backup_host's gate
    host = app.host
    require_live(host, app.is_replay, "fwman backup")
    require_backup_host(host, app.env.euid)
    cards = require_cards(host)
    chosen: list[Card] = [find_card(cards, bus)] if bus and not all_cards else cards
    tool = find_nvflash(host, timeout)

    def report(card: Card, entry: BackupEntry | None, err: FwmanError | None) -> None:
        if as_json:
            return
        if entry is not None:
            app.echo(f"{card.bus_id}  {entry.version}  {entry.path}  sha256 {entry.sha256[:16]}…")
        elif err is not None:
            app.echo(f"{card.bus_id}  FAILED: {err.message}", err=True)

    if not as_json:
        app.echo(f"backing up {len(chosen)} card(s) with nvflash {tool.version}")
    from fwman.host.hostlock import exclusive

    # a backup during another process's flash would save the EEPROM being written: one at a time
    with exclusive(host, app.command_line, what="flash or backup", say=lambda t: app.echo(t, err=True)):
        run, done, failed = backup_all(host, tool, chosen, on_card=report)
    if as_json:
        app.emit_json(
            "backup",
            {
                "run": run,
                "backups": [entry_json(e) for e in done.values()],
                "failed": {k: v.message for k, v in failed.items()},
            },
        )
    elif done:
        app.echo(f"run {run}: {len(done)} backup(s) verified (reuse with --reuse-backups-from {run})")
    if failed and done:
        raise PartialError(f"{len(failed)} of {len(chosen)} backups failed", hint="see the lines above")
    if failed:
        first = next(iter(failed.values()))
        raise BackupError(f"no backup taken: {first.message}", hint=first.hint)


@backup.command("list")
@json_option
@common_options
@pass_app
def backup_list(app: AppContext, as_json: bool) -> None:
    """List stored backups, newest first.

    \b
    Example:
      fwman backup list --json
    """
    manifest = load_manifest(app.host)
    entries = sorted(manifest.backups, key=lambda e: (e.run, e.card), reverse=True)
    if as_json:
        app.emit_json("backup-list", {"root": paths.BACKUPS_DIR, "backups": [entry_json(e) for e in entries]})
        return
    if not entries:
        app.echo(f"no backups in {paths.BACKUPS_DIR} (take them with `fwman backup --all`)")
        return
    app.table(
        ["RUN", "CARD", "SUBSYSTEM", "VERSION", "SHA256", "PATH"],
        [[e.run, e.card, e.subsystem, e.version or "?", e.sha256[:16], e.path] for e in entries],
    )


@backup.command("verify")
@json_option
@common_options
@pass_app
def backup_verify(app: AppContext, as_json: bool) -> None:
    """Re-check every stored backup: file present, SHA-256 as recorded, a full dump of the recorded card.

    \b
    Example:
      fwman backup verify        exit 0 when all verify, 4 when any does not
    """
    host = app.host
    manifest = load_manifest(host)
    results = [(e, verify_entry(host, e)) for e in manifest.backups]
    strays = stray_files(host, manifest)
    failed = [(e, f) for e, fs in results for f in fs if f.severity is Severity.BLOCK]
    if as_json:
        app.emit_json(
            "backup-verify",
            {
                "backups": [
                    {"path": e.path, "ok": all(f.severity is not Severity.BLOCK for f in fs), "message": fs[0].message}
                    for e, fs in results
                ],
                "unrecorded": strays,
            },
        )
    else:
        for e, fs in results:
            ok = all(f.severity is not Severity.BLOCK for f in fs)
            app.echo(f"{'ok  ' if ok else 'BAD '} {fs[0].message if not ok else e.path}")
        for path in strays:
            app.echo(f"warn {path}: not in the manifest (not taken by fwman; never used by restore)")
        if not results:
            app.echo("no backups recorded")
    if failed:
        raise BackupError(f"{len(failed)} of {len(results)} backups do not verify", hint=failed[0][1].message)
