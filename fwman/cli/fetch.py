"""``fwman fetch``: download or import a catalog image into the verified cache."""

from __future__ import annotations

from collections.abc import Callable

import click

from fwman.cli.context import AppContext, common_options, json_option, pass_app, timeout_option
from fwman.core.errors import UsageError
from fwman.core.termtext import visible
from fwman.host.userfiles import user_path


def _progress(app: AppContext, label: str) -> Callable[[int, int | None], None] | None:
    """Return a progress callback drawing one self-rewriting line on stderr (a terminal only), else None."""
    if not app.env.stderr_isatty:
        return None
    stream = app.env.stderr
    label = visible(label)  # a file name the user gave, or a catalog label: shown, never obeyed

    def draw(done: int, total: int | None) -> None:
        if total:
            width = 30
            filled = min(width, done * width // total)
            bar = "#" * filled + "-" * (width - filled)
            line = f"\r{label} [{bar}] {done // 1024:>6} / {total // 1024} KiB" + ("\n" if done >= total else "")
        else:
            line = f"\r{label} {done // 1024:>6} KiB"
        try:
            stream.write(line)
            stream.flush()
        except (OSError, ValueError):  # the terminal went away: the download goes on, unseen
            pass

    return draw


@click.command("fetch")
@click.argument("image_ref", metavar="BOARD/VERSION")
@click.option(
    "--from",
    "from_file",
    type=click.Path(dir_okay=False),
    help="Import an image you downloaded by hand (vendor sites often need a browser) instead of downloading.",
)
@click.option("--url", "urls", multiple=True, help="Download from this URL instead of the catalog's (repeatable).")
@click.option(
    "--expect-md5",
    metavar="HEX",
    help="The vendor-published MD5, for an image the catalog lists as unverified; recorded on this host.",
)
@click.option("--md5-source", metavar="TEXT", help="Where the MD5 was published (URL or page), kept with it.")
@timeout_option(30.0, "Seconds without data before a download attempt is given up.")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries per URL.")
@json_option
@common_options
@pass_app
def fetch(
    app: AppContext,
    image_ref: str,
    from_file: str | None,
    urls: tuple[str, ...],
    expect_md5: str | None,
    md5_source: str | None,
    timeout: float,
    retries: int,
    as_json: bool,
) -> None:
    """Put a catalog image into /var/cache/fwman/images, checked before it lands there.

    BOARD is a subsystem ID (3842:3987) or the four PCI IDs; VERSION the VBIOS version. FILE is a file on
    this machine (also with --root). The size, MD5 and
    SHA-256 (whichever are known) and the ROM header (subsystem, version) are checked before the file is
    moved into the cache: a mismatch leaves nothing behind and exits with status 4. Downloads resume from a
    .part file after a cut. Withdrawn images are refused (status 3); an unverified image (no known hash) needs
    --expect-md5 with the MD5 the card maker publishes, which is then recorded in /var/lib/fwman/overrides.toml
    (never in the catalog).

    \b
    Examples:
      fwman fetch 3842:3987/94.02.42.80.27 --from ~/Downloads/3987_ReBAR.rom \\
          --expect-md5 <MD5 from EVGA's page> --md5-source "EVGA download page"
      fwman fetch 3842:3982/94.02.42.C0.05 --url https://mirror.example/img.rom --expect-md5 HEX
      fwman fetch 10de:2204:3842:3987/94.02.42.80.27 --json
    """
    from fwman.firmware.catalog.load import load_catalog
    from fwman.firmware.ops.fetch import fetch_image
    from fwman.host.http import HttpOptions

    app.require_change("fwman fetch")  # writes the image cache under /var/cache/fwman
    if from_file and urls:
        raise UsageError("--from and --url cannot be combined", hint="--from imports a file you already have")
    if md5_source and not expect_md5:
        raise UsageError("--md5-source needs --expect-md5")
    cat = load_catalog(app.host)
    entry = cat.entry(image_ref)
    path = user_path(from_file) if from_file else None
    options = HttpOptions(read_timeout=timeout, connect_timeout=min(timeout, 10.0), retries=retries)
    for url in urls:
        if url.startswith("http://") and not as_json:
            app.echo(f"note: {url} is plain http: only the hash check protects this download", err=True)
    result = fetch_image(
        app.host,
        entry,
        urls=urls,
        from_file=path,
        expect_md5=expect_md5,
        md5_source=md5_source,
        options=options,
        progress=_progress(app, f"downloading {entry.image.version}"),
    )
    if as_json:
        app.emit_json("fetch", result.to_json())
        return
    ok = app.style("ok", fg="green")
    head = "already in the cache" if result.cached_before else "fetched"
    app.echo(app.style(f"{head}: {entry.label} ({entry.board.board.name})", bold=True))
    rows = [
        ("from", result.source),
        ("size", f"{result.size:,} bytes"),
        ("MD5", f"{result.md5}  {ok}" if "md5" in _checked(result) else result.md5),
        ("SHA-256", f"{result.sha256}  {ok}" if "sha256" in _checked(result) else result.sha256),
        ("checked by", result.verified_by),
    ]
    for f in result.findings:
        if f.id in ("catalog.board", "rom.kind"):
            continue
        rows.append(("check", f"{f.severity.value}: {f.message}"))
    rows.append(("saved", result.path))
    if result.override_recorded:
        rows.append(("recorded", "vendor MD5 in /var/lib/fwman/overrides.toml (this host only, not the catalog)"))
    for k, v in rows:
        app.echo(f"  {k:<11}{v}")


def _checked(result: object) -> set[str]:
    """Return which hashes were compared with an expected value (md5, sha256)."""
    from fwman.firmware.ops.fetch import FetchResult

    assert isinstance(result, FetchResult)
    image = result.entry.image
    if result.verified_by in ("catalog", "local entry"):
        return {k for k, v in (("md5", image.md5), ("sha256", image.sha256)) if v}
    return {"md5"}
