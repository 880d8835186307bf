"""``fwman fetch``: download or import a catalog image into the verified cache.

Options and rendering only: the use case is :func:`fwman.app.fetch.fetch`.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from fwman.cli.context import AppContext, leaf_options, timeout_option
from fwman.cli.vocabulary import renamed_option
from fwman.core.termtext import visible


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
    "--image",
    "from_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Import an image you downloaded by hand (vendor sites often need a browser) instead of downloading.",
)
@renamed_option("--from", "--image", "from_file", type=click.Path(dir_okay=False))
@click.option("--url", "urls", multiple=True, help="Download from this URL instead of the catalog's (repeatable).")
@click.option(
    "--expect-md5",
    metavar="HEX",
    help="The vendor-published MD5, for an image the catalog lists as unverified; recorded on this host.",
)
@click.option("--md5-source", metavar="TEXT", help="Where the MD5 was published (URL or page), kept with it.")
@timeout_option(30.0, "Seconds without data before a download attempt is given up.")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries per URL.")
@leaf_options
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
      fwman fetch 3842:3987/94.02.42.80.27 --image ~/Downloads/3987_ReBAR.rom \\
          --expect-md5 <MD5 from EVGA's page> --md5-source "EVGA download page"
      fwman fetch 3842:3982/94.02.42.C0.05 --url https://mirror.example/img.rom --expect-md5 HEX
      fwman fetch 10de:2204:3842:3987/94.02.42.80.27 --json
    """
    from fwman.app.fetch import fetch as fetch_image
    from fwman.cli.render import finish

    app.require_change("fwman fetch")  # writes the image cache under /var/cache/fwman
    result = fetch_image(
        app.host,
        image_ref,
        from_file=from_file,
        urls=urls,
        expect_md5=expect_md5,
        md5_source=md5_source,
        timeout=timeout,
        retries=retries,
        note=lambda text: None if as_json else app.echo(text, err=True),
        progress=lambda label: _progress(app, label),
    )
    finish(app, "fetch", result, as_json)
