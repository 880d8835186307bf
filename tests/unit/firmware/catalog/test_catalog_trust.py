"""The catalog's trust: root keys, the keys document, expiry (docs/signing.md); the maintainer commands
`catalog keys sign|show` and `catalog sign` under a keys document, and what `catalog lint` says about them.

Every key here is made by the test (never the maintainers' key). Updates over HTTP are in
tests/system/test_catalog_http.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.clock import FixedClock
from fwman.core.errors import VerificationError
from fwman.core.signing import public_pem, sign_document
from fwman.firmware.catalog.signing import parse_keys, verify_keys_document
from tests.support.catalog import (
    board_toml,
    key_id_of,
    seed_images,
    trust_root,
    write_catalog,
    write_keys,
)
from tests.support.env import FwmanEnv


def pem_files(tmp_path: Path, name: str) -> tuple[Ed25519PrivateKey, Path, Path]:
    """Return a new key with its private (PKCS#8 PEM) and public files under ``tmp_path``."""
    key = Ed25519PrivateKey.generate()
    private = tmp_path / f"{name}.pem"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public = tmp_path / f"{name}.pub"
    public.write_bytes(public_pem(key))
    return key, private, public


def catalog_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "cat"
    (directory / "boards").mkdir(parents=True)
    (directory / "boards/10de-2204-3842-3987.toml").write_text(board_toml(seed_images()))
    return directory


def test_keys_sign_then_sign_then_lint_is_clean(tmp_path: Path, fwman: FwmanEnv) -> None:
    root_key, root_pem, _ = pem_files(tmp_path, "root")
    cat_key, cat_pem, cat_pub = pem_files(tmp_path, "catalog")
    host = tmp_path / "host"
    trust_root(host, root_key)
    cat = catalog_dir(tmp_path)
    r = fwman(
        "catalog", "keys", "sign", "--key", str(root_pem), "--dir", str(cat), "--add", str(cat_pub),
        "--note", "kept by the maintainers", "--retire", "0123456789abcdef", "--reason", "lost",
        "--date", "2026-12-01", "--root", str(host),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert f"serial 1, 2026-12-01, expires 2027-12-01T00:00:00Z\n  catalog keys: {key_id_of(cat_key)}" in r.stdout
    doc = json.loads((cat / "keys.json").read_text())
    assert doc["keys"][0]["not_before"] == "2026-12-01T00:00:00Z" and doc["keys"][0]["not_after"] == (
        "2027-12-01T00:00:00Z"
    )
    assert doc["keys"][0]["note"] == "kept by the maintainers"
    assert doc["retired"] == [{"key_id": "0123456789abcdef", "retired": "2026-12-01", "reason": "lost"}]
    r = fwman("catalog", "sign", "--key", str(cat_pem), "--dir", str(cat), "--date", "2026-12-01")
    assert r.code == 0, r.stderr
    assert "serial 1, 2026-12-01, 1 file(s), expires 2027-12-01T00:00:00Z" in r.stdout
    at = FwmanEnv(clock=FixedClock(at=datetime(2026, 12, 2, tzinfo=UTC)))
    lint = at("catalog", "lint", "--dir", str(cat), "--root", str(host), "--json")
    assert lint.code == 0, lint.stdout
    signature = lint.json()["signature"]
    assert signature["good"] is True and signature["key_id"] == key_id_of(cat_key)
    assert signature["keys_document"]["root_key_id"] == key_id_of(root_key)
    assert signature["keys_document"]["retired"] == ["0123456789abcdef"]
    # a second document raises the serial and keeps what the first said
    _, _, other_pub = pem_files(tmp_path, "other")
    r = fwman(
        "catalog", "keys", "sign", "--key", str(root_pem), "--dir", str(cat), "--add", str(other_pub),
        "--date", "2026-12-05", "--root", str(host),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    doc = json.loads((cat / "keys.json").read_text())
    assert doc["serial"] == 2 and len(doc["keys"]) == 2 and doc["retired"][0]["key_id"] == "0123456789abcdef"
    # --drop stops naming a key without retiring it (how the root stops doubling as a catalog key)
    base = ("catalog", "keys", "sign", "--key", str(root_pem), "--dir", str(cat), "--root", str(host))
    r = fwman(*base, "--drop", key_id_of(cat_key), "--date", "2026-12-06")
    assert r.code == 0, r.stderr
    doc = json.loads((cat / "keys.json").read_text())
    assert [k["key_id"] for k in doc["keys"]] != [] and key_id_of(cat_key) not in [k["key_id"] for k in doc["keys"]]
    assert key_id_of(cat_key) not in [r["key_id"] for r in doc["retired"]]
    assert fwman(*base, "--drop", key_id_of(cat_key)).code == 2  # no longer named


def test_keys_sign_refuses_a_key_that_is_not_a_root(tmp_path: Path, fwman: FwmanEnv) -> None:
    _, not_root_pem, pub = pem_files(tmp_path, "catalog")
    cat = catalog_dir(tmp_path)
    r = fwman("catalog", "keys", "sign", "--key", str(not_root_pem), "--dir", str(cat), "--add", str(pub))
    assert r.code == 2
    assert "is not a root key (root keys: 23cb724582f7654c)" in r.stderr
    assert not (cat / "keys.json").exists()


def test_keys_sign_refuses_what_would_break_the_document(tmp_path: Path, fwman: FwmanEnv) -> None:
    root_key, root_pem, _ = pem_files(tmp_path, "root")
    _, _, pub = pem_files(tmp_path, "catalog")
    host = tmp_path / "host"
    trust_root(host, root_key)
    cat = catalog_dir(tmp_path)
    base = ("catalog", "keys", "sign", "--key", str(root_pem), "--dir", str(cat), "--root", str(host))
    r = fwman(*base)
    assert r.code == 2 and "would name no catalog key" in r.stderr
    r = fwman(*base, "--add", str(pub), "--retire", "0123456789abcdef")
    assert r.code == 2 and "--retire needs --reason" in r.stderr
    r = fwman(*base, "--add", str(pub), "--not-before", "2027-01-01", "--not-after", "2026-01-01")
    assert r.code == 2 and "not_before must be earlier than not_after" in r.stderr
    r = fwman(*base, "--add", str(pub), "--retire", "XYZ", "--reason", "x")
    assert r.code == 2 and "16 lower-case hex digits" in r.stderr
    assert not (cat / "keys.json").exists()


def test_sign_refuses_a_key_the_keys_document_does_not_name(tmp_path: Path, fwman: FwmanEnv) -> None:
    root_key = Ed25519PrivateKey.generate()
    named = Ed25519PrivateKey.generate()
    _, stranger_pem, _ = pem_files(tmp_path, "stranger")
    cat = catalog_dir(tmp_path)
    write_keys(cat, root_key, [named], serial=1, retired={key_id_of(root_key): "test"})
    r = fwman("catalog", "sign", "--key", str(stranger_pem), "--dir", str(cat))
    assert r.code == 2 and f"is not a catalog key of keys.json (catalog keys: {key_id_of(named)})" in r.stderr
    assert "fwman catalog keys sign --key ROOT.pem --add PUB.pem" in r.stderr
    assert not (cat / "index.json").exists()


def test_lint_reports_an_expired_index_and_a_keys_document_not_signed_by_a_root(
    tmp_path: Path, fwman: FwmanEnv
) -> None:
    root_key, catalog_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    host = tmp_path / "host"
    trust_root(host, root_key)
    cat = write_catalog(
        tmp_path / "cat",
        {"10de-2204-3842-3987": board_toml(seed_images())},
        catalog_key,
        date="2026-01-02",
        expires="2026-06-01T00:00:00Z",
    )
    write_keys(cat, root_key, [catalog_key])
    r = fwman("catalog", "lint", "--dir", str(cat), "--root", str(host))
    assert r.code == 4
    assert "index.json: expires: error: the index expired on 2026-06-01T00:00:00Z: re-sign it" in r.stdout
    soon = FwmanEnv(clock=FixedClock(at=datetime(2026, 5, 20, tzinfo=UTC)))
    r = soon("catalog", "lint", "--dir", str(cat), "--root", str(host))
    assert r.code == 0 and "warning: the index expires on 2026-06-01T00:00:00Z: re-sign it soon" in r.stdout
    write_keys(cat, catalog_key, [catalog_key])  # signed by the catalog key itself
    r = soon("catalog", "lint", "--dir", str(cat), "--root", str(host))
    assert r.code == 4
    assert f"keys.json.sig: error: keys.json: the keys document is signed by key {key_id_of(catalog_key)}" in r.stdout


def test_keys_show_of_the_bundled_document(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "keys", "show", "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    assert "signed by root key 23cb724582f7654c" in r.stdout
    assert "33d1cd9eab9b080a  retired 2026-12-01: its private half was never kept anywhere" in r.stdout
    late = FwmanEnv(clock=FixedClock(at=datetime(2030, 1, 1, tzinfo=UTC)))
    r = late("catalog", "keys", "show", "--root", str(tmp_path), "--json")
    assert r.code == 4 and r.json()["expired"] is True and r.json()["keys"][0]["state"] == "expired"
    assert "expired on 2027-12-01T00:00:00Z" in r.stderr


def test_an_expired_catalog_in_use_gets_a_note(tmp_path: Path) -> None:
    late = FwmanEnv(clock=FixedClock(at=datetime(2030, 1, 1, tzinfo=UTC)))
    doc = late("catalog", "list", "--json", "--root", str(tmp_path)).json()
    assert any("expired on 2027-12-01T00:00:00Z" in n and "fwman catalog update" in n for n in doc["catalog"]["notes"])


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=400), sig=st.binary(max_size=200))
def test_keys_documents_parse_or_refuse(data: bytes, sig: bytes) -> None:
    # any bytes: a model or a VerificationError, never another exception
    for call in (lambda: parse_keys(data), lambda: verify_keys_document(data, sig, [], None)):
        try:
            call()
        except VerificationError:
            pass


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["format", "version", "serial", "date", "expires", "keys", "retired"]),
        st.one_of(st.text(max_size=20), st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2)),
        max_size=7,
    )
)
def test_signed_but_malformed_keys_documents_are_refused(doc: dict[str, object]) -> None:
    root = Ed25519PrivateKey.generate()
    from fwman.core.signing import load_public_key

    data = json.dumps(doc).encode()
    with pytest.raises(VerificationError):
        verify_keys_document(data, sign_document(data, root), [load_public_key(public_pem(root), "r")], None)


def test_sign_and_keys_sign_dry_run_write_nothing_and_json_says_what_changed(tmp_path: Path, fwman: FwmanEnv) -> None:
    root_key, root_pem, _ = pem_files(tmp_path, "root")
    _, cat_pem, cat_pub = pem_files(tmp_path, "catalog")
    host = tmp_path / "host"
    trust_root(host, root_key)
    cat = catalog_dir(tmp_path)
    keys = ("catalog", "keys", "sign", "--key", str(root_pem), "--dir", str(cat), "--add", str(cat_pub),
            "--date", "2026-12-01", "--root", str(host))  # fmt: skip
    r = fwman(*keys, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.catalog-keys-sign/1" and doc["dry_run"] is True and doc["changed"] is False
    assert doc["written"] == [f"{cat}/keys.json", f"{cat}/keys.json.sig"] and doc["serial"] == 1
    assert not (cat / "keys.json").exists() and not (cat / "keys.json.sig").exists()
    text = fwman(*keys, "--dry-run")
    assert text.code == 0 and text.stdout.startswith(f"would sign {cat}/keys.json: serial 1, 2026-12-01")
    r = fwman(*keys, "--json")
    assert r.code == 0, r.stderr
    assert r.json()["changed"] is True and r.json()["dry_run"] is False
    assert json.loads((cat / "keys.json").read_text())["serial"] == 1 and (cat / "keys.json.sig").is_file()

    sign = ("catalog", "sign", "--key", str(cat_pem), "--dir", str(cat), "--date", "2026-12-01")
    r = fwman(*sign, "--dry-run", "--json")
    assert r.code == 0, r.stderr
    doc = r.json()
    assert doc["schema"] == "fwman.catalog-sign/1" and (doc["dry_run"], doc["changed"]) == (True, False)
    assert doc["written"] == [f"{cat}/index.json", f"{cat}/index.json.sig"]
    assert (doc["serial"], doc["date"], doc["files"]) == (1, "2026-12-01", 1)
    assert not (cat / "index.json").exists() and not (cat / "index.json.sig").exists()
    r = fwman(*sign, "--json")
    assert r.code == 0, r.stderr
    assert r.json()["changed"] is True and json.loads((cat / "index.json").read_text())["serial"] == 1
    assert fwman(*sign, "--dry-run").stdout.startswith(f"would sign {cat}/index.json: serial 2, 2026-12-01")
    assert json.loads((cat / "index.json").read_text())["serial"] == 1  # the dry run left the index as it was
