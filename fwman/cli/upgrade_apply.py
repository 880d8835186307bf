"""``fwman upgrade --apply`` and ``fwman upgrade --check`` (the options and their output; logic in
:mod:`fwman.firmware.upgrade.apply`). Imports only click at module level: ``upgrade`` loads it for its options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from fwman.cli.context import AppContext, timeout_option
from fwman.core.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])


def apply_options(f: F) -> F:
    """Add ``--apply``, ``--check`` and the flash options to ``fwman upgrade``."""
    f = timeout_option(300.0, "Seconds before nvflash is given up on.")(f)
    f = click.option(
        "--reuse-backups-from", "reuse", metavar="RUN", help="With --apply: reuse the verified backups of run RUN."
    )(f)
    f = click.option(
        "--i-understand-no-backup-bios",
        "no_backup_bios_ok",
        is_flag=True,
        help="With --apply: flash boards the catalog does not list with a second firmware chip.",
    )(f)
    f = click.option("--check", is_flag=True, help="After the reboot: confirm version and BAR1 per card, recorded.")(f)
    f = click.option("--apply", is_flag=True, help="Back up every card, then flash the plan's targets one at a time.")(
        f
    )
    return f


def run_mode(
    app: AppContext,
    cards: tuple[str, ...],
    as_json: bool,
    *,
    apply: bool,
    check: bool,
    no_backup_bios_ok: bool,
    reuse: str | None,
    timeout: float,
) -> None:
    """Run ``--apply`` or ``--check``. Raises UsageError for both at once or on a snapshot."""
    if apply and check:
        raise UsageError("--apply and --check are separate steps: a reboot goes between them")
    if apply:
        _apply(app, cards, as_json, FlashArgs(no_backup_bios_ok, reuse, timeout))
    else:
        _check(app, as_json)


class FlashArgs:
    """The flash options given to ``--apply``."""

    def __init__(self, no_backup_bios_ok: bool, reuse: str | None, timeout: float) -> None:
        self.no_backup_bios_ok, self.reuse, self.timeout = no_backup_bios_ok, reuse, timeout


def _apply(app: AppContext, selected: tuple[str, ...], as_json: bool, args: FlashArgs) -> None:
    from fwman.cli.flash import result_json, terminal_stream
    from fwman.firmware.nvflash.runner import require_live
    from fwman.firmware.ops.flash import FlashOptions
    from fwman.firmware.upgrade.apply import apply_upgrade
    from fwman.gpu.inventory import find_card, require_cards

    app.require_change("fwman upgrade --apply", needs_root=False)  # root: the flash's own gate
    host = app.host
    require_live(host, app.is_replay, "fwman upgrade --apply")
    cards = require_cards(host)
    buses = [find_card(cards, b).bus_id for b in selected]
    options = FlashOptions(args.reuse, args.no_backup_bios_ok, False, args.timeout)
    stream = terminal_stream(app)
    result = apply_upgrade(
        host,
        app.env.euid,
        cards,
        options,
        buses,
        say=lambda t: app.echo(t, err=True),
        stream=stream,
        command=app.command_line,
    )
    if as_json:
        app.emit_json(
            "upgrade-apply",
            {
                "operation": result.operation,
                "backup_run": result.backup_run,
                "flashed": [result_json(r) for r in result.flashed],
                "next_steps": result.next_steps,
            },
        )
        return
    for r in result.flashed:
        app.echo(f"{r.card}: {r.before_version} -> {r.after_version}: written, read back and verified")
    if result.flashed:
        app.echo(f"backups of every card: run {result.backup_run} (fwman backup list)")
        app.echo("next steps:")
        for i, step in enumerate(result.next_steps, 1):
            title, _, details = step.partition(": ")
            if "; " in details:  # a step with several details: one line each, easier to follow at the console
                app.echo(f"  {i}. {title}")
                for detail in details.split("; "):
                    app.echo(f"       - {detail}")
            else:
                app.echo(f"  {i}. {step}")


def _check(app: AppContext, as_json: bool) -> None:
    from fwman.core.errors import MissingError, VerificationError
    from fwman.firmware.upgrade.apply import check_upgrade
    from fwman.gpu.inventory import require_cards

    rows = check_upgrade(app.host, require_cards(app.host))
    if as_json:
        app.emit_json("upgrade-check", {"cards": [r.__dict__ for r in rows]})
    else:
        app.table(
            ["CARD", "RESULT", "DETAIL"],
            [[r.bus_id, r.result, r.message] for r in rows],
        )
    bad = [r for r in rows if r.result == "mismatch"]
    if bad:
        raise VerificationError(f"{len(bad)} card(s) not as flashed: {bad[0].bus_id}: {bad[0].message}")
    unknown = [r.bus_id for r in rows if r.running is None]
    if unknown:  # the check could not run for these: never exit 0 as if it had passed
        raise MissingError(
            f"cannot check {len(unknown)} card(s): firmware version unreadable ({', '.join(unknown)})",
            hint="load the NVIDIA driver so nvidia-smi can read it, then run `fwman upgrade --check` again",
        )
