"""Publishing the catalog: a new ``index.json`` for a catalog directory that lints clean, signed by a catalog key, and a
new ``keys.json`` (the catalog keys and the retired ones) signed by a root key.

Kept apart from :mod:`fwman.firmware.catalog.signing` (keys, signatures, verification) because publishing needs the lint
and lint needs signature verification: one direction each, no circle."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from fwman.core.clock import format_timestamp
from fwman.core.errors import UsageError, VerificationError
from fwman.core.signing import TrustedKey, key_id, raw_public, sign_document
from fwman.firmware.catalog.lint import lint_directory
from fwman.firmware.catalog.schema import (
    BOARDS_DIR,
    INDEX_NAME,
    CatalogIndex,
    IndexFile,
    first_error,
    parse_index,
    parse_timestamp,
)
from fwman.firmware.catalog.signing import KEYS_NAME, KeysDocument, RetiredKey, catalog_key_entry, parse_keys
from fwman.firmware.catalog.tree import CatalogTree, bundled_tree

#: how long a newly signed index stays valid unless ``--expires`` says otherwise (docs/signing.md)
INDEX_VALIDITY = timedelta(days=365)
#: how long a newly signed keys document stays valid, and a newly named catalog key, unless told otherwise
KEYS_VALIDITY = timedelta(days=365)


def default_expiry(date: str, validity: timedelta) -> str:
    """Return the expiry timestamp ``validity`` after the start (00:00 UTC) of ``date`` (YYYY-MM-DD)."""
    return format_timestamp(parse_timestamp(f"{date}T00:00:00Z") + validity)


def make_index(
    directory: Path | CatalogTree, date: str, serial: int | None = None, expires: str | None = None
) -> bytes:
    """Return the bytes of a new ``index.json`` (version 2) for the catalog in ``directory``.

    ``directory`` is a :class:`CatalogTree` (a bare Path: read as fwman's bundled data). Lists every
    ``boards/*.toml`` with its SHA-256 and size. ``serial`` defaults to the previous index's serial
    plus one (1 for a first index); a given serial must be higher than the previous one. ``expires``
    (``YYYY-MM-DDTHH:MM:SSZ``) defaults to :data:`INDEX_VALIDITY` after ``date``. Raises UsageError for a serial
    that does not grow or an expiry not after the date, VerificationError when a board file is invalid (a
    catalog that does not lint clean is never signed).
    """
    tree = bundled_tree(directory)
    previous = 0
    if tree.is_file(INDEX_NAME):
        previous = parse_index(tree.read(INDEX_NAME)).serial
    if serial is None:
        serial = previous + 1
    elif serial <= previous:
        raise UsageError(f"serial {serial} is not higher than the current index's {previous}")
    errors = [i for i in lint_directory(tree) if i.level == "error" and i.file != INDEX_NAME]
    if errors:
        first = errors[0]
        raise VerificationError(
            f"{first.file}: {first.where + ': ' if first.where else ''}{first.message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            hint="fix it (see `fwman catalog lint`) before signing",
        )
    files = []
    for name in tree.names(BOARDS_DIR, "*.toml"):
        data = tree.read(f"{BOARDS_DIR}/{name}")
        files.append(IndexFile(path=f"{BOARDS_DIR}/{name}", sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
    expires = expires or default_expiry(date, INDEX_VALIDITY)
    if parse_timestamp(expires) <= parse_timestamp(f"{date}T00:00:00Z"):
        raise UsageError(f"expiry {expires} is not after the index date {date}")
    return CatalogIndex(serial=serial, date=date, expires=expires, files=files).to_json()


def sign_directory(
    tree: CatalogTree, key: Ed25519PrivateKey, date: str, serial: int | None = None, expires: str | None = None
) -> tuple[bytes, bytes]:
    """Return a new ``index.json`` (:func:`make_index`) for catalog ``tree`` and its signature; nothing is written
    (the caller writes them, through the door the directory came from).

    When the directory has a keys document, ``key`` must be a catalog key it names, valid on ``date`` (otherwise
    no fwman would accept the signature). Raises as :func:`make_index`; UsageError for a key the keys document
    does not name, retired or outside its window.
    """
    if tree.is_file(KEYS_NAME):
        _check_catalog_key(parse_keys(tree.read(KEYS_NAME)), key_id(raw_public(key)), date)
    index_bytes = make_index(tree, date, serial, expires)
    return index_bytes, sign_document(index_bytes, key)


def _check_catalog_key(doc: KeysDocument, kid: str, date: str) -> None:
    """Raise UsageError unless key ``kid`` is a catalog key ``doc`` names and that is valid on ``date``."""
    fix = "name it first: `fwman catalog keys sign --key ROOT.pem --add PUB.pem` (docs/signing.md)"
    retired = doc.retired_key(kid)
    if retired is not None:
        raise UsageError(f"key {kid} was retired on {retired.retired} ({retired.reason}): it cannot sign", hint=fix)
    named = {k.key_id: k for k in doc.catalog_keys(KEYS_NAME)}
    if kid not in named:
        ids = ", ".join(sorted(named)) or "none"
        raise UsageError(f"key {kid} is not a catalog key of {KEYS_NAME} (catalog keys: {ids})", hint=fix)
    if not named[kid].valid_at(parse_timestamp(f"{date}T00:00:00Z")):
        raise UsageError(f"catalog key {kid} is not valid on {date} (see `fwman catalog keys show`)", hint=fix)


@dataclass(frozen=True)
class KeysChange:
    """What a maintainer asks of a new keys document (``fwman catalog keys sign``)."""

    date: str  # YYYY-MM-DD, the document's date
    add: tuple[TrustedKey, ...] = ()  # catalog keys to name (or to re-name with a new window)
    not_before: str | None = None  # window of the added keys (default: the date)
    not_after: str | None = None  # default: KEYS_VALIDITY after not_before
    note: str = ""  # published with the added keys (e.g. who holds the private half)
    retire: tuple[str, ...] = ()  # key ids to retire (removed from the named keys)
    drop: tuple[str, ...] = ()  # key ids to stop naming, without retiring them (e.g. the root as catalog key)
    reason: str = ""  # why they were retired (required with retire)
    expires: str | None = None  # the document's expiry (default: KEYS_VALIDITY after the date)
    serial: int | None = None  # default: the previous serial plus one


def make_keys_document(previous: KeysDocument | None, change: KeysChange) -> KeysDocument:
    """Return the keys document ``change`` makes of ``previous`` (None: the first one).

    Raises UsageError: no catalog key would be left, a retirement without a reason, a retired key named again,
    a dropped key that is not named,
    a serial that does not grow, an expiry not after the date or an empty validity window.
    """
    prev_serial = previous.serial if previous is not None else 0
    serial = change.serial if change.serial is not None else prev_serial + 1
    if serial <= prev_serial:
        raise UsageError(f"serial {serial} is not higher than the current keys document's {prev_serial}")
    if change.retire and not change.reason.strip():
        raise UsageError("--retire needs --reason (it is published with the retired key id)")
    keys = {k.key_id: k for k in (previous.keys if previous is not None else [])}
    retired = {r.key_id: r for r in (previous.retired if previous is not None else [])}
    start = parse_timestamp(change.not_before) if change.not_before else parse_timestamp(f"{change.date}T00:00:00Z")
    end = parse_timestamp(change.not_after) if change.not_after else start + KEYS_VALIDITY
    for pub in change.add:
        if pub.key_id in retired or pub.key_id in change.retire:
            raise UsageError(f"key {pub.key_id} is retired: a retired key is never named again")
        try:
            keys[pub.key_id] = catalog_key_entry(pub, start, end, change.note.strip())
        except VerificationError as e:
            raise UsageError(f"--not-before/--not-after: {e.message}") from e
    for kid in change.drop:
        if kid not in keys:
            raise UsageError(f"--drop {kid}: the keys document does not name that key")
        del keys[kid]
    for kid in change.retire:
        keys.pop(kid, None)
        retired[kid] = RetiredKey(key_id=kid, retired=change.date, reason=change.reason.strip())
    if not keys:
        raise UsageError("the keys document would name no catalog key", hint="add one with --add PUB.pem")
    expires = change.expires or default_expiry(change.date, KEYS_VALIDITY)
    if parse_timestamp(expires) <= parse_timestamp(f"{change.date}T00:00:00Z"):
        raise UsageError(f"expiry {expires} is not after the date {change.date}")
    try:
        return KeysDocument(
            serial=serial,
            date=change.date,
            expires=expires,
            keys=sorted(keys.values(), key=lambda k: k.key_id),
            retired=sorted(retired.values(), key=lambda r: r.key_id),
        )
    except ValidationError as e:
        raise UsageError(f"{KEYS_NAME}: {first_error(e)}") from e


def sign_keys_directory(
    tree: CatalogTree, root: Ed25519PrivateKey, roots: list[TrustedKey], change: KeysChange
) -> tuple[KeysDocument, bytes, bytes]:
    """Return a new keys document (:func:`make_keys_document` over the current ``keys.json`` of ``tree``), its
    bytes and its signature (``keys.json.sig``); nothing is written (the caller writes them).

    ``root`` must be one of ``roots`` (the root keys fwman trusts), or nothing would accept the document.
    Raises UsageError for a key that is not a root key and as :func:`make_keys_document`; VerificationError
    when the current ``keys.json`` is malformed.
    """
    kid = key_id(raw_public(root))
    if not any(k.key_id == kid for k in roots):
        ids = ", ".join(sorted({k.key_id for k in roots})) or "none"
        raise UsageError(
            f"key {kid} is not a root key (root keys: {ids})",
            hint="a keys document is signed with a root key; a catalog key signs only index.json (`catalog sign`)",
        )
    previous = parse_keys(tree.read(KEYS_NAME)) if tree.is_file(KEYS_NAME) else None
    doc = make_keys_document(previous, change)
    data = doc.to_json()
    return doc, data, sign_document(data, root)
