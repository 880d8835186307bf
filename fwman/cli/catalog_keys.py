"""``fwman catalog keys``: the catalog's keys document (which keys may sign the index, which are retired)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app
from fwman.core import clock
from fwman.core.errors import MissingError, UsageError, VerificationError


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


def _state(key: Any, now: Any) -> str:
    if key.not_before is not None and now < key.not_before:
        return "not yet valid"
    if key.not_after is not None and now >= key.not_after:
        return "expired"
    return "valid"


@keys.command("show")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A catalog directory (default: the keys document in force on this host: installed or bundled).",
)
@json_option
@common_options
@pass_app
def show(app: AppContext, directory: Path | None, as_json: bool) -> None:
    """Show the keys document: each catalog key with its window and state, the retired keys, who signed it.

    The signature is checked against the root keys (fwman/keys/ and /etc/fwman/root-keys.d/); a document that
    does not verify is shown with the reason, and the command exits 4.
    """
    from fwman.core.resources import is_data_file, read_data
    from fwman.firmware.catalog.load import installed_keys
    from fwman.firmware.catalog.signing import (
        KEYS_NAME,
        KEYS_SIG_NAME,
        MAX_KEYS_FILE,
        parse_keys,
        root_keys,
        verify_keys_document,
    )
    from fwman.host.userfiles import is_user_file, read_user_file

    now = clock.now_utc()
    if directory is None:
        current = installed_keys(app.host)
        if current.doc is None or current.data is None:
            raise MissingError("no keys document installed", hint="install a catalog with `fwman catalog update`")
        data, origin = current.data, current.origin
        sig_path = Path(origin).with_name(KEYS_SIG_NAME)
        sig = (
            current.local_pair[1]
            if current.local_pair is not None
            else (read_data(sig_path, MAX_KEYS_FILE) if is_data_file(sig_path) else b"")
        )
    else:
        # the maintainer's directory, named on the command line: the user-file door, not fwman's bundled data
        origin = str(directory / KEYS_NAME)
        data = read_user_file(origin, max_bytes=MAX_KEYS_FILE)
        sig_file = str(directory / KEYS_SIG_NAME)
        sig = read_user_file(sig_file, max_bytes=MAX_KEYS_FILE) if is_user_file(sig_file) else b""
    doc = parse_keys(data, origin)
    problem = None
    root_id = None
    try:
        # the expiry is reported on its own below: the signature is checked first
        _, root = verify_keys_document(data, sig, root_keys(app.host), None, origin)
        root_id = root.key_id
    except VerificationError as e:  # shown as the document's state, then exit 4
        problem = e.message
    named = doc.catalog_keys(origin)
    expired = now >= doc.expires_at
    if as_json:
        app.emit_json(
            "catalog-keys",
            {
                "origin": origin,
                "serial": doc.serial,
                "date": doc.date,
                "expires": doc.expires,
                "expired": expired,
                "signature": {"good": problem is None, "root_key_id": root_id, "problem": problem},
                "keys": [{**k.model_dump(), "state": _state(t, now)} for k, t in zip(doc.keys, named, strict=True)],
                "retired": [r.model_dump() for r in doc.retired],
            },
        )
    else:
        signed = f"signed by root key {root_id}" if problem is None else f"signature: {problem}"
        app.echo(f"keys document serial {doc.serial} ({doc.date}, expires {doc.expires}) at {origin}")
        app.echo(f"  {signed}")
        app.echo("KEY               VALID FROM            VALID UNTIL           STATE")
        for k, t in zip(doc.keys, named, strict=True):
            app.echo(f"{k.key_id}  {k.not_before}  {k.not_after}  {_state(t, now)}")
        for r in doc.retired:
            app.echo(f"{r.key_id}  retired {r.retired}: {r.reason}")
    if problem is not None or expired:
        raise VerificationError(
            f"{origin}: " + (problem or f"expired on {doc.expires}"),
            hint="a maintainer signs a new one with the root key: `fwman catalog keys sign --key ROOT.pem`",
        )


@keys.command("sign")
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The root key's Ed25519 private key (PEM). Keep it outside the repository.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Catalog directory holding keys.json (default: the catalog bundled with fwman).",
)
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
@click.option("--serial", type=click.IntRange(min=1), help="Serial number (default: the current one plus 1).")
@click.option("--date", "date", help="Document date YYYY-MM-DD (default: today, UTC).")
@common_options
@pass_app
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
    from fwman.core.names import iso_date
    from fwman.core.signing import load_private_key, load_public_key
    from fwman.firmware.catalog.load import BUNDLED_CATALOG
    from fwman.firmware.catalog.publish import KeysChange, sign_keys_directory
    from fwman.firmware.catalog.signing import KEYS_NAME, root_keys
    from fwman.host.live import LiveHost
    from fwman.host.userfiles import read_user_file, user_path

    directory = Path(user_path(str(directory or BUNDLED_CATALOG)))
    stamp = iso_date(date) if date is not None else clock.now_utc().strftime("%Y-%m-%d")
    for kid in (*retire, *drop):
        if len(kid) != 16 or any(c not in "0123456789abcdef" for c in kid):
            raise UsageError(f"--retire/--drop {kid!r}: a key id is 16 lower-case hex digits")
    change = KeysChange(
        date=stamp,
        add=tuple(load_public_key(read_user_file(str(p)), str(p)) for p in add),
        not_before=metadata_time(not_before, "--not-before") if not_before else None,
        not_after=metadata_time(not_after, "--not-after") if not_after else None,
        note=note,
        retire=retire,
        drop=drop,
        reason=reason,
        expires=metadata_time(expires, "--expires") if expires else None,
        serial=serial,
    )
    root = load_private_key(read_user_file(str(key_file)), str(key_file))
    # the maintainer's working tree is on this machine, not under --root
    doc = sign_keys_directory(LiveHost("/"), directory, root, root_keys(app.host), change)
    named = ", ".join(k.key_id for k in doc.keys)
    gone = ", ".join(r.key_id for r in doc.retired) or "none"
    app.echo(
        f"signed {directory}/{KEYS_NAME}: serial {doc.serial}, {doc.date}, expires {doc.expires}\n"
        f"  catalog keys: {named}; retired: {gone}"
    )


def metadata_time(value: str, option: str) -> str:
    """Return ``value`` (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ) as a metadata timestamp. Raises UsageError."""
    from fwman.core.names import iso_date
    from fwman.firmware.catalog.schema import parse_timestamp

    stamp = value if "T" in value else f"{iso_date(value, option)}T00:00:00Z"
    try:
        parse_timestamp(stamp)
    except ValueError:
        raise UsageError(
            f"{option} {value!r}: not a date", hint="give YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)"
        ) from None
    return stamp
