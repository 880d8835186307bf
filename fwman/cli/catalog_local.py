"""``fwman catalog add-local``: a local catalog entry for a card the curated catalog does not know."""

from __future__ import annotations

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core.clock import now_utc
from fwman.core.errors import UsageError
from fwman.host.userfiles import user_path


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
@click.option("--version", metavar="VERSION", help="Which image to take when the package holds several for the card.")
@click.option("--backup", "backup_path", metavar="PATH", help="The stored backup to read the running firmware from.")
@click.option("--name", metavar="TEXT", help="Board name (default: the firmware's sign-on string).")
@click.option("--maker", metavar="TEXT", help="Board maker (default: unknown).")
@click.option("--replace", is_flag=True, help="Replace an existing local entry for this board.")
@click.option("--export", "export", is_flag=True, help="Also print the entry in the curated format (for upstream).")
@json_option
@common_options
@pass_app
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
    takes the one whose subsystem and device are the card's (refusing none or several; --version picks).
    The entry is marked local and unsigned; every gate applies to it as to a curated entry, and fwman says
    "local entry" wherever it cites it. A board the curated catalog knows is refused.

    \b
    Examples:
      fwman backup --card 41:00.0
      fwman catalog add-local --card 41:00.0 --image ~/Downloads/RTX3090_V2.exe \\
          --expect-md5 <MD5 from the vendor page> --md5-source https://vendor.example/download
      fwman catalog add-local --card 41:00.0 --image FILE --expect-md5 HEX --md5-source URL --export
    """
    from fwman.firmware.catalog.load import load_catalog
    from fwman.firmware.catalog.local import export_curated
    from fwman.firmware.ops.local_entry import make_local_entry, write_local_entry
    from fwman.gpu.inventory import find_card, require_cards
    from fwman.host.live import LiveHost

    app.require_change("fwman catalog add-local")
    card = find_card(require_cards(app.host), bus)
    catalog = load_catalog(app.host)
    known = catalog.board_for(card.vendor_id, card.device_id, card.subsystem_vendor_id, card.subsystem_device_id)
    if known is not None and not catalog.is_local(known):
        raise UsageError(
            f"{known.key} is in the curated catalog ({known.board.name}): no local entry is needed",
            hint=f"fwman catalog show {known.subsystem}",
        )
    path = user_path(image_file)
    made = make_local_entry(
        app.host,
        LiveHost("/"),  # the downloaded file is on the machine the user sits at, also with --root
        card,
        image_path=path,
        expect_md5=expect_md5,
        md5_source=md5_source,
        version=version,
        backup_path=backup_path,
        name=name,
        maker=maker,
        now=now_utc().strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    target = write_local_entry(app.host, made, replace=replace)
    board = made.entry.board
    if as_json:
        app.emit_json(
            "catalog-local",
            {
                "path": target,
                "key": board.key,
                "board": board.board.model_dump(mode="json"),
                "images": [i.model_dump(mode="json") for i in board.images],
                "local": made.entry.info.model_dump(),
                "image_from": made.image_origin,
                "export": export_curated(made.entry) if export else None,
            },
        )
        return
    app.echo(app.style(f"wrote local entry {target}", bold=True))
    app.echo(f"  board      {board.board.name} ({board.key}), local, unsigned")
    for image in board.images:
        app.echo(f"  image      {image.version}  {image.status.value}")
    app.echo(f"  from       {made.image_origin}")
    app.echo(f"  MD5        {made.entry.info.image_file_md5} matches the vendor's ({md5_source})")
    app.echo(
        f"  next       fwman upgrade --dry-run; fwman fetch {board.subsystem}/{board.images[0].version} --from FILE"
    )
    if export:
        app.echo("")
        app.echo(export_curated(made.entry), nl=False)
