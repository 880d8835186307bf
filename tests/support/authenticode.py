"""Throwaway Authenticode material for tests: a certificate chain made here (``cryptography``), and a PE update
program signed with the real ``osslsigncode``.

Nothing here is a real maker's key or certificate: every key is generated per test and lives in its temp dir.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.tools import tool_path

#: the subject the test catalog records for its board maker (RFC 4514)
MAKER_SUBJECT = "CN=Example Board Maker Inc.,O=Example Board Maker Inc.,C=US"
#: another company's code-signing subject (a valid chain, the wrong signer)
OTHER_SUBJECT = "CN=Someone Else Ltd,O=Someone Else Ltd,C=GB"

NOW = dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path
    certificate: x509.Certificate


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Issued:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Issued(cert_path, key_path, cert)


def make_root(directory: Path, name: str = "root", common_name: str = "fwman test root") -> Issued:
    """Return a self-signed CA certificate valid from a day ago for thirty days."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(days=1))
        .not_valid_after(NOW + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _write(directory, name, cert, key)


def make_signer(
    directory: Path,
    root: Issued,
    subject: str = MAKER_SUBJECT,
    name: str = "signer",
    *,
    expired: bool = False,
) -> Issued:
    """Return a code-signing certificate for ``subject`` issued by ``root``; ``expired``: its validity ended a
    day ago."""
    root_key = serialization.load_pem_private_key(root.key.read_bytes(), None)
    assert isinstance(root_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = (NOW - dt.timedelta(days=20), NOW - dt.timedelta(days=1)) if expired else (
        NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=10))  # fmt: skip
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name.from_rfc4514_string(subject))
        .issuer_name(root.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root.certificate.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(root_key, hashes.SHA256())
    )
    return _write(directory, name, cert, key)


def sign_pe(unsigned: bytes, signer: Issued, directory: Path) -> bytes:
    """Return ``unsigned`` (a PE file) signed by ``signer`` with the real ``osslsigncode sign`` (SHA-256, no
    timestamp). Raises CalledProcessError when osslsigncode refuses, AssertionError when it is not installed."""
    exe = tool_path("osslsigncode")
    assert exe is not None, "osslsigncode is not installed"
    src, out = directory / "unsigned.exe", directory / "signed.exe"
    src.write_bytes(unsigned)
    out.unlink(missing_ok=True)  # osslsigncode never overwrites its output
    subprocess.run(
        [exe, "sign", "-certs", str(signer.cert), "-key", str(signer.key), "-h", "sha256", "-n", "fwman test",
         "-in", str(src), "-out", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out.read_bytes()
