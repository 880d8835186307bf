"""``fwman catalog update``: download a signed catalog, verify it completely, then switch to it atomically.

Order (nothing on the host changes until every check passed; docs/signing.md has the model):

1. download ``index.json`` and ``index.json.sig``;
2. unless the index is signed by a key the administrator trusts directly (``/etc/fwman/keys.d``), download
   ``keys.json`` and ``keys.json.sig``: the signature must be a root key's, the document must not have expired,
   and its serial must not be lower than the installed keys document's (the same serial only byte-identical):
   this is how a catalog key is rotated without a package update. A publisher without a keys document: the
   installed one (bundled or from an earlier update) decides;
3. the index signature must verify with a catalog key the keys document names and that is valid now (or a
   ``keys.d`` key); a retired key id is refused with its retirement, a key outside its window with the window;
4. the index must carry an expiry that has not passed (an index without one is refused), and a serial not lower
   than the one installed (rollback to an older catalog, e.g. one that still recommends a withdrawn image);
   the same serial is "already up to date" only if the index is byte-identical;
5. download every listed file, check its size and SHA-256 against the signed index and lint it;
6. write the new copy (with its keys document) to ``/var/lib/fwman/catalogs/<serial>/`` and repoint the link
   ``/var/lib/fwman/catalog`` at it (one atomic rename: readers see the old or the new catalog, never a mix).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from fwman.core import clock, paths
from fwman.core.errors import MissingError, UsageError, VerificationError
from fwman.core.jsonout import OMIT, meta
from fwman.core.resources import is_data_file, read_data
from fwman.core.signing import TrustedKey, signature_key_id
from fwman.firmware.catalog.lint import lint_board_bytes
from fwman.firmware.catalog.load import BUNDLED_CATALOG, InstalledKeys, installed_keys
from fwman.firmware.catalog.schema import INDEX_NAME, MAX_BOARD_FILE, SIG_NAME, CatalogIndex, parse_index
from fwman.firmware.catalog.signing import (
    KEYS_NAME,
    KEYS_SIG_NAME,
    MAX_KEYS_FILE,
    KeysDocument,
    admin_keys,
    root_keys,
    verify_catalog_index,
    verify_keys_document,
)
from fwman.firmware.catalog.tree import CatalogTree, bundled_tree, user_tree
from fwman.host.base import Host
from fwman.host.http import DownloadError, HttpOptions, Progress, http_get
from fwman.host.userfiles import is_user_dir

MAX_INDEX = 1024 * 1024
MAX_SIG = 16 * 1024


@dataclass
class UpdateResult:
    """What ``update_catalog`` did.

    The fields are in the order of the ``fwman.catalog-update/1`` payload, which is their encoding
    (:func:`fwman.core.jsonout.fields_of`).
    """

    url: str
    installed: bool  # False: already up to date
    serial: int
    previous_serial: int
    date: str
    files: int
    key: TrustedKey = field(metadata=meta(key="key_id", via=lambda k: k.key_id))  # the key that signed the index
    location: str
    expires: str = ""
    #: the keys document the index was checked against (None: signed by a keys.d key, none was needed)
    keys_serial: int | None = None
    #: the root key that signed a keys document downloaded in this run (None: none downloaded)
    keys_root: str | None = field(default=None, metadata=meta(key="keys_root_key_id"))
    #: a keys document newer than the installed one was installed
    keys_installed: bool = False
    #: the publisher served no keys document: the installed one (in force, not expired) was the one consulted
    keys_fallback: bool = field(default=False, metadata=OMIT)


def base_url(url: str) -> str:
    """Return the catalog's base URL (``.../index.json`` and a trailing slash are accepted)."""
    url = url.strip()
    if not url.startswith(("https://", "http://")):
        raise UsageError(f"{url}: the catalog URL must be http(s)")
    return url.removesuffix(INDEX_NAME).rstrip("/")


def configured_url(host: Host) -> str | None:
    """Return the URL in ``/etc/fwman/catalog-url``, or None when none is configured (then the catalog bundled
    with fwman is the source: docs/catalog.md)."""
    try:
        if host.exists(paths.CATALOG_URL_FILE):
            line = host.read_text(paths.CATALOG_URL_FILE).strip().splitlines()
            if line and line[0].strip():
                return line[0].strip()
    except MissingError:  # unreadable, or a snapshot that did not record it: same answer as "none"
        pass
    return None


def _installed_index(host: Host, bundled: Path) -> tuple[int, bytes | None]:
    """Return (highest installed serial, the index bytes that carry it)."""
    best: tuple[int, bytes | None] = (0, None)
    local = f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}"
    try:
        if host.exists(local):
            data = host.read_bytes(local)
            best = (parse_index(data, paths.LOCAL_CATALOG_DIR).serial, data)
    except MissingError:  # not recorded on a snapshot: nothing installed there
        pass
    if is_data_file(bundled / INDEX_NAME):
        data = read_data(bundled / INDEX_NAME)
        best = max(best, (parse_index(data, str(bundled)).serial, data), key=lambda b: b[0])
    return best


#: reads one file of a catalog source: (path relative to the catalog, size cap) -> bytes; raises DownloadError
Fetch = Callable[[str, int], bytes]


def http_source(host: Host, url: str, options: HttpOptions) -> tuple[str, Fetch]:
    """Return (base URL, reader) for a catalog published over http(s) at ``url``. Raises UsageError."""
    base = base_url(url)

    def fetch(rel: str, cap: int) -> bytes:
        return http_get(host, f"{base}/{rel}", cap=cap, options=options)

    return base, fetch


def tree_source(tree: CatalogTree) -> tuple[str, Fetch]:
    """Return (its path, reader) for a catalog directory: the one bundled with fwman, or one the user names
    (a git checkout of the maintainers' catalog). A file it lacks reads as a DownloadError, as over http."""

    def fetch(rel: str, cap: int) -> bytes:
        try:
            data = tree.read(rel, cap + 1)
        except MissingError as e:
            raise DownloadError(e.message) from e
        if len(data) > cap:
            raise DownloadError(f"{tree / rel}: larger than {cap} bytes")
        return data

    return str(tree.path), fetch


#: what ``catalog update`` reads without --url and without /etc/fwman/catalog-url
DEFAULT_SOURCE = "the catalog bundled with fwman"


def catalog_source(url: str | None, host: Host, options: HttpOptions) -> tuple[str, Fetch]:
    """Return (where, reader) of the catalog ``catalog update`` reads: ``url`` when it is http(s), a directory
    the user names when it is one (or ``file://DIR``: a git checkout of the maintainers' catalog), else the
    catalog bundled with fwman (the documented default: nothing to configure). Raises UsageError for anything
    else."""
    if url is None:
        return tree_source(bundled_tree(BUNDLED_CATALOG))
    if url.startswith(("https://", "http://")):
        return http_source(host, url, options)
    path = url.removeprefix("file://")
    if is_user_dir(path):
        return tree_source(user_tree(path))
    raise UsageError(
        f"{url}: not an http(s) URL nor a catalog directory",
        hint="give the URL or the directory holding index.json (e.g. the catalog/ of a git checkout)",
    )


def update_catalog(
    host: Host,
    url: str,
    *,
    options: HttpOptions | None = None,
    bundled: Path | None = None,
    progress: Progress | None = None,
    source: tuple[str, Fetch] | None = None,
) -> UpdateResult:
    """Install the catalog published at ``url`` on ``host`` after verifying it; see the module docstring.

    ``source`` (a :func:`tree_source`: a catalog directory) replaces the download from ``url``; every check is
    the same. Raises VerificationError (bad, unknown, retired or expired key; a keys document not signed by a
    root; expired or rolled-back metadata; file hash mismatch; invalid board file), DownloadError (network, a
    missing file), UsageError (bad URL). On any error the installed catalog is untouched.
    """
    options = options or HttpOptions()
    bundled = bundled or BUNDLED_CATALOG
    base, fetch = source or http_source(host, url, options)
    now = clock.now_utc()
    index_bytes = fetch(INDEX_NAME, MAX_INDEX)
    sig_bytes = fetch(SIG_NAME, MAX_SIG)
    claimed = signature_key_id(sig_bytes, SIG_NAME)
    admin = admin_keys(host)
    current = installed_keys(host, bundled)
    doc, doc_origin = current.doc, current.origin
    new_keys: tuple[bytes, bytes] | None = None
    keys_root = None
    missing_keys: DownloadError | None = None
    if not any(k.key_id == claimed for k in admin):
        try:
            keys_bytes, keys_sig = fetch(KEYS_NAME, MAX_KEYS_FILE), fetch(KEYS_SIG_NAME, MAX_KEYS_FILE)
        except DownloadError as e:
            # a publisher without keys.json: the installed keys document still decides (it was verified), but
            # only while it is in force: an expired one is refused as it would be if the mirror served it
            missing_keys = e
            _require_current(base, current, e, now)
        else:
            new_doc, root = verify_keys_document(keys_bytes, keys_sig, root_keys(host), now, f"{base}/{KEYS_NAME}")
            _check_keys_serial(base, new_doc, keys_bytes, current)
            doc, doc_origin, keys_root = new_doc, f"{base}/{KEYS_NAME}, serial {new_doc.serial}", root.key_id
            if current.doc is None or new_doc.serial > current.doc.serial:
                new_keys = (keys_bytes, keys_sig)
    try:
        key = verify_catalog_index(index_bytes, sig_bytes, doc, admin, now, current.retired, doc_origin)
    except VerificationError as e:
        if missing_keys is None:
            raise
        raise VerificationError(
            e.message,
            hint=f"{e.hint + '; ' if e.hint else ''}the publisher's {KEYS_NAME} could not be read "
            f"({missing_keys.message}), so only the keys document installed here ({current.origin}) was consulted",
        ) from e
    index = parse_index(index_bytes, f"{base}/{INDEX_NAME}")
    _check_expiry(base, index, now)
    installed, installed_bytes = _installed_index(host, bundled)
    keys_serial = doc.serial if doc is not None else None

    def result(installed_now: bool, location: str, files: int, keys_recorded: bool) -> UpdateResult:
        return UpdateResult(
            base,
            installed_now,
            index.serial,
            installed,
            index.date,
            files,
            key,
            location,
            index.expires or "",
            keys_serial,
            keys_root,
            keys_recorded,
            missing_keys is not None,
        )

    if index.serial < installed:
        raise VerificationError(
            f"catalog at {base} has serial {index.serial}, older than the installed {installed}: rollback refused",
            hint="an older catalog may still recommend images that were withdrawn since; nothing was installed",
        )
    if index.serial == installed:
        if installed_bytes != index_bytes:
            raise VerificationError(
                f"catalog at {base} reuses serial {index.serial} with different content",
                hint="a publisher must raise the serial for every change; nothing was installed",
            )
        recorded = new_keys is not None and _installed_locally(host, index_bytes)
        if new_keys is not None and recorded:
            # the same catalog under a newer keys document: record the document, so it cannot be rolled back
            host.write_bytes(f"{paths.LOCAL_CATALOG_DIR}/{KEYS_SIG_NAME}", new_keys[1])
            host.write_bytes(f"{paths.LOCAL_CATALOG_DIR}/{KEYS_NAME}", new_keys[0])
        return result(False, paths.LOCAL_CATALOG_DIR, len(index.files), recorded)
    files = _download_files(fetch, base, index, progress)
    keys_pair = new_keys or current.local_pair  # carry the installed keys document forward with the catalog
    location = _install(host, index, index_bytes, sig_bytes, files, keys_pair)
    return result(True, location, len(files), new_keys is not None)


def _installed_locally(host: Host, index_bytes: bytes) -> bool:
    """Return True when the local catalog copy is the one whose index is ``index_bytes`` (not only the bundled)."""
    local = f"{paths.LOCAL_CATALOG_DIR}/{INDEX_NAME}"
    try:
        return host.exists(local) and host.read_bytes(local, limit=MAX_INDEX) == index_bytes
    except MissingError:
        return False


def _require_current(base: str, current: InstalledKeys, missing: DownloadError, now: datetime) -> None:
    """Raise VerificationError when the keys document installed here, the one a publisher without ``keys.json``
    is checked against, has expired (TUF's freeze-attack check fails closed: an older document is never the
    fallback). No installed document: the index is checked against the keys in /etc/fwman/keys.d alone."""
    doc = current.doc
    if doc is None or now < doc.expires_at:
        return
    raise VerificationError(
        f"{base}/{KEYS_NAME} could not be read ({missing.message}) and the keys document installed here "
        f"({current.origin}, serial {doc.serial}) expired on {doc.expires}: no catalog key is trusted, nothing "
        "was installed",
        hint="an expired keys document is never trusted, whether a mirror serves it or it is the one installed "
        "(a frozen mirror could go on serving keys retired since); the publisher must serve a current keys.json "
        "signed by a root key (`fwman catalog keys sign`); trusted without one: only the keys in "
        "/etc/fwman/keys.d/; if that date has not passed, check this machine's clock",
    )


def _check_keys_serial(base: str, new: KeysDocument, new_bytes: bytes, current: InstalledKeys) -> None:
    """Raise VerificationError when ``new`` would roll the installed keys document back (or reuse its serial)."""
    if current.doc is None:
        return
    if new.serial < current.doc.serial:
        raise VerificationError(
            f"{base}/{KEYS_NAME} has serial {new.serial}, older than the installed keys document's "
            f"{current.doc.serial}: rollback refused",
            hint="an older keys document may still name a key retired since; nothing was installed",
        )
    if new.serial == current.doc.serial and new_bytes != current.data:
        raise VerificationError(
            f"{base}/{KEYS_NAME} reuses serial {new.serial} with different content",
            hint="a publisher must raise the keys document's serial for every change; nothing was installed",
        )


def _check_expiry(base: str, index: CatalogIndex, now: datetime) -> None:
    """Raise VerificationError when ``index`` has no expiry or has expired (TUF's freeze-attack check)."""
    expires = index.expires_at
    if expires is None:
        raise VerificationError(
            f"{base}/{INDEX_NAME}: the index (serial {index.serial}) has no expiry (index version 1)",
            hint="the publisher must re-sign it with a current fwman (`fwman catalog sign` writes an expiry)",
        )
    if now >= expires:
        raise VerificationError(
            f"{base}/{INDEX_NAME}: the index (serial {index.serial}) expired on {index.expires}",
            hint="a mirror may be serving an old catalog; the publisher must sign a new one "
            "(`fwman catalog sign`); if that date has not passed, check this machine's clock",
        )


def _download_files(fetch: Fetch, base: str, index: CatalogIndex, progress: Progress | None) -> dict[str, bytes]:
    """Return every file ``index`` lists, read through ``fetch``, by path. Raises VerificationError when one does not
    match the signed index or does not lint, DownloadError when one cannot be read."""
    files: dict[str, bytes] = {}
    total, done = sum(f.size for f in index.files), 0
    for item in index.files:
        data = fetch(item.path, min(item.size, MAX_BOARD_FILE))
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


def _install(
    host: Host,
    index: CatalogIndex,
    index_bytes: bytes,
    sig_bytes: bytes,
    files: dict[str, bytes],
    keys_pair: tuple[bytes, bytes] | None,
) -> str:
    target = f"{paths.CATALOGS_DIR}/{index.serial}"
    host.mkdir(f"{target}/boards")
    for rel, data in files.items():
        host.write_bytes(f"{target}/{rel}", data)
    if keys_pair is not None:
        host.write_bytes(f"{target}/{KEYS_SIG_NAME}", keys_pair[1])
        host.write_bytes(f"{target}/{KEYS_NAME}", keys_pair[0])
    host.write_bytes(f"{target}/{SIG_NAME}", sig_bytes)
    host.write_bytes(f"{target}/{INDEX_NAME}", index_bytes)  # last: a copy without its index is never read
    if host.exists(paths.LOCAL_CATALOG_DIR) and not host.is_link(paths.LOCAL_CATALOG_DIR):
        # a directory put there by hand: keep it, out of the way
        host.rename(paths.LOCAL_CATALOG_DIR, f"{paths.LOCAL_CATALOG_DIR}.before-{index.serial}")
    host.symlink(f"catalogs/{index.serial}", paths.LOCAL_CATALOG_DIR)
    return target
