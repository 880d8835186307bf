"""Signing and verifying the catalog index (Ed25519, via ``cryptography``).

``index.json.sig`` is a small JSON document: ``{"format": "fwman-signature", "version": 1, "algorithm":
"ed25519", "key_id": "<16 hex>", "signature": "<base64>"}``. The signature covers the exact bytes of
``index.json``. ``key_id`` is the first 16 hex digits of the SHA-256 of the raw 32-byte public key: it lets a
refusal name the key ("signed by an unknown key"), it is never what makes a signature trusted.

Trusted public keys are PEM files (``*.pub``): the ones bundled in ``fwman/keys/`` and any an administrator adds
to ``/etc/fwman/keys.d/`` on the host. ``cryptography`` is imported inside functions: it costs startup time and
only signing and verifying need it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fwman.core import paths
from fwman.core.errors import MissingError, NotRecordedError, UsageError, VerificationError
from fwman.core.resources import bundled_keys, read_data
from fwman.host.base import Host

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: public keys that ship with fwman
BUNDLED_KEYS = bundled_keys()
#: public keys an administrator adds on the host
SIG_FORMAT = "fwman-signature"


@dataclass(frozen=True)
class TrustedKey:
    """A public key fwman accepts catalog signatures from."""

    key_id: str
    origin: str  # the file it came from
    public_bytes: bytes  # raw 32-byte Ed25519 public key


def key_id(public_bytes: bytes) -> str:
    """Return the key id of a raw Ed25519 public key: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(public_bytes).hexdigest()[:16]


def _load_public(data: bytes, origin: str) -> TrustedKey:
    """Return the trusted key in PEM ``data``. Raises VerificationError when it is not an Ed25519 public key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as e:
        raise VerificationError(f"{origin}: not a PEM public key") from e
    if not isinstance(key, Ed25519PublicKey):
        raise VerificationError(f"{origin}: not an Ed25519 public key")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return TrustedKey(key_id(raw), origin, raw)


def trusted_keys(host: Host, bundled: Path | None = None) -> list[TrustedKey]:
    """Return the bundled keys plus ``/etc/fwman/keys.d/*.pub`` on ``host``.

    Raises VerificationError when a key file there is not an Ed25519 public key (a broken trust store is
    reported, not skipped).
    """
    bundled = bundled or BUNDLED_KEYS
    keys = [_load_public(read_data(p), str(p)) for p in sorted(bundled.glob("*.pub"))] if bundled.is_dir() else []
    try:
        names = host.listdir(paths.CATALOG_KEYS_DIR) if host.is_dir(paths.CATALOG_KEYS_DIR) else []
    except (MissingError, NotRecordedError):
        names = []
    for name in names:
        if name.endswith(".pub"):
            path = f"{paths.CATALOG_KEYS_DIR}/{name}"
            keys.append(_load_public(host.read_bytes(path, limit=64 * 1024), path))
    return keys


def load_private_key(data: bytes, origin: str) -> Ed25519PrivateKey:
    """Return the Ed25519 private key in PEM ``data`` (``openssl genpkey -algorithm ed25519``).

    Raises UsageError when it is not an unencrypted Ed25519 private key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise UsageError(
            f"{origin}: not an unencrypted PEM private key",
            hint="make one with: openssl genpkey -algorithm ed25519 -out maintainer.pem",
        ) from e
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{origin}: not an Ed25519 private key", hint="openssl genpkey -algorithm ed25519")
    return key


def public_pem(key: Ed25519PrivateKey) -> bytes:
    """Return the PEM public key of ``key`` (what goes into ``fwman/keys/`` or ``/etc/fwman/keys.d/``)."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def sign_index(index_bytes: bytes, key: Ed25519PrivateKey) -> bytes:
    """Return the ``index.json.sig`` document for ``index_bytes`` signed with ``key``."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    doc = {
        "format": SIG_FORMAT,
        "version": 1,
        "algorithm": "ed25519",
        "key_id": key_id(raw),
        "signature": base64.b64encode(key.sign(index_bytes)).decode(),
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def verify_index(index_bytes: bytes, sig_bytes: bytes, keys: list[TrustedKey]) -> TrustedKey:
    """Return the trusted key whose signature over ``index_bytes`` is in ``sig_bytes``.

    Raises VerificationError: malformed signature file, signed by a key that is not trusted, or a signature
    that does not verify (the index or the signature was changed).
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    doc = _parse_sig(sig_bytes)
    try:
        signature = base64.b64decode(doc["signature"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise VerificationError("index.json.sig: signature is not base64") from e
    claimed = str(doc["key_id"])
    candidates = [k for k in keys if k.key_id == claimed]
    if not candidates:
        trusted = ", ".join(sorted({k.key_id for k in keys})) or "none"
        raise VerificationError(
            f"catalog index is signed by an unknown key {claimed}",
            hint=f"trusted keys: {trusted}; add the maintainer's public key to /etc/fwman/keys.d/ only if you trust it",
        )
    for key in candidates:
        try:
            Ed25519PublicKey.from_public_bytes(key.public_bytes).verify(signature, index_bytes)
        except InvalidSignature:
            continue
        return key
    raise VerificationError(
        f"catalog index signature does not verify with key {claimed}: index.json or its signature was altered",
        hint="nothing was installed; fetch the catalog again from its publisher",
    )


def _parse_sig(sig_bytes: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(sig_bytes)
    except (ValueError, UnicodeDecodeError) as e:
        raise VerificationError("index.json.sig: not a signature document (not JSON)") from e
    if (
        not isinstance(doc, dict)
        or doc.get("format") != SIG_FORMAT
        or doc.get("version") != 1
        or doc.get("algorithm") != "ed25519"
        or not isinstance(doc.get("key_id"), str)
        or not isinstance(doc.get("signature"), str)
    ):
        raise VerificationError(
            "index.json.sig: not an fwman Ed25519 signature (format, version, algorithm, key_id, signature)"
        )
    return doc


def make_index(directory: Path, date: str, serial: int | None = None) -> bytes:
    """Return the bytes of a new ``index.json`` for the catalog in ``directory``.

    Lists every ``boards/*.toml`` with its SHA-256 and size. ``serial`` defaults to the previous index's serial
    plus one (1 for a first index); a given serial must be higher than the previous one. Raises UsageError for
    a serial that does not grow, VerificationError when a board file is invalid (a catalog that does not lint
    clean is never signed).
    """
    from fwman.firmware.catalog.lint import lint_directory
    from fwman.firmware.catalog.schema import BOARDS_DIR, INDEX_NAME, CatalogIndex, IndexFile, parse_index

    previous = 0
    if (directory / INDEX_NAME).is_file():
        previous = parse_index(read_data(directory / INDEX_NAME)).serial
    if serial is None:
        serial = previous + 1
    elif serial <= previous:
        raise UsageError(f"serial {serial} is not higher than the current index's {previous}")
    errors = [i for i in lint_directory(directory) if i.level == "error" and i.file != INDEX_NAME]
    if errors:
        first = errors[0]
        raise VerificationError(
            f"{first.file}: {first.where + ': ' if first.where else ''}{first.message}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            hint="fix it (see `fwman catalog lint`) before signing",
        )
    files = []
    for path in sorted((directory / BOARDS_DIR).glob("*.toml")):
        data = read_data(path)
        files.append(
            IndexFile(path=f"{BOARDS_DIR}/{path.name}", sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        )
    return CatalogIndex(serial=serial, date=date, files=files).to_json()


def sign_directory(local: Host, directory: Path, key: Ed25519PrivateKey, date: str, serial: int | None = None) -> bytes:
    """Write a new ``index.json`` (:func:`make_index`) and its signature into catalog ``directory``; return the index.

    ``local`` is the machine the maintainer's working tree is on (never a ``--root`` or snapshot). Raises as
    :func:`make_index`; OSError when the files cannot be written.
    """
    from fwman.firmware.catalog.schema import INDEX_NAME, SIG_NAME

    index_bytes = make_index(directory, date, serial)
    sig_bytes = sign_index(index_bytes, key)
    local.write_bytes(str(directory / INDEX_NAME), index_bytes)
    local.write_bytes(str(directory / SIG_NAME), sig_bytes)
    return index_bytes
