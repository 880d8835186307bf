"""``fwman catalog keys``: the catalog's keys document (which keys may sign the index, which are retired).

Options and rendering only: the use cases are in :mod:`fwman.app.catalog.keys`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from fwman.cli.context import AppContext, F, leaf_options
from fwman.cli.render import finish


def catalog_dir_option(help: str) -> Callable[[F], F]:
    """Return the ``--dir DIRECTORY`` option (an existing catalog directory) with this command's ``help``."""
    return click.option("--dir", "directory", type=click.Path(file_okay=False, exists=True, path_type=Path), help=help)


def signing_key_option(help: str) -> Callable[[F], F]:
    """Return the required ``--key FILE`` option (an Ed25519 private key in PEM) with this command's ``help``."""
    return click.option(
        "--key", "key_file", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path), help=help
    )


#: ``--dry-run`` of a signing command (it checks the key and the documents, then writes nothing)
signing_dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Check everything and say what would be written; write nothing."
)
#: ``--serial N`` of the documents a signing command writes
serial_option = click.option(
    "--serial", type=click.IntRange(min=1), help="Serial number (default: the current one plus 1)."
)


@click.group("keys")
def keys() -> None:
    """The keys document: the catalog signing keys a root key names, their validity, and the retired key ids.

    \b
    Examples:
      fwman catalog keys show                         the document in force on this host
      fwman catalog keys show --dir ./catalog --json  a maintainer's copy
      fwman catalog keys sign --key ROOT.pem --add new-catalog-key.pub --retire OLDKEYID --reason "..."

    The model (root keys, catalog keys, expiry, rotation without a package update): docs/signing.md.
    """


@keys.command("show")
@catalog_dir_option("A catalog directory (default: the keys document in force on this host: installed or bundled).")
@leaf_options
def show(app: AppContext, directory: Path | None, as_json: bool) -> None:
    """Show the keys document: each catalog key with its window and state, the retired keys, who signed it.

    The signature is checked against the root keys (fwman/keys/ and /etc/fwman/root-keys.d/); a document that
    does not verify is shown with the reason, and the command exits 4.
    """
    from fwman.app.catalog.keys import show_keys

    finish(app, "catalog-keys", show_keys(app.host, None if directory is None else str(directory)), as_json)


@keys.command("sign")
@signing_key_option("The root key's Ed25519 private key (PEM). Keep it outside the repository.")
@catalog_dir_option("Catalog directory holding keys.json (default: the catalog bundled with fwman).")
@click.option(
    "--add",
    "add",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A catalog key's public half (PEM) to name, or to name again with a new window. Repeatable.",
)
@click.option("--not-before", help="Start of the added keys' window: YYYY-MM-DD or ...THH:MM:SSZ (default: --date).")
@click.option("--not-after", help="End of the added keys' window (default: 365 days after --not-before).")
@click.option("--note", default="", help="A line published with the added keys (e.g. where the private half is kept).")
@click.option("--retire", multiple=True, metavar="KEYID", help="A key id to retire (published, never trusted again).")
@click.option(
    "--drop", multiple=True, metavar="KEYID", help="A key id to stop naming as a catalog key, without retiring it."
)
@click.option("--reason", default="", help="Why the --retire keys were retired (published with them).")
@click.option("--expires", help="When the keys document stops being trusted (default: 365 days after --date).")
@serial_option
@click.option("--date", "date", help="Document date YYYY-MM-DD (default: today, UTC).")
@signing_dry_run_option
@leaf_options
def sign(
    app: AppContext,
    key_file: Path,
    directory: Path | None,
    add: tuple[Path, ...],
    not_before: str | None,
    not_after: str | None,
    note: str,
    retire: tuple[str, ...],
    drop: tuple[str, ...],
    reason: str,
    expires: str | None,
    serial: int | None,
    date: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Write keys.json (the catalog keys and retired key ids, a new serial, an expiry) and sign it with a root key.

    For catalog maintainers. Starts from the directory's current keys.json (none: a first document, which
    needs --add). A published document reaches hosts with the next `fwman catalog update`: that is how a
    catalog key is rotated without a package update. The key must be a root key fwman trusts.

    \b
    Examples:
      fwman catalog keys sign --key ~/root.pem --add ~/catalog-2027.pub --not-after 2028-01-01
      fwman catalog keys sign --key ~/root.pem --add ~/catalog-2027.pub --retire 0123456789abcdef \\
          --reason "replaced by the 2027 key"
      fwman catalog keys sign --key ~/root.pem --add ~/catalog-2027.pub --drop ROOTKEYID
    """
    from fwman.app.catalog.keys import KeysRequest, sign_keys

    request = KeysRequest(tuple(str(p) for p in add), not_before, not_after, note, retire, drop, reason, expires,
                          serial, date)  # fmt: skip
    where = None if directory is None else str(directory)
    finish(app, "catalog-keys-sign", sign_keys(app.host, str(key_file), where, request, dry_run=dry_run), as_json)
