"""``fwman report``: an owner report of one card's flash and post-reboot check, to attach to an issue."""

from __future__ import annotations

import json

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.units import human_bytes
from fwman.firmware.ops.report import OwnerReport, report_document


def _offers(sizes: list[int] | None) -> str:
    if not sizes:
        return "unknown"
    return f"{human_bytes(min(sizes))} .. {human_bytes(max(sizes))}" if len(sizes) > 1 else human_bytes(sizes[0])


def _power(limit: float | None, default: float | None) -> str:
    if limit is None and default is None:
        return "unknown"
    now = f"{limit:g} W" if limit is not None else "? W"
    return f"{now} (default {default:g} W)" if default is not None else now


def report_text(report: OwnerReport) -> list[str]:
    """Return the report as lines for people (the same facts as the JSON, for pasting into an issue)."""
    c, f, b, a = report.card, report.flash, report.before, report.after
    board_id = c.board_id or "unknown"
    lines = [
        f"fwman owner report (fwman.report/1), generated {report.generated_at} by fwman {report.fwman_version}",
        f"{'Card':<16}{c.vendor_id}:{c.device_id} subsystem {c.subsystem_vendor_id}:{c.subsystem_device_id}, "
        f"board ID {board_id}" + (f" ({c.name})" if c.name else ""),
        f"{'Flash':<16}{f.kind} {f.result} at {f.time}" + (f", image {f.image}" if f.image else ""),
        f"{'Image SHA-256':<16}{f.image_sha256 or 'unknown'}",
        f"{'Image chain':<16}{f.image_chain_sha256 or 'unknown'}",
        "",
        f"{'':<16}{'BEFORE':<66}AFTER",
    ]

    def size(n: int | None) -> str:
        return human_bytes(n) if n else "unknown"

    rows = [
        ("Version", b.version or "unknown", a.version or "unknown"),
        ("Chain SHA-256", b.chain_sha256 or "unknown", a.chain_sha256 or "unknown"),
        ("BAR1", size(b.bar1_bytes), size(a.bar1_bytes)),
        ("BAR1 offers", _offers(b.bar1_offers_bytes), _offers(a.bar1_offers_bytes)),
        (
            "Power limit",
            _power(b.power_limit_w, b.default_power_limit_w),
            _power(a.power_limit_w, a.default_power_limit_w),
        ),
        ("Recorded by", f"{b.recorded_by} {b.recorded_at or ''}", f"{a.recorded_by} {a.recorded_at or ''}"),
    ]
    lines += [f"{label:<16}{before:<66}{after}" for label, before, after in rows]
    lines.append("")
    if report.check is None:
        lines.append(f"{'Check':<16}not run yet")
    else:
        lines.append(f"{'Check':<16}{report.check.result} at {report.check.time}: {report.check.message}")
    lines.append(f"{'Left out':<16}{', '.join(report.redacted)}")
    lines += [f"note: {n}" for n in report.notes]
    return lines


@click.command()
@click.option("--card", "bus", required=True, metavar="BUS", help="The card whose last flash to report (e.g. 41:00.0).")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write the report as JSON (fwman.report/1) to FILE, to attach to an issue.",
)
@json_option
@common_options
@pass_app
def report(app: AppContext, bus: str, out: str | None, as_json: bool) -> None:
    """Report what the last flash did to one card: IDs, versions, hashes, BAR1, power, the check.

    Built from fwman's own records (the flash history): the card's PCI IDs and board ID, the firmware
    version and option-ROM chain hash before and after, the image's hashes, BAR1 and the BAR1 sizes the card
    offers and the power limits before and after, and the result of `fwman upgrade --check` after the reboot.
    No GPU UUID, serial number, host name, file path or flash log is included. Attach the JSON to an issue
    (or paste the text): `fwman catalog propose` turns a local entry and such reports into a catalog board.
    Changes nothing.

    \b
    Examples:
      fwman upgrade --check                      after the reboot
      fwman report --card 41:00.0 --out 41.report.json
    """
    from fwman.app.report import owner_report
    from fwman.host.userfiles import write_user_file

    result = owner_report(app.host, bus)
    doc = report_document(result)
    if out:
        write_user_file(out, (json.dumps(doc, indent=2) + "\n").encode())
    if as_json:
        app.emit_json("report", {k: v for k, v in doc.items() if k != "schema"})
        return
    for line in report_text(result):
        app.echo(line.rstrip())
    if out:
        app.echo(f"wrote {out} (JSON, fwman.report/1)")
