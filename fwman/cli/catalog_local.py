"""``fwman catalog add-local``: a local catalog entry for a card the curated catalog does not know.

Options and rendering only: the use case is :func:`fwman.app.catalog.local.add_local`.
"""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, leaf_options
from fwman.cli.vocabulary import renamed_option


@click.command("add-local")
@click.option("--card", "bus", required=True, metavar="BUS", help="The card to describe (e.g. 41:00.0).")
@click.option(
    "--image",
    "image_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The vendor file you downloaded: a .rom, or the card maker's update program or archive.",
)
@click.option("--expect-md5", required=True, metavar="HEX", help="The MD5 the card maker publishes for that file.")
@click.option("--md5-source", required=True, metavar="TEXT", help="Where it is published (the download page URL).")
@click.option(
    "--firmware-version",
    "version",
    metavar="VERSION",
    help="Which image to take when the package holds several for the card.",
)
@renamed_option("--version", "--firmware-version", "version")
@click.option("--backup", "backup_path", metavar="PATH", help="The stored backup to read the running firmware from.")
@click.option("--name", metavar="TEXT", help="Board name (default: the firmware's sign-on string).")
@click.option("--maker", metavar="TEXT", help="Board maker (default: unknown).")
@click.option("--replace", is_flag=True, help="Replace an existing local entry for this board.")
@click.option("--export", "export", is_flag=True, help="Also print the entry in the curated format (for upstream).")
@leaf_options
def add_local(
    app: AppContext,
    bus: str,
    image_file: str,
    expect_md5: str,
    md5_source: str,
    version: str | None,
    backup_path: str | None,
    name: str | None,
    maker: str | None,
    replace: bool,
    export: bool,
    as_json: bool,
) -> None:
    """Describe a card the catalog does not know, so upgrade, fetch and rom verify can use it.

    Writes /etc/fwman/catalog.d/<vendor>-<device>-<subvendor>-<subdevice>.toml from the card's live PCI IDs,
    its running firmware as read from a verified backup (take one with `fwman backup` first), and the vendor
    file you downloaded, whose MD5 must equal the one the card maker publishes. FILE may be the card maker's
    update program or archive: fwman unpacks it (7zz, never running it), finds every VBIOS image in it and
    takes the one whose subsystem and device are the card's (refusing none or several; --firmware-version picks).
    The entry is marked local and unsigned; every gate applies to it as to a curated entry, and fwman says
    "local entry" wherever it cites it. A board the curated catalog knows is refused.

    \b
    Examples:
      fwman backup --card 41:00.0
      fwman catalog add-local --card 41:00.0 --image ~/Downloads/RTX3090_V2.exe \\
          --expect-md5 <MD5 from the vendor page> --md5-source https://vendor.example/download
      fwman catalog add-local --card 41:00.0 --image FILE --expect-md5 HEX --md5-source URL --export
    """
    from fwman.app.catalog.local import add_local as add
    from fwman.cli.render import finish

    app.require_change("fwman catalog add-local")
    result = add(app.host, bus, image_file, expect_md5=expect_md5, md5_source=md5_source, version=version,
                 backup_path=backup_path, name=name, maker=maker, replace=replace, export=export)  # fmt: skip
    finish(app, "catalog-local", result, as_json)
