"""``fwman upgrade``: plan (``--dry-run``), run (``--apply``) and check (``--check``) the firmware upgrade.

Options and rendering only: :func:`fwman.app.upgrade.choose_mode` picks the mode, and one use case of
:mod:`fwman.app.upgrade` runs it (``plan_upgrade``, ``apply_plan``, ``check_flashed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.cli.flash import flash_options

if TYPE_CHECKING:
    from fwman.app.upgrade import PlanResult
    from fwman.firmware.upgrade.model import CardPlan


@click.command("upgrade")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option("--apply", is_flag=True, help="Back up every card, then flash the plan's targets one at a time.")
@click.option("--check", is_flag=True, help="After the reboot: confirm version and BAR1 per card, recorded.")
@click.option(
    "--card", "cards", multiple=True, metavar="BUS", help="Flash only this card (repeatable); all are backed up."
)
@flash_options(downgrade=False)
@json_option
@common_options
@pass_app
def upgrade(
    app: AppContext,
    dry_run: bool,
    apply: bool,
    check: bool,
    cards: tuple[str, ...],
    no_backup_bios_ok: bool,
    reuse: str | None,
    timeout: float,
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
      fwman upgrade --check              after the reboot: version and BAR1 per card, recorded

    The flash options (--reuse-backups-from, --i-understand-no-backup-bios, --timeout) are for --apply.
    """
    from fwman.app import upgrade as use

    mode = use.choose_mode(dry_run, apply, check)
    if mode == "apply":
        from fwman.cli.flash import operator

        applied = use.apply_plan(operator(app, "fwman upgrade --apply"), cards, reuse, no_backup_bios_ok, timeout)
        if as_json:
            app.emit_json("upgrade-apply", applied.to_json())
        else:
            for line in applied.lines():
                app.echo(line)
    elif mode == "check":
        checked = use.check_flashed(app.host)
        if as_json:
            app.emit_json("upgrade-check", checked.to_json())
        else:
            app.table(["CARD", "RESULT", "DETAIL"], [[r.bus_id, r.result, r.message] for r in checked.rows])
        checked.raise_problems()
    else:
        result = use.plan_upgrade(app.host, cards)
        if as_json:
            app.emit_json("upgrade-plan", result.to_json())
            result.raise_unreadable()
        else:
            dry_run_report(app, result)


def _action_text(app: AppContext, c: CardPlan) -> str:
    if not c.selected and c.action == "flash":
        return f"not selected (would get {c.target_version})"
    if c.action == "flash":
        return app.style(f"flash -> {c.target_version}", fg="cyan", bold=True)
    if c.action == "keep":
        return "keep (ReBAR: setup switch only)" if c.setup_switch_only else "keep"
    if c.action == "unknown-board":
        return app.style("not in catalog: left alone", fg="yellow")
    return app.style("cannot decide", fg="yellow")


def dry_run_report(app: AppContext, result: PlanResult) -> None:
    """Print the plan for people; raises MissingError (exit 5) when some cards' firmware could not be read."""
    from fwman.core.findings import Severity
    from fwman.core.units import human_bytes
    from fwman.firmware.upgrade.plan import short_bus

    plan = result.plan
    bold = {"bold": True}
    app.echo(app.style("fwman upgrade --dry-run", **bold) + app.style(f"  ({plan.host}; nothing is changed)", dim=True))
    cat = plan.catalog
    app.echo(app.style(f"catalog: {cat['source']}, serial {cat['serial']}, {cat['date']}", dim=True))
    notes = cat.get("notes")
    for note in notes if isinstance(notes, list) else []:
        app.echo(app.style(f"  note: {note}", dim=True))
    app.echo("")
    rows = []
    for c in plan.cards:
        bar1 = human_bytes(c.bar1_bytes) if c.bar1_bytes else "?"
        if c.max_rebar_bytes and c.max_rebar_bytes != c.bar1_bytes:
            bar1 += f" (offers {human_bytes(c.max_rebar_bytes)})"
        status = "" if c.current_status in ("current", "unverified") else f" ({c.current_status})"
        firmware = f"{c.current_version or '?'}{status}"
        rows.append([short_bus(c.bus_id), c.subsystem, firmware, bar1, _action_text(app, c)])
    app.table(["BUS", "SUBSYSTEM", "FIRMWARE", "BAR1", "PLAN"], rows)

    seen: set[str] = set()
    for c in plan.cards:
        if c.board is None or c.pci_key in seen or not c.options:
            continue
        seen.add(c.pci_key)
        on = [short_bus(x.bus_id) for x in plan.cards if x.pci_key == c.pci_key]
        app.echo("")
        app.echo(app.style(f"Images for {c.subsystem} ({c.board}), cards {', '.join(on)}", **bold))
        for o in c.options:
            mark = app.style("use ", fg="green", bold=True) if o.chosen else app.style("skip", dim=True)
            running = "  (running now)" if o.version == c.current_version else ""
            app.echo(f"  {mark} {o.version}  {o.status.value:<10}  {o.why}{running}")
        app.echo(f"  -> {c.reason}")

    app.echo("")
    app.echo(app.style("Plan", **bold))
    for step in plan.steps:
        who = app.style("you  ", fg="magenta") if step.by == "you" else app.style("fwman", fg="blue")
        app.echo(f"  {step.number}. [{who}] {app.style(step.title, **bold)}")
        for d in step.details:
            app.echo(f"       - {d}")
        for cmd in step.commands:
            app.echo(f"       $ {cmd}")

    blocks = [f for f in plan.findings if f.severity is Severity.BLOCK]
    others = [f for f in plan.findings if f.severity is not Severity.BLOCK]
    if plan.findings:
        app.echo("")
    for f in blocks:
        app.echo(app.style("BLOCKED", fg="red", bold=True) + f": {f.message}")
        if f.fix:
            app.echo(f"  fix: {f.fix}")
    for f in others:
        app.echo(app.style(f.severity.value.upper(), fg="yellow") + f": {f.message}")
        if f.fix:
            app.echo(f"  fix: {f.fix}")
    app.echo("")
    result.raise_unreadable()  # never "nothing to flash" about cards whose firmware could not be read
    if not plan.flash_cards:
        app.echo("Nothing to flash: every card the catalog knows already runs its recommended image.")
    elif blocks:
        n = len(blocks)
        app.echo(f"Not ready: {n} gate{'s' if n != 1 else ''} above must be cleared before the flash can run.")
    else:
        app.echo("Ready: every gate of the plan is clear.")
