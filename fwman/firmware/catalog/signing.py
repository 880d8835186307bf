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
from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json
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


def load_public_key(data: bytes, origin: str) -> TrustedKey:
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
    keys = [load_public_key(read_data(p), str(p)) for p in sorted(bundled.glob("*.pub"))] if bundled.is_dir() else []
    try:
        names = host.listdir(paths.CATALOG_KEYS_DIR) if host.is_dir(paths.CATALOG_KEYS_DIR) else []
    except (MissingError, NotRecordedError):
        names = []
    for name in names:
        if name.endswith(".pub"):
            path = f"{paths.CATALOG_KEYS_DIR}/{name}"
            keys.append(load_public_key(host.read_bytes(path, limit=64 * 1024), path))
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


def signature_key_id(sig_bytes: bytes) -> str:
    """Return the key id a signature document claims (bundles check it against their own trust store).

    Raises VerificationError when ``sig_bytes`` is not an fwman Ed25519 signature document.
    """
    return str(_parse_sig(sig_bytes)["key_id"])


def _parse_sig(sig_bytes: bytes) -> dict[str, Any]:
    """Return the fields of a signature document. Raises VerificationError when it is not one."""
    try:
        doc = parse_json(sig_bytes, "index.json.sig")
    except ParseError as e:
        raise VerificationError(f"index.json.sig: not a signature document ({e.detail})") from e
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
