"""``fwman catalog propose``: a local entry and owner reports become a format-2 board file for the catalog.

Options and rendering only: the use case is :func:`fwman.app.report.propose_to_file`.
"""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.vocabulary import renamed_option


@click.command("propose")
@click.argument("board")
@click.option(
    "--report",
    "reports",
    multiple=True,
    nargs=2,
    metavar="FILE URL",
    help="An owner report (fwman flash report --output FILE) and the public https page where it is published; repeat.",
)
@click.option(
    "-o", "--output", "out", type=click.Path(dir_okay=False), metavar="FILE", help="Write the board file to FILE."
)
@renamed_option("--out", "--output", "out", type=click.Path(dir_okay=False))
@leaf_options
def propose(app: AppContext, board: str, reports: tuple[tuple[str, str], ...], out: str | None, as_json: bool) -> None:
    """Turn BOARD's local entry and owner reports into a board file whose sources are those reports.

    BOARD is the subsystem (f00d:3090) or the four-part key of a local entry on this host (fwman catalog
    add-local). Each --report names a report file written by `fwman flash report --output` and the public URL where
    it is published (an issue, say): every fact the report states cites that URL. Only reports of this board
    whose flash `upgrade --check` confirmed are taken; images no report ran are left out. The file is linted
    as `catalog lint` would (exit 4 on an error); a maintainer reviews it, adds it to catalog/boards/ and signs.
    Changes nothing on the host.

    \b
    Example:
      fwman flash report --card 41:00.0 --output 41.report.json
      fwman catalog propose f00d:3090 --report 41.report.json https://github.com/ORG/fwman/issues/N \\
          --output 10de-2204-f00d-3090.toml
    """
    from fwman.app.report import propose_to_file
    from fwman.cli.render import finish

    finish(app, "catalog-propose", propose_to_file(app.host, board, reports, out), as_json)
