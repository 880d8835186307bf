"""``fwman catalog``: list, show, lint, sign and update the curated VBIOS catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app, timeout_option
from fwman.core import clock
from fwman.core.errors import UsageError, VerificationError


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


def _status_text(app: AppContext, status: str) -> str:
    colour = {"current": "green", "unverified": "yellow", "withdrawn": "red", "superseded": None}.get(status)
    return app.style(status, fg=colour) if colour else status


def _image_json(image: Any) -> dict[str, Any]:
    data: dict[str, Any] = image.model_dump(mode="json")
    data["file"] = image.file_name
    return data


@catalog.command("list")
@json_option
@common_options
@pass_app
def list_(app: AppContext, as_json: bool) -> None:
    """List every board and image in the catalog in use.

    \b
    Examples:
      fwman catalog list
      fwman catalog list --json | jq '.boards[].images[] | select(.status=="current")'
    """
    from fwman.firmware.catalog.load import load_catalog

    cat = load_catalog(app.host)
    if as_json:
        app.emit_json(
            "catalog-list",
            {
                "catalog": cat.summary(),
                "boards": [
                    {
                        "key": b.key,
                        "subsystem": b.subsystem,
                        "name": b.board.name,
                        "maker": b.board.maker,
                        "local_entry": cat.local_files.get(b.key),
                        "images": [_image_json(i) for i in b.images_newest_first()],
                    }
                    for b in sorted(cat.boards, key=lambda b: b.key)
                ],
            },
        )
        return
    app.echo(app.style(cat.describe(), dim=True))
    for note in cat.notes:
        app.echo(app.style(f"note: {note}", dim=True))
    rows = []
    for entry in cat.entries():
        image = entry.image
        rows.append(
            [
                entry.board.subsystem,
                entry.board.board.name + (" (local entry)" if entry.local else ""),
                image.version,
                _status_text(app, image.status.value),
                {True: "yes", False: "no", None: "?"}[image.rebar],
                "sha256" if image.sha256 else ("md5" if image.md5 else "-"),
            ]
        )
    app.table(["SUBSYSTEM", "BOARD", "VERSION", "STATUS", "REBAR", "HASH"], rows)


@catalog.command("show")
@click.argument("board")
@json_option
@common_options
@pass_app
def show(app: AppContext, board: str, as_json: bool) -> None:
    """Show one board: what it is, every image with its status, reason, hashes and sources.

    BOARD is a subsystem ID (3842:3987) or all four PCI IDs (10de:2204:3842:3987).

    \b
    Examples:
      fwman catalog show 3842:3987
      fwman catalog show 10de:2204:3842:3982 --json
    """
    from fwman.firmware.catalog.load import load_catalog

    cat = load_catalog(app.host)
    b = cat.find_board(board)
    entries = cat.board_entries(b)
    if as_json:
        images = []
        for e in entries:
            data = _image_json(e.image)
            data["local_override"] = e.override.model_dump(mode="json") if e.override else None
            images.append(data)
        recommended = b.recommended()
        app.emit_json(
            "catalog-board",
            {
                "catalog": cat.summary(),
                "key": b.key,
                "subsystem": b.subsystem,
                "pci": b.pci.model_dump(),
                "board": b.board.model_dump(mode="json"),
                "local_entry": cat.local_files.get(b.key),
                "recommended": recommended.version if recommended else None,
                "images": images,
            },
        )
        return
    info = b.board
    app.echo(app.style(f"{info.name}  ({b.key})", bold=True))
    local = cat.local_files.get(b.key)
    facts = [
        ("from", f"local entry {local} (this host only, unsigned)" if local else cat.describe()),
        ("maker", info.maker),
        ("part numbers", ", ".join(info.part_numbers) or "unknown"),
        ("board IDs", ", ".join(info.board_ids) or "unknown"),
        ("dual firmware", {True: "yes (switch)", False: "no", None: "unknown"}[info.dual_firmware_switch]),
        ("sources", "\n                ".join(info.sources) or ("none" if not local else "the [local] table")),
    ]
    for k, v in facts:
        app.echo(f"  {k:<14}{v}")
    if info.notes:
        app.echo(click.wrap_text(info.notes, width=100, initial_indent="  ", subsequent_indent="  "))
    recommended = b.recommended()
    for e in entries:
        i, o = e.image, e.override
        mark = "  <- recommended" if recommended and i.version == recommended.version else ""
        app.echo("")
        app.echo(f"  {app.style(i.version, bold=True)}  {_status_text(app, i.status.value)}{mark}")
        lines = [
            ("reason", i.status_reason),
            ("status date", i.status_date),
            ("released", i.release_date or "unknown"),
            ("superseded by", i.superseded_by),
            ("rebar", {True: "yes", False: "no", None: "unknown"}[i.rebar]),
            ("max BAR1", f"{i.max_bar1_bytes // 1024**2} MiB" if i.max_bar1_bytes else "unknown"),
            ("power limit", f"{i.power_limit_w:g} W (default)" if i.power_limit_w else "unknown"),
            ("min driver", i.min_driver),
            ("MD5", i.md5 or ("unknown" if not o else f"unknown in catalog; local: {o.md5} ({o.source})")),
            ("SHA-256", i.sha256 or "unknown"),
            ("size", f"{i.size} bytes" if i.size else "unknown"),
            ("URLs", ", ".join(i.urls) or "unknown"),
            ("notes", i.notes),
            ("sources", "\n                  ".join(i.sources) or ("none" if not local else "")),
        ]
        for k, v in lines:
            if v:
                app.echo(f"    {k:<14}{v}")


@catalog.command("lint")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Catalog directory to check (default: the catalog bundled with fwman, plus this host's local entries).",
)
@click.option(
    "--local", "local_only", is_flag=True, help="Check only this host's local entries (/etc/fwman/catalog.d)."
)
@json_option
@common_options
@pass_app
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
    from fwman.firmware.catalog.lint import lint_directory, lint_signature
    from fwman.firmware.catalog.load import BUNDLED_CATALOG
    from fwman.firmware.catalog.local import LOCAL_DIR
    from fwman.firmware.catalog.signing import admin_keys, root_keys
    from fwman.firmware.ops.local_entry import lint_local_entries

    if local_only and directory is not None:
        raise UsageError("--local and --dir cannot be combined")
    checked = LOCAL_DIR if local_only else str(directory or BUNDLED_CATALOG)
    issues = [] if local_only else lint_directory(directory or BUNDLED_CATALOG)
    if directory is None:
        issues.extend(lint_local_entries(app.host))
    directory = directory or BUNDLED_CATALOG
    key = None
    signature: dict[str, Any] | None = None  # --local: local entries are not signed, nothing was checked
    if not local_only:
        trust = lint_signature(directory, root_keys(app.host), admin_keys(app.host))
        key = trust.key
        issues += trust.issues
        signature = {
            "checked": key is not None or bool(trust.issues),  # neither: no index.json, nothing signed to check
            "good": key is not None,
            "key_id": key.key_id if key is not None else None,
            "origin": key.origin if key is not None else None,
            "keys_document": None
            if trust.keys is None
            else {
                "serial": trust.keys.serial,
                "expires": trust.keys.expires,
                "root_key_id": trust.root.key_id if trust.root is not None else None,
                "catalog_keys": [k.key_id for k in trust.keys.keys],
                "retired": [r.key_id for r in trust.keys.retired],
            },
        }
        if trust.keys is not None and trust.root is not None and not as_json:
            app.echo(
                app.style(
                    f"keys document: good, serial {trust.keys.serial}, root key {trust.root.key_id}, "
                    f"expires {trust.keys.expires}",
                    dim=True,
                )
            )
    if key is not None and not as_json:
        app.echo(app.style(f"signature: good, key {key.key_id} ({key.origin})", dim=True))
    errors = [i for i in issues if i.level == "error"]
    if as_json:
        app.emit_json(
            "catalog-lint",
            {
                "directory": checked,
                "ok": not errors,
                "signature": signature,
                "issues": [i.model_dump() for i in issues],
            },
        )
    else:
        for i in issues:
            where = f" {i.where}:" if i.where else ""
            label = app.style(i.level, fg="red" if i.level == "error" else "yellow")
            app.echo(f"{i.file}:{where} {label}: {i.message}")
        if not issues:
            app.echo(f"{checked}: clean")
    if errors:
        raise VerificationError(
            f"catalog lint: {len(errors)} error(s) in {checked}", hint="fix them; see docs/catalog-format.md"
        )


@catalog.command("sign")
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Ed25519 private key (PEM). Keep it outside the repository.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Catalog directory to sign (default: the catalog bundled with fwman, i.e. the source tree's catalog/).",
)
@click.option("--serial", type=click.IntRange(min=1), help="Serial number (default: the current one plus 1).")
@click.option("--date", "date", help="Index date YYYY-MM-DD (default: today, UTC).")
@click.option(
    "--expires",
    help="When the index stops being trusted: YYYY-MM-DD (00:00 UTC) or YYYY-MM-DDTHH:MM:SSZ "
    "(default: 365 days after --date).",
)
@common_options
@pass_app
def sign(
    app: AppContext, key_file: Path, directory: Path | None, serial: int | None, date: str | None, expires: str | None
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
    """
    from fwman.cli.catalog_keys import metadata_time
    from fwman.core.names import iso_date
    from fwman.core.signing import load_private_key
    from fwman.firmware.catalog.load import BUNDLED_CATALOG
    from fwman.firmware.catalog.publish import sign_directory
    from fwman.firmware.catalog.schema import INDEX_NAME, parse_index
    from fwman.host.live import LiveHost
    from fwman.host.userfiles import read_user_file, user_path

    directory = Path(user_path(str(directory or BUNDLED_CATALOG)))
    stamp = iso_date(date) if date is not None else clock.now_utc().strftime("%Y-%m-%d")
    until = metadata_time(expires, "--expires") if expires is not None else None
    key = load_private_key(read_user_file(str(key_file)), str(key_file))
    # the maintainer's working tree is on this machine, not under --root
    index_bytes = sign_directory(LiveHost("/"), directory, key, stamp, serial, until)
    index = parse_index(index_bytes)
    app.echo(
        f"signed {directory}/{INDEX_NAME}: serial {index.serial}, {index.date}, {len(index.files)} file(s), "
        f"expires {index.expires}"
    )


@catalog.command("update")
@click.option("--url", help="Where the catalog is published (the directory holding index.json).")
@timeout_option(30.0, "Seconds without data before a download attempt is given up.")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries per file.")
@json_option
@common_options
@pass_app
def update(app: AppContext, url: str | None, timeout: float, retries: int, as_json: bool) -> None:
    """Download a newer catalog, verify it completely, then install it atomically.

    The publisher's keys.json must be signed by a root key (bundled in fwman/keys/, or
    /etc/fwman/root-keys.d/), not expired and not older than the installed one: a new one rotates the catalog
    keys. index.json must be signed by a catalog key it names and that is valid now (or a key in
    /etc/fwman/keys.d/); a retired key is refused. The index must not have expired, nor be older than the
    installed one (rollback); every file must match its SHA-256 in the signed index. Only then does
    /var/lib/fwman/catalog switch to the new copy. Without --url, the URL in /etc/fwman/catalog-url is used.
    The model: docs/signing.md.

    \b
    Examples:
      fwman catalog update --url https://example.org/fwman-catalog/
      fwman catalog update            # URL from /etc/fwman/catalog-url
    """
    from fwman.firmware.catalog.update import configured_url, update_catalog
    from fwman.host.http import HttpOptions

    app.require_change("fwman catalog update")
    url = url or configured_url(app.host)
    if url.startswith("http://") and not as_json:
        app.echo("note: plain http: the signature and hashes are what protect this download", err=True)
    options = HttpOptions(read_timeout=timeout, connect_timeout=min(timeout, 10.0), retries=retries)
    result = update_catalog(app.host, url, options=options)
    if as_json:
        app.emit_json(
            "catalog-update",
            {
                "url": result.url,
                "installed": result.installed,
                "serial": result.serial,
                "previous_serial": result.previous_serial,
                "date": result.date,
                "files": result.files,
                "key_id": result.key.key_id,
                "location": result.location,
                "expires": result.expires,
                "keys_serial": result.keys_serial,
                "keys_root_key_id": result.keys_root,
                "keys_installed": result.keys_installed,
            },
        )
        return
    keys = ""
    if result.keys_serial is not None:
        root = f", root key {result.keys_root}" if result.keys_root else ""
        new = " (new)" if result.keys_installed else ""
        keys = f"\n  keys document: serial {result.keys_serial}{new}{root}"
    if not result.installed:
        app.echo(f"catalog already up to date (serial {result.serial}, {result.date}){keys}")
        return
    app.echo(
        f"installed catalog serial {result.serial} ({result.date}, {result.files} file(s)) from {result.url}\n"
        f"  signature: key {result.key.key_id} ({result.key.origin}){keys}\n"
        f"  expires {result.expires}; replaces serial {result.previous_serial}; now at {result.location}"
    )


def _register_local() -> None:
    # kept in its own module; registered here so the command table (fwman/cli/app.py) stays unchanged
    from fwman.cli.catalog_local import add_local
    from fwman.cli.catalog_propose import propose

    catalog.add_command(add_local)
    catalog.add_command(propose)


_register_local()


def _register_keys() -> None:
    # `catalog keys show|sign`: kept in its own module, like add-local
    from fwman.cli.catalog_keys import keys

    catalog.add_command(keys)


_register_keys()
