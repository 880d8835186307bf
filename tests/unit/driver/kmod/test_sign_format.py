"""The appended-signature format fwman writes, the signature hash of a kernel, and key management."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core import paths
from fwman.core.errors import MissingError, ParseError, UsageError
from fwman.driver.kmod import sign
from fwman.driver.kmod.kofile import SIGNATURE_MAGIC, split_signature
from fwman.host.live import LiveHost


@pytest.fixture(scope="module")
def keypair() -> tuple[bytes, bytes]:
    return sign.generate_key("unit test key")


def test_trailer_layout() -> None:
    t = sign.trailer(414)
    assert t.endswith(SIGNATURE_MAGIC) and len(t) == 12 + len(SIGNATURE_MAGIC)
    assert struct.unpack(">BBBBB3xI", t[:12]) == (0, 0, 2, 0, 0, 414)


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
def test_signed_module_reads_back(keypair: tuple[bytes, bytes], hash_name: str) -> None:
    key, cert = keypair
    body = b"\x7fELF" + os.urandom(3000)
    signed = sign.sign_module(body, key, cert, hash_name)
    elf, sig = split_signature(signed)
    assert elf == body and sig is not None
    assert (sig.id_type, sig.signer, sig.hash_algorithm) == ("PKCS#7", "unit test key", hash_name)
    # signing a signed module replaces the signature
    again = sign.sign_module(signed, key, cert, "sha256")
    assert split_signature(again)[0] == body and again.count(SIGNATURE_MAGIC) == 1


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=2000))
def test_any_body_round_trips(body: bytes) -> None:
    key, cert = _KEY
    signed = sign.sign_module(body.removesuffix(SIGNATURE_MAGIC) + b"x", key, cert, "sha256")
    assert split_signature(signed)[1] is not None


_KEY = sign.generate_key("hypothesis key")


def test_bad_inputs(keypair: tuple[bytes, bytes]) -> None:
    key, cert = keypair
    with pytest.raises(UsageError):
        sign.sign_module(b"x", key, cert, "md5")
    with pytest.raises(ParseError):
        sign.sign_module(b"x", b"not a key", cert, "sha256")
    with pytest.raises(ParseError):
        sign.sign_module(b"x", key, b"not a certificate", "sha256")


def test_signature_hash_of_a_kernel(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    assert sign.parse_sig_hash('CONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_HASH="sha512"\n') == "sha512"
    assert sign.parse_sig_hash("# CONFIG_MODULE_SIG is not set\n") is None
    assert sign.kernel_sig_hash(host, "k") == "sha256"  # nothing says otherwise
    (tmp_path / "lib/modules/k/build").mkdir(parents=True)
    (tmp_path / "lib/modules/k/build/.config").write_text('CONFIG_MODULE_SIG_HASH="sha384"\n')
    assert sign.kernel_sig_hash(host, "k") == "sha384"
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot/config-k").write_text('CONFIG_MODULE_SIG_HASH="sha512"\n')
    assert sign.kernel_sig_hash(host, "k") == "sha512"  # /boot/config wins


def test_keygen_records_the_key_and_reuses_dkms(tmp_path: Path) -> None:
    host = LiveHost(str(tmp_path))
    assert sign.configured_key(host) is None
    key = sign.keygen(host)
    assert key.origin == "fwman" and (tmp_path / key.key.lstrip("/")).stat().st_mode & 0o777 == 0o600
    assert sign.configured_key(host) == key
    with pytest.raises(UsageError):
        sign.keygen(host)
    with pytest.raises(MissingError):
        sign.keygen(host, reuse_dkms=True, force=True)
    (tmp_path / "var/lib/dkms").mkdir(parents=True)
    k, c = _KEY
    (tmp_path / "var/lib/dkms/mok.key").write_bytes(k)
    (tmp_path / "var/lib/dkms/mok.pub").write_bytes(c)
    reused = sign.keygen(host, reuse_dkms=True, force=True)
    assert (reused.key, reused.cert, reused.origin) == (paths.DKMS_MOK_KEY, paths.DKMS_MOK_CERT, "dkms")
    assert json.loads((tmp_path / "var/lib/fwman/signing.json").read_text())["origin"] == "dkms"
    (tmp_path / "var/lib/dkms/mok.pub").unlink()
    with pytest.raises(MissingError):
        sign.configured_key(host)
