"""Which bundle signatures a host accepts, and signing a bundle: fwman's Ed25519 format (:mod:`fwman.core.signing`).

Trusted bundle keys are ``/etc/fwman/bundle-keys.d/*.pub`` on the host, deliberately not the catalog's keys: a
fleet owner signs their own bundles. Without any trusted key a signature is reported but not checked (there is
nothing to check it against); with one, an unsigned bundle or one signed by another key is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fwman.core import paths
from fwman.core.errors import VerificationError
from fwman.core.signing import keys_in_directory, sign_document, signature_key_id, verify_signature
from fwman.driver.bundle.format import SIG_NAME, Bundle
from fwman.host.base import Host

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def signature_key(bundle: Bundle) -> str | None:
    """Return the key id the bundle's signature names (None when unsigned or not a signature document)."""
    if bundle.signature is None:
        return None
    try:
        return signature_key_id(bundle.signature, SIG_NAME)
    except VerificationError:
        return None


def signature_check(host: Host) -> Callable[[Bundle], str]:
    """Return the check :func:`fwman.driver.bundle.install.plan_import` runs on a bundle's signature for ``host``.

    The check returns how the signature was checked (one line), and raises VerificationError for an unsigned
    bundle when keys are trusted, a signature by an unknown key, or one that does not verify. Raises
    VerificationError for a key file of the host's that is not an Ed25519 public key (a broken trust store is
    reported).
    """
    keys = keys_in_directory(host, paths.BUNDLE_KEYS_DIR)  # the keys bundles are accepted from ([]: none trusted)

    def check(bundle: Bundle) -> str:
        if not keys:
            if bundle.signature is None:
                return f"unsigned bundle (no trusted bundle key in {paths.BUNDLE_KEYS_DIR}/)"
            return f"signature not checked: no trusted bundle key in {paths.BUNDLE_KEYS_DIR}/"
        if bundle.signature is None:
            raise VerificationError(
                f"the bundle is not signed, and this host trusts only signed bundles ({paths.BUNDLE_KEYS_DIR}/)",
                hint="export it with --key KEY.pem on the build host",
            )
        claimed = signature_key_id(bundle.signature, SIG_NAME)
        if claimed not in {k.key_id for k in keys}:
            trusted = ", ".join(sorted(k.key_id for k in keys))
            raise VerificationError(
                f"the bundle is signed by key {claimed}, which this host does not trust",
                hint=f"trusted: {trusted}; add the fleet's public key to {paths.BUNDLE_KEYS_DIR}/",
            )
        altered = "nothing was installed; export the bundle again on the build host"
        try:
            key = verify_signature(
                bundle.doc_bytes,
                bundle.signature,
                keys,
                what="bundle",
                sig_name=SIG_NAME,
                trust_hint=f"add the fleet's public key to {paths.BUNDLE_KEYS_DIR}/",
                altered_hint=altered,
            )
        except VerificationError as e:
            raise VerificationError(
                f"the bundle's signature does not verify with key {claimed}: bundle.json or its signature was altered",
                hint=altered,
            ) from e
        return f"signed by trusted key {key.key_id} ({key.origin})"

    return check


def signer(key: Ed25519PrivateKey) -> Callable[[bytes], bytes]:
    """Return the signer :func:`fwman.driver.bundle.export.export_bundle` takes: ``bundle.json`` bytes in, the
    ``bundle.json.sig`` document out, signed with ``key``."""
    return lambda doc: sign_document(doc, key)
