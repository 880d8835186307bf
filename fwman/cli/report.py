"""``fwman flash report``: an owner report of one card's flash and post-reboot check, to attach to an issue."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.render import finish
from fwman.cli.vocabulary import renamed_option


@click.command("report")
@click.option("--card", "bus", required=True, metavar="BUS", help="The card: bus id (41:00.0) or nvidia-smi index.")
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write the report as JSON (fwman.report/1) to FILE, to attach to an issue.",
)
@renamed_option("--out", "--output", "out", type=click.Path(dir_okay=False))
@leaf_options
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
      fwman flash report --card 41:00.0 --output 41.report.json
    """
    from fwman.app.owner_report import card_report

    finish(app, "report", card_report(app.host, bus, out), as_json)
