"""``fwman upgrade``: plan (``--dry-run``), run (``--apply``) and check (``--check``) the firmware upgrade.

Layout: :func:`upgrade` parses options; ``--dry-run`` builds the plan once (:func:`build_plan`, on
:func:`fwman.firmware.upgrade.plan.build_upgrade_plan`) and prints it (:func:`dry_run_report`); ``--apply`` and
``--check`` live in :mod:`fwman.cli.upgrade_apply`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.cli.upgrade_apply import apply_options, run_mode
from fwman.core.errors import UsageError

if TYPE_CHECKING:
    from fwman.firmware.upgrade.model import CardPlan, UpgradePlan


@click.command("upgrade")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing.")
@click.option(
    "--card", "cards", multiple=True, metavar="BUS", help="Flash only this card (repeatable); all are backed up."
)
@apply_options
@json_option
@common_options
@pass_app
def upgrade(
    app: AppContext,
    dry_run: bool,
    cards: tuple[str, ...],
    as_json: bool,
    apply: bool,
    check: bool,
    no_backup_bios_ok: bool,
    reuse: str | None,
    timeout: float,
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
    """
    if dry_run and (apply or check):  # a dry run never flashes or records anything: refuse the mix outright
        raise UsageError(
            f"--dry-run and {'--apply' if apply else '--check'} contradict each other: nothing was done",
            hint="fwman upgrade --dry-run prints the plan; fwman upgrade --apply runs it",
        )
    if apply or check:  # docs/flash.md: back up all, flash, reboot, then --check
        flags = {"no_backup_bios_ok": no_backup_bios_ok}
        return run_mode(app, cards, as_json, apply=apply, check=check, reuse=reuse, timeout=timeout, **flags)
    if not dry_run:
        raise UsageError(
            "say what to do: --dry-run prints the plan, --apply runs it, --check checks it after the reboot",
            hint="start with: fwman upgrade --dry-run",
        )
    plan = build_plan(app, cards)
    dry_run_report(app, plan, as_json)


def build_plan(app: AppContext, selected: tuple[str, ...] = ()) -> UpgradePlan:
    """Return the plan for this invocation's host (cards from the inventory, the catalog in use).

    Raises UsageError for an unknown ``--card``, MissingError when there is no NVIDIA GPU or no catalog.
    """
    from fwman.core.errors import MissingError
    from fwman.firmware.catalog.load import load_catalog
    from fwman.firmware.upgrade.plan import build_upgrade_plan
    from fwman.gpu.inventory import find_card, scan_cards

    found = scan_cards(app.host)
    if not found:
        raise MissingError("no NVIDIA GPU found", hint="fwman scan shows what fwman sees")
    buses = [find_card(found, bus).bus_id for bus in selected]
    return build_upgrade_plan(app.host, found, load_catalog(app.host), buses)


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


def dry_run_report(app: AppContext, plan: UpgradePlan, as_json: bool) -> None:
    """Print ``plan`` (text for people, or the versioned ``upgrade-plan`` JSON)."""
    from fwman.core.findings import Severity
    from fwman.core.units import human_bytes
    from fwman.firmware.upgrade.plan import short_bus

    unknown = [short_bus(c.bus_id) for c in plan.cards if c.action == "check"]
    if as_json:
        app.emit_json(
            "upgrade-plan",
            {
                "dry_run": True,
                "ready": plan.ready,
                **plan.model_dump(mode="json"),
            },
        )
        _raise_unknown(unknown)
        return
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
    if unknown:  # never "nothing to flash" about cards whose firmware could not be read
        _raise_unknown(unknown)
    if not plan.flash_cards:
        app.echo("Nothing to flash: every card the catalog knows already runs its recommended image.")
    elif blocks:
        n = len(blocks)
        app.echo(f"Not ready: {n} gate{'s' if n != 1 else ''} above must be cleared before the flash can run.")
    else:
        app.echo("Ready: every gate of the plan is clear.")


def _raise_unknown(unknown: list[str]) -> None:
    """Raise MissingError (exit 5) when the firmware version of some cards could not be read: no plan for them."""
    from fwman.core.errors import MissingError

    if unknown:
        raise MissingError(
            f"cannot plan: the firmware version of {len(unknown)} card(s) could not be read ({', '.join(unknown)})",
            hint="load the NVIDIA driver so nvidia-smi can read it (or run as root), then plan again",
        )
