"""Ed25519 signatures in fwman's signature format: the one signing module, for the catalog and module bundles.

A signature file is a small JSON document: ``{"format": "fwman-signature", "version": 1, "algorithm":
"ed25519", "key_id": "<16 hex>", "signature": "<base64>"}`` over the exact bytes of the file it signs.
``key_id`` is the first 16 hex digits of the SHA-256 of the raw 32-byte public key: it lets a refusal name the
key ("signed by an unknown key"), it is never what makes a signature trusted.

Which keys are trusted for what is the caller's: the catalog's two levels (root keys, catalog keys:
:mod:`fwman.firmware.catalog.signing`), a fleet's bundle keys (:mod:`fwman.app.modules.bundle`). This module lives in
``core/`` so that both ``firmware/`` and ``driver/`` (siblings, which never import each other) may use it; it
reads key directories through whatever has ``is_dir``/``listdir``/``read_bytes`` (any Host), without importing
``host/``. ``cryptography`` is imported inside functions: it costs startup time and only signing and
verifying need it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError, VerificationError
from fwman.core.jsontext import parse_json

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SIG_FORMAT = "fwman-signature"
#: a public key file (PEM) larger than this is not one
MAX_KEY_FILE = 64 * 1024


class KeyDirectory(Protocol):
    """What reading a directory of ``*.pub`` keys needs (every Host has it)."""

    def is_dir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def read_bytes(self, path: str, limit: int | None = None) -> bytes: ...


@dataclass(frozen=True)
class TrustedKey:
    """A public key fwman accepts signatures from (a root key, a catalog key, a bundle key)."""

    key_id: str
    origin: str  # the file it came from, or the keys document that names it
    public_bytes: bytes  # raw 32-byte Ed25519 public key
    #: the window a catalog key from the keys document is valid in (None: no limit, e.g. a root or keys.d key)
    not_before: datetime | None = None
    not_after: datetime | None = None

    def valid_at(self, now: datetime) -> bool:
        """Return True when ``now`` lies in the key's validity window."""
        return (self.not_before is None or self.not_before <= now) and (self.not_after is None or now < self.not_after)


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


def keys_in_directory(host: KeyDirectory, directory: str) -> list[TrustedKey]:
    """Return the ``*.pub`` keys in ``directory`` on ``host``, by file name ([] when it is absent or was not
    recorded).

    Raises VerificationError when a key file there is not an Ed25519 public key (a broken trust store is
    reported, not skipped).
    """
    try:
        names = host.listdir(directory) if host.is_dir(directory) else []
    except (MissingError, NotRecordedError):
        names = []
    keys = []
    for name in sorted(names):
        if name.endswith(".pub"):
            path = f"{directory}/{name}"
            keys.append(load_public_key(host.read_bytes(path, limit=MAX_KEY_FILE), path))
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


def raw_public(key: Ed25519PrivateKey) -> bytes:
    """Return the raw 32-byte public key of ``key``."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_pem(key: Ed25519PrivateKey) -> bytes:
    """Return the PEM public key of ``key`` (what goes into ``fwman/keys/`` or a ``*.d/`` key directory)."""
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def sign_document(data: bytes, key: Ed25519PrivateKey) -> bytes:
    """Return the signature document (``index.json.sig``, ``keys.json.sig``, ``bundle.json.sig``) for ``data``
    signed with ``key``."""
    doc = {
        "format": SIG_FORMAT,
        "version": 1,
        "algorithm": "ed25519",
        "key_id": key_id(raw_public(key)),
        "signature": base64.b64encode(key.sign(data)).decode(),
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def verify_signature(
    data: bytes,
    sig_bytes: bytes,
    keys: list[TrustedKey],
    *,
    what: str,
    sig_name: str,
    trust_hint: str,
    altered_hint: str,
) -> TrustedKey:
    """Return the key of ``keys`` whose signature over ``data`` is in ``sig_bytes`` (no validity, no retirement:
    those are the caller's policy).

    ``what`` names the signed thing in messages ("catalog index"), ``sig_name`` the signature file;
    ``trust_hint`` is the hint for an unknown key (where the caller's trusted keys live), ``altered_hint`` the
    hint for a signature that does not verify. Raises VerificationError: malformed signature file, signed by a
    key that is not among ``keys``, or a signature that does not verify (the file or the signature was changed).
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    doc = parse_signature(sig_bytes, sig_name)
    try:
        signature = base64.b64decode(doc["signature"], validate=True)
    except (binascii.Error, ValueError) as e:
        raise VerificationError(f"{sig_name}: signature is not base64") from e
    claimed = str(doc["key_id"])
    candidates = [k for k in keys if k.key_id == claimed]
    if not candidates:
        trusted = ", ".join(sorted({k.key_id for k in keys})) or "none"
        raise VerificationError(
            f"{what} is signed by an unknown key {claimed}", hint=f"trusted keys: {trusted}; {trust_hint}"
        )
    for key in candidates:
        try:
            Ed25519PublicKey.from_public_bytes(key.public_bytes).verify(signature, data)
        except InvalidSignature:
            continue
        return key
    raise VerificationError(
        f"{what} signature does not verify with key {claimed}: the file or its signature ({sig_name}) was altered",
        hint=altered_hint,
    )


def signature_key_id(sig_bytes: bytes, sig_name: str) -> str:
    """Return the key id a signature document claims (to name the key in a refusal before verifying).

    Raises VerificationError when ``sig_bytes`` is not an fwman Ed25519 signature document.
    """
    return str(parse_signature(sig_bytes, sig_name)["key_id"])


def parse_signature(sig_bytes: bytes, sig_name: str) -> dict[str, Any]:
    """Return the fields of signature document ``sig_name``. Raises VerificationError when it is not one."""
    try:
        doc = parse_json(sig_bytes, sig_name)
    except ParseError as e:
        raise VerificationError(f"{sig_name}: not a signature document ({e.detail})") from e
    if (
        not isinstance(doc, dict)
        or doc.get("format") != SIG_FORMAT
        or doc.get("version") != 1
        or doc.get("algorithm") != "ed25519"
        or not isinstance(doc.get("key_id"), str)
        or not isinstance(doc.get("signature"), str)
    ):
        raise VerificationError(
            f"{sig_name}: not an fwman Ed25519 signature (format, version, algorithm, key_id, signature)"
        )
    return doc
