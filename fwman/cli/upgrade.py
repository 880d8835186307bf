"""``fwman upgrade``: plan (``--dry-run``), run (``--apply``) and check (``--check``) the firmware upgrade.

Options and rendering only: :func:`fwman.app.upgrade.choose_mode` picks the mode, and one use case of
:mod:`fwman.app.upgrade` runs it (``plan_upgrade``, ``apply_plan``, ``check_flashed``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.flash import flash_options

if TYPE_CHECKING:
    from fwman.app.flash import FlashOptions


@click.command("upgrade")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--apply", is_flag=True, help="Back up every card, then flash the plan's targets one at a time.")
@click.option("--check", is_flag=True, help="After the reboot: confirm version and BAR1 per card, recorded.")
@click.option("--card", "cards", multiple=True, metavar="BUS", help="Flash only this card: bus id or nvidia-smi index.")
@click.option(
    "--yes", is_flag=True, help="--apply: do not ask (scripts, Ansible); on a terminal --apply asks once first."
)
@flash_options(downgrade=False)
@leaf_options
def upgrade(
    app: AppContext,
    dry_run: bool,
    apply: bool,
    check: bool,
    cards: tuple[str, ...],
    yes: bool,
    flash_opts: FlashOptions,
    as_json: bool,
) -> None:
    """Upgrade card firmware from the catalog: e.g. launch firmware to a Resizable-BAR image.

    For each card: its catalog board, the firmware it runs, the recommended image (the newest one that is
    neither withdrawn nor superseded; skipped images are listed with the reason), then the whole plan: back up
    every card, get and verify the image, flash, firmware-setup switches (Above 4G Decoding, Re-Size BAR
    Support), reboot, post-checks. Cards the catalog does not know are reported, never guessed.

    \b
    Examples:
      fwman upgrade --dry-run
      fwman upgrade --dry-run --card 41:00.0
      fwman upgrade --dry-run --json
      fwman upgrade --dry-run --snapshot fixtures/hosts/rig-4x3090     (the bundled example host)
      fwman upgrade --apply              back up every card, flash the targets one at a time (docs/flash.md)
      fwman upgrade --apply --yes        the same without the question (scripts; a terminal is asked once)
      fwman upgrade --check              after the reboot: version and BAR1 per card, recorded

    The flash options (--reuse-backups-from, --i-understand-no-backup-bios, --timeout) are for --apply.
    """
    from fwman.app import upgrade as use
    from fwman.cli.render import finish

    mode = use.choose_mode(dry_run, apply, check)
    if mode == "apply":
        from fwman.cli.flash import operator

        ask = None if yes else confirmation(app)
        applied = use.apply_plan(operator(app, "fwman upgrade --apply"), cards, flash_opts, confirm=ask)
        finish(app, "upgrade-apply", applied, as_json)
    elif mode == "check":
        finish(app, "upgrade-check", use.check_flashed(app.host), as_json)
    else:
        finish(app, "upgrade-plan", use.plan_upgrade(app.host, cards), as_json)


def confirmation(app: AppContext) -> Callable[[str], bool] | None:
    """Return the question ``--apply`` asks once on a terminal (True when the answer is y or yes), or None when
    standard input is not a terminal (a script: it runs unasked, as with --yes)."""
    stdin = app.env.stdin
    if stdin is None or not app.env.stdin_isatty:
        return None

    def ask(question: str) -> bool:
        app.echo(f"{question} [y/N] ", err=True, nl=False)
        try:
            answer = stdin.readline()
        except (OSError, ValueError):  # the terminal went away: no answer is no
            return False
        return answer.strip().lower() in ("y", "yes")

    return ask
