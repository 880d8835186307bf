"""``fwman fetch``: the use case (a catalog image downloaded or imported into the verified cache), whose result
owns its JSON shape (``fwman.fetch/2``) and the facts the CLI prints."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fwman.app.text import Out, Result, Span, line, say
from fwman.core.errors import UsageError
from fwman.firmware.catalog.load import load_catalog
from fwman.firmware.ops.fetch import FetchResult, fetch_image
from fwman.host.base import Host
from fwman.host.http import HttpOptions, Progress
from fwman.host.userfiles import user_path


@dataclass
class Fetched(Result):
    """What ``fetch`` put in the cache (the firmware's FetchResult) and the facts people are shown of it."""

    result: FetchResult

    def to_json(self) -> dict[str, object]:
        """Return the payload of ``fwman.fetch/2``."""
        return self.result.to_json()

    def text(self, verbose: int = 0) -> Out:
        """Return the headline (bold), then one line per row: label, value (``ok`` in green after each hash
        that was checked)."""
        out: Out = [say(self.headline, "bold")]
        for label, value, checked in self.rows():
            out.append(line(f"  {label:<11}{value}", *(("  ", Span("ok", "green")) if checked else ())))
        return out

    @property
    def headline(self) -> str:
        """Return the first line: fetched, or already in the cache, and which image of which board."""
        r = self.result
        head = "already in the cache" if r.cached_before else "fetched"
        return f"{head}: {r.entry.label} ({r.entry.board.board.name})"

    def checked(self) -> set[str]:
        """Return which hashes were compared with an expected value (md5, sha256)."""
        image = self.result.entry.image
        if self.result.signed is not None:
            return set()  # the signature was checked; the image's hashes are recorded, not compared
        if self.result.verified_by in ("catalog", "local entry"):
            return {k for k, v in (("md5", image.md5), ("sha256", image.sha256)) if v}
        return {"md5"}

    def rows(self) -> list[tuple[str, str, bool]]:
        """Return (label, value, checked) rows: source, size, hashes (checked: compared with an expected value),
        findings, file."""
        r, checked = self.result, self.checked()
        rows = [
            ("from", r.source, False),
            ("size", f"{r.size:,} bytes", False),
            ("MD5", r.md5, "md5" in checked),
            ("SHA-256", r.sha256, "sha256" in checked),
            ("checked by", r.verified_by, False),
        ]
        if r.signed is not None:
            rows += [
                ("signed by", f"{r.signed.subject} (issuer {r.signed.issuer}, serial {r.signed.serial})", True),
                ("package", f"SHA-256 {r.signed.package_sha256}", False),
            ]
        rows += [("check", f"{f.severity.value}: {f.message}", False) for f in r.findings
                 if f.id not in ("catalog.board", "rom.kind")]  # fmt: skip
        rows.append(("saved", r.path, False))
        if r.override_recorded and r.signed is not None:
            rows.append(("recorded", "the image's MD5 and SHA-256, as extracted from a package signed by "
                         f"{r.signed.maker}, in /var/lib/fwman/overrides.toml (this host only)", False))  # fmt: skip
        elif r.override_recorded:
            rows.append(("recorded", "vendor MD5 in /var/lib/fwman/overrides.toml (this host only, not the catalog)",
                         False))  # fmt: skip
        return rows


def fetch(
    host: Host,
    image_ref: str,
    *,
    from_file: str | None = None,
    urls: tuple[str, ...] = (),
    expect_md5: str | None = None,
    md5_source: str | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    note: Callable[[str], None] = lambda text: None,
    progress: Callable[[str], Progress | None] = lambda label: None,
) -> Fetched:
    """Put catalog image ``image_ref`` (BOARD/VERSION) into the verified cache, from ``from_file`` (a file the
    user names), ``urls`` or the catalog's URLs; return what was stored.

    ``note`` is told of plain-http URLs, ``progress`` builds the download's progress callback from a label.
    Raises UsageError for a bad combination or an unknown image, BlockedError (withdrawn, no known hash),
    VerificationError (a hash or ROM header mismatch: nothing is left behind), MissingError.
    """
    if from_file and urls:
        raise UsageError("--image and --url cannot be combined", hint="--image imports a file you already have")
    if md5_source and not expect_md5:
        raise UsageError("--md5-source needs --expect-md5")
    entry = load_catalog(host).entry(image_ref)
    options = HttpOptions(read_timeout=timeout, connect_timeout=min(timeout, 10.0), retries=retries)
    for url in urls:
        if url.startswith("http://"):
            note(f"note: {url} is plain http: only the hash check protects this download")
    result = fetch_image(
        host,
        entry,
        urls=urls,
        from_file=user_path(from_file) if from_file else None,
        expect_md5=expect_md5,
        md5_source=md5_source,
        options=options,
        progress=progress(f"downloading {entry.image.version}"),
    )
    return Fetched(result)
