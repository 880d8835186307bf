"""``fwman catalog update``: download a signed catalog, verify it completely, then switch to it atomically.

Order (nothing on the host changes until every check passed):

1. download ``index.json`` and ``index.json.sig``; verify the Ed25519 signature with a trusted key;
2. refuse a serial lower than the one installed (rollback to an older catalog, e.g. one that still recommends
   a withdrawn image); the same serial is "already up to date" only if the index is byte-identical;
3. download every listed file, check its size and SHA-256 against the signed index and lint it;
4. write the new copy to ``/var/lib/fwman/catalogs/<serial>/`` and repoint the link
   ``/var/lib/fwman/catalog`` at it (one atomic rename: readers see the old or the new catalog, never a mix).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fwman.core import paths
from fwman.core.errors import MissingError, UsageError, VerificationError
from fwman.core.resources import read_data
from fwman.firmware.catalog.lint import lint_board_bytes
from fwman.firmware.catalog.load import BUNDLED_CATALOG
from fwman.firmware.catalog.schema import INDEX_NAME, MAX_BOARD_FILE, SIG_NAME, CatalogIndex, parse_index
from fwman.firmware.catalog.signing import TrustedKey, trusted_keys, verify_index
from fwman.host.base import Host
from fwman.host.http import HttpOptions, Progress, http_get

#: a one-line file naming the default catalog URL (there is no built-in default: fwman invents no URL)
MAX_INDEX = 1024 * 1024
MAX_SIG = 16 * 1024


@dataclass
class UpdateResult:
    """What ``update_catalog`` did."""

    url: str
    serial: int
    date: str
    previous_serial: int
    files: int
    key: TrustedKey
    installed: bool  # False: already up to date
    location: str


def base_url(url: str) -> str:
    """Return the catalog's base URL (``.../index.json`` and a trailing slash are accepted)."""
    url = url.strip()
    if not url.startswith(("https://", "http://")):
        raise UsageError(f"{url}: the catalog URL must be http(s)")
    return url.removesuffix(INDEX_NAME).rstrip("/")


def configured_url(host: Host) -> str:
    """Return the URL in ``/etc/fwman/catalog-url``. Raises UsageError when none is configured."""
    try:
        if host.exists(paths.CATALOG_URL_FILE):
            line = host.read_text(paths.CATALOG_URL_FILE).strip().splitlines()
            if line and line[0].strip():
                return line[0].strip()
    except MissingError:  # unreadable, or a snapshot that did not record it: same answer as "none"
        pass
    raise UsageError(
        "no catalog URL configured",
        hint=f"pass --url URL (the directory holding index.json), or write it into {paths.CATALOG_URL_FILE}",
    )


def _installed_index(host: Host, bundled: Path) -> tuple[int, bytes | None]:
    """Return (highest installed serial, the index bytes that carry it)."""
    best: tuple[int, bytes | None] = (0, None)
    try:
        if host.exists(f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}"):
            data = host.read_bytes(f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}")
            best = (parse_index(data, paths.LOCAL_CATALOG_DIR).serial, data)
    except MissingError:  # not recorded on a snapshot: nothing installed there
        pass
    if (bundled / INDEX_NAME).is_file():
        data = read_data(bundled / INDEX_NAME)
        serial = parse_index(data, str(bundled)).serial
        if serial > best[0]:
            best = (serial, data)
    return best


def update_catalog(
    host: Host,
    url: str,
    *,
    options: HttpOptions | None = None,
    bundled: Path | None = None,
    progress: Progress | None = None,
) -> UpdateResult:
    """Install the catalog published at ``url`` on ``host`` after verifying it; see the module docstring.

    Raises VerificationError (bad or unknown signature, rollback, file hash mismatch, invalid board file),
    DownloadError (network), UsageError (bad URL). On any error the installed catalog is untouched.
    """
    options = options or HttpOptions()
    bundled = bundled or BUNDLED_CATALOG
    base = base_url(url)
    index_bytes = http_get(host, f"{base}/{INDEX_NAME}", cap=MAX_INDEX, options=options)
    sig_bytes = http_get(host, f"{base}/{SIG_NAME}", cap=MAX_SIG, options=options)
    key = verify_index(index_bytes, sig_bytes, trusted_keys(host))
    index = parse_index(index_bytes, f"{base}/{INDEX_NAME}")
    installed, installed_bytes = _installed_index(host, bundled)
    if index.serial < installed:
        raise VerificationError(
            f"catalog at {base} has serial {index.serial}, older than the installed {installed}: rollback refused",
            hint="an older catalog may still recommend images that were withdrawn since; nothing was installed",
        )
    if index.serial == installed:
        if installed_bytes == index_bytes:
            return UpdateResult(
                base, index.serial, index.date, installed, len(index.files), key, False, paths.LOCAL_CATALOG_DIR
            )
        raise VerificationError(
            f"catalog at {base} reuses serial {index.serial} with different content",
            hint="a publisher must raise the serial for every change; nothing was installed",
        )
    files = _download_files(host, base, index, options, progress)
    location = _install(host, index, index_bytes, sig_bytes, files)
    return UpdateResult(base, index.serial, index.date, installed, len(files), key, True, location)


def _download_files(
    host: Host, base: str, index: CatalogIndex, options: HttpOptions, progress: Progress | None
) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = sum(f.size for f in index.files)
    done = 0
    for item in index.files:
        data = http_get(host, f"{base}/{item.path}", cap=min(item.size, MAX_BOARD_FILE), options=options)
        if len(data) != item.size or hashlib.sha256(data).hexdigest() != item.sha256:
            raise VerificationError(
                f"{base}/{item.path}: SHA-256 does not match the signed index (the file was altered)",
                hint="nothing was installed; fetch the catalog again from its publisher",
            )
        errors = [i for i in lint_board_bytes(data, item.path) if i.level == "error"]
        if errors:
            e = errors[0]
            raise VerificationError(f"{base}/{item.path}: {e.where + ': ' if e.where else ''}{e.message}")
        files[item.path] = data
        done += len(data)
        if progress is not None:
            progress(done, total)
    return files


def _install(host: Host, index: CatalogIndex, index_bytes: bytes, sig_bytes: bytes, files: dict[str, bytes]) -> str:
    target = f"{paths.CATALOGS_DIR}/{index.serial}"
    host.mkdir(f"{target}/boards")
    for rel, data in files.items():
        host.write_bytes(f"{target}/{rel}", data)
    host.write_bytes(f"{target}/{SIG_NAME}", sig_bytes)
    host.write_bytes(f"{target}/{INDEX_NAME}", index_bytes)  # last: a copy without its index is never read
    if host.exists(paths.LOCAL_CATALOG_DIR) and not host.is_link(paths.LOCAL_CATALOG_DIR):
        # a directory put there by hand: keep it, out of the way
        host.rename(paths.LOCAL_CATALOG_DIR, f"{paths.LOCAL_CATALOG_DIR}.before-{index.serial}")
    host.symlink(f"catalogs/{index.serial}", paths.LOCAL_CATALOG_DIR)
    return target
