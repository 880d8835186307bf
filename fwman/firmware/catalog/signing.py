"""Signing and verifying the catalog: the root keys, the keys document, the index (Ed25519, via ``cryptography``).

Trust has two levels, after TUF's root and targets roles (docs/signing.md):

- **root keys** ship with fwman (``fwman/keys/*.pub``; an administrator may add more in
  ``/etc/fwman/root-keys.d/``). A root key signs only the **keys document** (``keys.json`` plus
  ``keys.json.sig``), which names the catalog signing keys with their validity (``not_before``/``not_after``),
  lists retired key ids, and carries a serial and an expiry of its own. A new keys document signed by a root is
  how a catalog key is rotated without a package update.
- **catalog keys** sign ``index.json`` (``index.json.sig``): a key the keys document names and that is valid
  now, or a key an administrator trusts directly on one host (``/etc/fwman/keys.d/*.pub``). A retired key id is
  refused wherever it comes from.

The signature format, keys and the Ed25519 operations themselves are :mod:`fwman.core.signing` (shared with module
bundles); this module is the catalog's trust policy over them."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fwman.core import paths
from fwman.core.clock import format_timestamp
from fwman.core.errors import VerificationError
from fwman.core.resources import bundled_keys, list_data, read_data
from fwman.core.signing import (
    TrustedKey,
    key_id,
    keys_in_directory,
    load_public_key,
    signature_key_id,
    verify_signature,
)
from fwman.firmware.catalog.schema import (
    SIG_NAME,
    check_iso_date,
    check_timestamp,
    check_with,
    first_error,
    parse_timestamp,
)
from fwman.host.base import Host

#: the root keys that ship with fwman (they sign the keys document, never an index)
BUNDLED_KEYS = bundled_keys()
KEYS_NAME = "keys.json"
KEYS_SIG_NAME = "keys.json.sig"
#: a keys document or its signature larger than this is not one (also the download cap in ``catalog update``)
MAX_KEYS_FILE = 64 * 1024
_KEY_ID = re.compile(r"^[0-9a-f]{16}$")
_RAW_HEX = re.compile(r"^[0-9a-f]{64}$")


def root_keys(host: Host, bundled: Path | None = None) -> list[TrustedKey]:
    """Return the root keys: the bundled ``fwman/keys/*.pub`` plus ``/etc/fwman/root-keys.d/*.pub`` on ``host``.

    Raises VerificationError when one of those files is not an Ed25519 public key.
    """
    bundled = bundled or BUNDLED_KEYS
    keys = [load_public_key(read_data(p), str(p)) for p in list_data(bundled, "*.pub")]
    return keys + keys_in_directory(host, paths.CATALOG_ROOT_KEYS_DIR)


def admin_keys(host: Host) -> list[TrustedKey]:
    """Return the catalog keys an administrator trusts directly on ``host`` (``/etc/fwman/keys.d/*.pub``).

    Raises VerificationError when one of those files is not an Ed25519 public key.
    """
    return keys_in_directory(host, paths.CATALOG_KEYS_DIR)


# -- the keys document -------------------------------------------------------------------------------------


class CatalogKey(BaseModel):
    """One catalog signing key the keys document names, with the window it may be used in."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str
    public_key: str  # hex of the raw 32-byte Ed25519 public key (TUF's ed25519 keyval form)
    not_before: str
    not_after: str
    note: str = ""

    _check_before = field_validator("not_before")(check_timestamp)
    _check_after = field_validator("not_after")(check_timestamp)

    @model_validator(mode="after")
    def _consistent(self) -> CatalogKey:
        if not _RAW_HEX.match(self.public_key):
            raise ValueError(f"key {self.key_id}: public_key must be 64 lower-case hex digits")
        if key_id(bytes.fromhex(self.public_key)) != self.key_id:
            raise ValueError(f"key {self.key_id}: key_id is not the id of public_key")
        if parse_timestamp(self.not_before) >= parse_timestamp(self.not_after):
            raise ValueError(f"key {self.key_id}: not_before must be earlier than not_after")
        return self


class RetiredKey(BaseModel):
    """A key id that must never be trusted again, with when and why it was retired."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key_id: str
    retired: str  # YYYY-MM-DD
    reason: str = Field(min_length=1)

    _id = field_validator("key_id")(check_with(_KEY_ID.match, "must be 16 lower-case hex digits", empty_ok=False))
    _check_retired = field_validator("retired")(check_iso_date)


class KeysDocument(BaseModel):
    """``keys.json``: the catalog signing keys, the retired key ids, a serial that only grows, an expiry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["fwman-catalog-keys"] = "fwman-catalog-keys"
    version: Literal[1] = 1
    serial: int = Field(ge=1)
    date: str
    expires: str
    keys: list[CatalogKey] = Field(min_length=1)
    retired: list[RetiredKey] = Field(default_factory=list)

    _check_expires = field_validator("expires")(check_timestamp)
    _check_date = field_validator("date")(check_iso_date)

    @model_validator(mode="after")
    def _ids(self) -> KeysDocument:
        named = [k.key_id for k in self.keys]
        retired = [r.key_id for r in self.retired]
        if len(named) != len(set(named)) or len(retired) != len(set(retired)):
            raise ValueError("a key id is listed twice")
        both = sorted(set(named) & set(retired))
        if both:
            raise ValueError(f"key {both[0]} is both named and retired")
        return self

    @property
    def expires_at(self) -> datetime:
        """Return the expiry as a UTC time."""
        return parse_timestamp(self.expires)

    def retired_key(self, kid: str) -> RetiredKey | None:
        """Return the retirement record of key id ``kid``, or None."""
        return next((r for r in self.retired if r.key_id == kid), None)

    def catalog_keys(self, origin: str) -> list[TrustedKey]:
        """Return the keys this document names, each with its validity window; ``origin`` says where it came from."""
        return [
            TrustedKey(
                k.key_id,
                origin,
                bytes.fromhex(k.public_key),
                parse_timestamp(k.not_before),
                parse_timestamp(k.not_after),
            )
            for k in self.keys
        ]

    def to_json(self) -> bytes:
        """Return the canonical bytes of this document (what the root signs)."""
        return (json.dumps(self.model_dump(mode="json"), indent=2) + "\n").encode()


def parse_keys(data: bytes, where: str = KEYS_NAME) -> KeysDocument:
    """Return the keys document parsed from ``data``. Raises VerificationError naming what is wrong."""
    try:
        return KeysDocument.model_validate_json(data)
    except ValidationError as e:
        raise VerificationError(f"{where}: not a valid keys document: {first_error(e)}") from e


def catalog_key_entry(public: TrustedKey, not_before: datetime, not_after: datetime, note: str = "") -> CatalogKey:
    """Return the keys-document entry naming ``public`` as a catalog key valid from ``not_before`` to ``not_after``.

    Raises VerificationError when the window is empty.
    """
    try:
        return CatalogKey(
            key_id=public.key_id,
            public_key=public.public_bytes.hex(),
            not_before=format_timestamp(not_before),
            not_after=format_timestamp(not_after),
            note=note,
        )
    except ValidationError as e:
        raise VerificationError(first_error(e)) from e


def verify_keys_document(
    keys_bytes: bytes, sig_bytes: bytes, roots: list[TrustedKey], now: datetime | None, where: str = KEYS_NAME
) -> tuple[KeysDocument, TrustedKey]:
    """Return (the keys document, the root key that signed it) after checking signature and expiry.

    ``now`` None skips the expiry check (lint and ``keys show`` report an expired document as such, after the
    signature). Raises VerificationError: the signature is not a root key's (a catalog key signing a keys
    document is refused like any other key: only a root may name catalog keys), does not verify, the document
    is malformed, or it has expired (TUF's freeze-attack check).
    """
    claimed = signature_key_id(sig_bytes, KEYS_SIG_NAME)
    if not any(k.key_id == claimed for k in roots):
        trusted = ", ".join(sorted({k.key_id for k in roots})) or "none"
        raise VerificationError(
            f"{where}: the keys document is signed by key {claimed}, which is not a root key",
            hint=f"root keys: {trusted}; only a root key may name catalog keys (`fwman catalog keys sign --key ROOT`)",
        )
    root = verify_catalog_signature(keys_bytes, sig_bytes, roots, what="keys document", sig_name=KEYS_SIG_NAME)
    doc = parse_keys(keys_bytes, where)
    if now is not None and now >= doc.expires_at:
        raise VerificationError(
            f"{where}: the keys document (serial {doc.serial}) expired on {doc.expires}",
            hint="the publisher must sign a new one with the root key (`fwman catalog keys sign`); "
            "if that date has not passed, check this machine's clock",
        )
    return doc, root


def verify_catalog_index(
    index_bytes: bytes,
    sig_bytes: bytes,
    doc: KeysDocument | None,
    admin: list[TrustedKey],
    now: datetime,
    retired: list[RetiredKey] | None = None,
    doc_origin: str = KEYS_NAME,
) -> TrustedKey:
    """Return the catalog key whose signature over ``index_bytes`` is in ``sig_bytes``.

    Trusted are the keys ``doc`` names that are valid at ``now`` and the administrator's ``admin`` keys. A key id
    listed in ``retired`` (plus ``doc``'s own list) is refused first, with its retirement; a named key outside
    its window is refused with its window. Raises VerificationError for those, an unknown key, or a signature
    that does not verify.
    """
    claimed = signature_key_id(sig_bytes, SIG_NAME)
    gone = list(retired or []) + (list(doc.retired) if doc is not None else [])
    record = next((r for r in gone if r.key_id == claimed), None)
    if record is not None:
        raise VerificationError(
            f"catalog index is signed by key {claimed}, retired on {record.retired}: {record.reason}",
            hint="a retired key is never trusted again; the publisher must re-sign the index with a current "
            "catalog key (`fwman catalog keys show` lists them)",
        )
    named = doc.catalog_keys(doc_origin) if doc is not None else []
    for key in named:
        # a named key always has both ends of its window (CatalogKey requires them)
        if key.key_id == claimed and not key.valid_at(now) and key.not_before and key.not_after:
            window = f"{format_timestamp(key.not_before)} to {format_timestamp(key.not_after)}"
            raise VerificationError(
                f"catalog index is signed by key {claimed}, which is valid only from {window}",
                hint="the publisher must re-sign with a current catalog key, or sign a keys document that extends "
                "this one (`fwman catalog keys sign --key ROOT --add PUB --not-after DATE`); "
                "if the window includes today, check this machine's clock",
            )
    candidates = [k for k in named if k.valid_at(now)] + admin
    if not any(k.key_id == claimed for k in candidates):
        valid = ", ".join(sorted(k.key_id for k in named if k.valid_at(now))) or "none"
        local = ", ".join(sorted(k.key_id for k in admin)) or "none"
        serial = f" (serial {doc.serial})" if doc is not None else ""
        raise VerificationError(
            f"catalog index is signed by an unknown key {claimed}",
            hint=f"catalog keys of the keys document{serial}: {valid}; keys trusted on this host only: {local}; "
            "the publisher must sign with one of them, or publish a keys document signed by the "
            "root that names this key (`fwman catalog keys show`); trust a key on this host alone only by putting "
            "its public half in /etc/fwman/keys.d/",
        )
    return verify_catalog_signature(index_bytes, sig_bytes, candidates)


def verify_catalog_signature(
    data: bytes, sig_bytes: bytes, keys: list[TrustedKey], *, what: str = "catalog index", sig_name: str = SIG_NAME
) -> TrustedKey:
    """Return the key of ``keys`` whose signature over ``data`` is in ``sig_bytes`` (no validity, no retirement),
    with the catalog's hints. Raises VerificationError as :func:`fwman.core.signing.verify_signature`."""
    return verify_signature(
        data,
        sig_bytes,
        keys,
        what=what,
        sig_name=sig_name,
        trust_hint="add the maintainer's public key to /etc/fwman/keys.d/ only if you trust it",
        altered_hint="nothing was installed; fetch the catalog again from its publisher",
    )
