"""``fwman catalog``: list, show, lint, sign and update the curated VBIOS catalog.

Options and rendering only: the use cases are in :mod:`fwman.app.catalog.commands` (``keys``:
:mod:`fwman.cli.catalog_keys`, ``add-local``: :mod:`fwman.cli.catalog_local`, ``propose``:
:mod:`fwman.cli.catalog_propose`).
"""

from __future__ import annotations

from pathlib import Path

import click

from fwman.cli.catalog_keys import catalog_dir_option, keys, serial_option, signing_dry_run_option, signing_key_option
from fwman.cli.catalog_local import add_local
from fwman.cli.catalog_propose import propose
from fwman.cli.context import AppContext, leaf_options, timeout_option
from fwman.cli.render import finish


@click.group("catalog")
def catalog() -> None:
    """The curated VBIOS catalog: which image each board (PCI subsystem) should run, and why.

    \b
    Examples:
      fwman catalog list                      every board and image, with its status
      fwman catalog show 3842:3987            one board: images, reasons, hashes, sources
      fwman catalog update --url URL          install a newer signed catalog (verified first)
      fwman catalog lint                      maintainers: check the catalog files
      fwman catalog sign --key maint.pem      maintainers: write and sign catalog/index.json
      fwman catalog keys show                 the catalog keys, their validity, the retired ones

    The catalog bundled with fwman is used until `catalog update` installs a newer one in
    /var/lib/fwman/catalog. Docs: docs/catalog.md, docs/catalog-format.md.
    """


@catalog.command("list")
@leaf_options
def list_(app: AppContext, as_json: bool) -> None:
    """List every board and image in the catalog in use.

    \b
    Examples:
      fwman catalog list
      fwman catalog list --json | jq '.boards[].images[] | select(.status=="current")'
    """
    from fwman.app.catalog.commands import list_catalog

    finish(app, "catalog-list", list_catalog(app.host), as_json)


@catalog.command("show")
@click.argument("board")
@leaf_options
def show(app: AppContext, board: str, as_json: bool) -> None:
    """Show one board: what it is, every image with its status, reason, hashes and sources.

    BOARD is a subsystem ID (3842:3987) or all four PCI IDs (10de:2204:3842:3987).

    \b
    Examples:
      fwman catalog show 3842:3987
      fwman catalog show 10de:2204:3842:3982 --json
    """
    from fwman.app.catalog.commands import show_board

    finish(app, "catalog-board", show_board(app.host, board), as_json)


@catalog.command("lint")
@catalog_dir_option(
    "Catalog directory to check (default: the catalog bundled with fwman, plus this host's local entries)."
)
@click.option(
    "--local", "local_only", is_flag=True, help="Check only this host's local entries (/etc/fwman/catalog.d)."
)
@leaf_options
def lint(app: AppContext, directory: Path | None, local_only: bool, as_json: bool) -> None:
    """Check catalog files: schema, unknown keys, duplicates, hashes, sources, URLs, file names, index, signature.

    Without --dir, the host's local entries (/etc/fwman/catalog.d, from `fwman catalog add-local`) are checked
    too: the board rules plus their [local] provenance. Errors exit with status 4; warnings do not.

    \b
    Examples:
      fwman catalog lint
      fwman catalog lint --dir ./catalog --json
      fwman catalog lint --local
    """
    from fwman.app.catalog.commands import lint as lint_catalog

    result = lint_catalog(app.host, None if directory is None else str(directory), local_only=local_only)
    finish(app, "catalog-lint", result, as_json)


@catalog.command("sign")
@signing_key_option("Ed25519 private key (PEM). Keep it outside the repository.")
@catalog_dir_option(
    "Catalog directory to sign (default: the catalog bundled with fwman, i.e. the source tree's catalog/)."
)
@serial_option
@click.option("--date", "date", help="Index date YYYY-MM-DD (default: today, UTC).")
@click.option(
    "--expires",
    help="When the index stops being trusted: YYYY-MM-DD (00:00 UTC) or YYYY-MM-DDTHH:MM:SSZ "
    "(default: 365 days after --date).",
)
@signing_dry_run_option
@leaf_options
def sign(
    app: AppContext,
    key_file: Path,
    directory: Path | None,
    serial: int | None,
    date: str | None,
    expires: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Write catalog/index.json (every file's SHA-256, a new serial, a date, an expiry) and sign it (index.json.sig).

    For catalog maintainers. The catalog must lint clean. When the directory has a keys document (keys.json),
    the key must be a catalog key it names, valid on --date; otherwise its public half must be in
    /etc/fwman/keys.d/ of the hosts that install the catalog. After the expiry `catalog update` refuses the
    index, so re-sign before it (lint warns 30 days ahead). The trust model: docs/signing.md.

    \b
    Examples:
      fwman catalog sign --key ~/fwman-catalog.pem
      fwman catalog sign --key ~/fwman-catalog.pem --dir ./catalog --serial 7 --expires 2027-06-01
      fwman catalog sign --key ~/fwman-catalog.pem --dry-run --json
    """
    from fwman.app.catalog.commands import sign as sign_catalog

    where = None if directory is None else str(directory)
    result = sign_catalog(str(key_file), where, serial=serial, date=date, expires=expires, dry_run=dry_run)
    finish(app, "catalog-sign", result, as_json)


@catalog.command("update")
@click.option("--url", help="Where the catalog is published (the directory holding index.json).")
@timeout_option(30.0, "Seconds without data before a download attempt is given up.")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries per file.")
@leaf_options
def update(app: AppContext, url: str | None, timeout: float, retries: int, as_json: bool) -> None:
    """Download a newer catalog, verify it completely, then install it atomically.

    The publisher's keys.json must be signed by a root key (bundled in fwman/keys/, or
    /etc/fwman/root-keys.d/), not expired and not older than the installed one: a new one rotates the catalog
    keys. index.json must be signed by a catalog key it names and that is valid now (or a key in
    /etc/fwman/keys.d/); a retired key is refused. The index must not have expired, nor be older than the
    installed one (rollback); every file must match its SHA-256 in the signed index. Only then does
    /var/lib/fwman/catalog switch to the new copy. --url may also be a catalog directory (a git checkout).
    Without --url, /etc/fwman/catalog-url is used; without that, the catalog bundled with fwman is checked.
    The model: docs/signing.md.

    \b
    Examples:
      fwman catalog update --url https://example.org/fwman-catalog/
      fwman catalog update --url /srv/fwman/catalog     # a git checkout of the signed catalog
      fwman catalog update            # /etc/fwman/catalog-url, else the bundled catalog
    """
    from fwman.app.catalog.commands import update as update_catalog

    app.require_change("fwman catalog update")
    note = (lambda text: None) if as_json else (lambda text: app.echo(text, err=True))
    finish(app, "catalog-update", update_catalog(app.host, url, timeout=timeout, retries=retries, note=note), as_json)


# `add-local`, `propose` and `keys` are kept in their own modules, registered here so the command table
# (fwman/cli/app.py) stays unchanged
for _sub in (add_local, propose, keys):
    catalog.add_command(_sub)
