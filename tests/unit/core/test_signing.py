"""fwman's one signing module (core/signing.py): the format, the key directories, and the caller's hints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fwman.core.errors import VerificationError
from fwman.core.signing import (
    keys_in_directory,
    load_public_key,
    public_pem,
    sign_document,
    signature_key_id,
    verify_signature,
)
from fwman.host.live import LiveHost

HINTS = {"trust_hint": "put it in /etc/x.d/", "altered_hint": "nothing was installed"}


def test_a_signature_verifies_with_its_key_and_names_the_callers_file_and_hints(tmp_path: Path) -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trusted = load_public_key(public_pem(key), "k.pub")
    sig = sign_document(b"doc", key)
    doc = json.loads(sig)
    assert (doc["format"], doc["version"], doc["algorithm"], doc["key_id"]) == (
        "fwman-signature", 1, "ed25519", trusted.key_id
    )  # fmt: skip
    assert verify_signature(b"doc", sig, [trusted], what="bundle", sig_name="bundle.json.sig", **HINTS) == trusted
    with pytest.raises(VerificationError, match=r"bundle signature does not verify .*\(bundle\.json\.sig\)") as e:
        verify_signature(b"doc!", sig, [trusted], what="bundle", sig_name="bundle.json.sig", **HINTS)
    assert e.value.hint == "nothing was installed"
    with pytest.raises(VerificationError, match="bundle is signed by an unknown key") as e:
        verify_signature(b"doc", sign_document(b"doc", other), [trusted], what="bundle", sig_name="b.sig", **HINTS)
    assert e.value.hint == f"trusted keys: {trusted.key_id}; put it in /etc/x.d/"
    # a malformed signature names the file it came from, not the catalog's index.json.sig
    with pytest.raises(VerificationError, match=r"^bundle\.json\.sig: not a signature document"):
        signature_key_id(b"[", "bundle.json.sig")


def test_a_key_directory_is_read_through_the_host_and_a_broken_key_is_reported(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    keys = tmp_path / "etc/fwman/bundle-keys.d"
    keys.mkdir(parents=True)
    (keys / "fleet.pub").write_bytes(public_pem(key))
    (keys / "README").write_text("not a key")
    host = LiveHost(str(tmp_path))
    assert [k.origin for k in keys_in_directory(host, "/etc/fwman/bundle-keys.d")] == [
        "/etc/fwman/bundle-keys.d/fleet.pub"
    ]
    assert keys_in_directory(host, "/etc/fwman/none.d") == []
    (keys / "broken.pub").write_text("-----BEGIN PUBLIC KEY-----\n")
    with pytest.raises(VerificationError, match=r"broken\.pub: not a PEM public key"):
        keys_in_directory(host, "/etc/fwman/bundle-keys.d")
