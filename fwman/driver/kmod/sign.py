"""Module signing for Secure Boot: key generation and the kernel's appended-signature format.

A signed module is ``[ELF][DER PKCS#7 SignedData, detached, no certificates][struct module_signature]
["~Module signature appended~\\n"]``, what the kernel's ``scripts/sign-file`` writes. The PKCS#7 blob is made
with cryptography (signer identified by issuer and serial, no authenticated attributes, binary content: the
options sign-file passes to OpenSSL's CMS), over the module bytes *before* any signature; the digest is the
kernel's ``CONFIG_MODULE_SIG_HASH``.

The key: ``fwman modules keygen`` makes an RSA key and a self-signed DER certificate (the extensions of the
kernel's ``certs/default_x509.genkey``: codeSigning, digitalSignature, not a CA), or reuses the key DKMS signs
with, so one MOK enrollment covers both (:func:`existing_keys`, in DKMS's own order: ``mok_signing_key`` /
``mok_certificate`` of ``/etc/dkms/framework.conf`` and ``framework.conf.d/*.conf``; on Ubuntu shim-signed's
``/var/lib/shim-signed/mok/MOK.priv`` / ``MOK.der``, which ``update-secureboot-policy --new-key`` makes and
Ubuntu's DKMS uses when framework.conf names none; then DKMS's default ``/var/lib/dkms/mok.key`` / ``mok.pub``;
docs/ubuntu.md cites the scripts). The key in use is recorded in ``/var/lib/fwman/signing.json``; modules are
signed only when that file names a key and certificate.
"""

from __future__ import annotations

import datetime
import json
import re
import struct
from dataclasses import dataclass

from fwman.core import clock, paths
from fwman.core.errors import MissingError, NotRecordedError, ParseError, UsageError
from fwman.core.jsontext import parse_json
from fwman.driver.kmod.kofile import SIGNATURE_MAGIC, split_signature
from fwman.host.base import Host

#: struct module_signature for PKCS#7: algo 0, hash 0, id_type 2 (PKEY_ID_PKCS7), signer/key-id lengths 0
_SIG_STRUCT = struct.Struct(">BBBBB3xI")
PKEY_ID_PKCS7 = 2
HASHES = ("sha1", "sha224", "sha256", "sha384", "sha512")


@dataclass(frozen=True)
class SigningKey:
    """Where the signing key (PEM) and its certificate (DER) live on the host."""

    key: str
    cert: str
    origin: str  # "fwman", "dkms" (/var/lib/dkms), "dkms-conf" (framework.conf), "shim-signed" (Ubuntu's MOK)


def generate_key(common_name: str = "fwman module signing key", days: int = 36500) -> tuple[bytes, bytes]:
    """Return (private key PEM, self-signed certificate DER) for module signing (RSA 2048, SHA-256)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = clock.now_utc()
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.DER)


def _hash(name: str) -> object:
    from cryptography.hazmat.primitives import hashes

    if name not in HASHES:
        raise UsageError(f"unsupported module signature hash {name!r}", hint=f"one of {', '.join(HASHES)}")
    algorithm: object = getattr(hashes, name.upper())()  # hashes.SHA1() ... hashes.SHA512()
    return algorithm


def signature_blob(body: bytes, key_pem: bytes, cert_der: bytes, hash_name: str) -> bytes:
    """Return the detached DER PKCS#7 signature of ``body`` (no certificates, no signed attributes).

    Raises ParseError when the key or certificate cannot be read, UsageError for an unknown hash.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs7

    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise ParseError("signing key", "PEM", str(e)) from e
    try:
        cert = x509.load_der_x509_certificate(cert_der)
    except ValueError as e:
        try:
            cert = x509.load_pem_x509_certificate(cert_der)
        except ValueError:
            raise ParseError("signing certificate", "DER", str(e)) from e
    algorithm = _hash(hash_name)
    builder = pkcs7.PKCS7SignatureBuilder().set_data(body).add_signer(cert, key, algorithm)  # type: ignore[arg-type]
    opt = pkcs7.PKCS7Options
    return builder.sign(serialization.Encoding.DER, [opt.DetachedSignature, opt.NoCerts, opt.NoAttributes, opt.Binary])


def trailer(sig_len: int) -> bytes:
    """Return the bytes appended after the signature blob: ``struct module_signature`` and the magic string."""
    return _SIG_STRUCT.pack(0, 0, PKEY_ID_PKCS7, 0, 0, sig_len) + SIGNATURE_MAGIC


def sign_module(data: bytes, key_pem: bytes, cert_der: bytes, hash_name: str) -> bytes:
    """Return ``data`` signed in the kernel's appended-signature format (an existing signature is replaced).

    Raises ParseError when ``data`` carries a malformed signature trailer or the key cannot be read.
    """
    body, _old = split_signature(data)
    blob = signature_blob(body, key_pem, cert_der, hash_name)
    return body + blob + trailer(len(blob))


_HASH_RE = re.compile(r'^CONFIG_MODULE_SIG_HASH="([a-z0-9-]+)"', re.MULTILINE)


def parse_sig_hash(config_text: str) -> str | None:
    """Return ``CONFIG_MODULE_SIG_HASH`` from kernel config text, or None when the kernel does not sign."""
    match = _HASH_RE.search(config_text)
    return match.group(1) if match else None


def kernel_sig_hash(host: Host, kver: str) -> str:
    """Return the signature hash kernel ``kver`` expects (``/boot/config-KVER``, else the headers' ``.config``).

    Falls back to ``sha256`` (and says nothing) when neither config file states one: every kernel with module
    signing since 4.x accepts sha256.
    """
    for path in (f"/boot/config-{kver}", f"{paths.modules_dir(kver)}/build/.config"):
        if host.exists(path):
            try:
                found = parse_sig_hash(host.read_text(path))
            except MissingError:
                continue
            if found:
                return found
    return "sha256"


def configured_key(host: Host) -> SigningKey | None:
    """Return the key recorded by ``fwman modules keygen``, or None when module signing is not configured.

    Raises ParseError when the record is corrupt, MissingError when it names files that are gone.
    """
    if not host.exists(paths.SIGNING_CONFIG):
        return None
    try:
        doc = parse_json(host.read_bytes(paths.SIGNING_CONFIG), "signing configuration", paths.SIGNING_CONFIG)
        key = SigningKey(str(doc["key"]), str(doc["cert"]), str(doc.get("origin", "fwman")))
    except (ValueError, KeyError, TypeError) as e:
        raise ParseError("signing configuration", paths.SIGNING_CONFIG, str(e)) from e
    for path in (key.key, key.cert):
        if not host.exists(path):
            raise MissingError(
                f"module signing is configured but {path} is missing",
                hint="run `fwman modules keygen` again (and enroll the new certificate with mokutil)",
            )
    return key


def _framework_key(host: Host) -> SigningKey | None:
    """Return the key DKMS's framework.conf (and framework.conf.d/*.conf, read after it) names, or None.

    A value with a ``$`` (``$kernelver``: one key per kernel) or a ``pkcs11:`` URI is not a file fwman can sign
    with: None.
    """
    from fwman.platform.envfile import parse_env_file

    files = [paths.DKMS_FRAMEWORK_CONF]
    try:
        if host.is_dir(paths.DKMS_FRAMEWORK_CONF_DIR):
            files += [
                f"{paths.DKMS_FRAMEWORK_CONF_DIR}/{n}"
                for n in sorted(host.listdir(paths.DKMS_FRAMEWORK_CONF_DIR))
                if n.endswith(".conf")
            ]
    except (MissingError, NotRecordedError):
        pass
    settings: dict[str, str] = {}
    for path in files:
        try:
            if host.exists(path):
                settings.update(parse_env_file(host.read_text(path)))
        except (MissingError, NotRecordedError):
            continue
    key, cert = settings.get("mok_signing_key"), settings.get("mok_certificate")
    if not key or not cert or any("$" in v or v.startswith("pkcs11:") for v in (key, cert)):
        return None
    return SigningKey(key, cert, "dkms-conf")


def searched_locations(host: Host) -> list[str]:
    """Return the key files :func:`existing_keys` looks for on ``host``, in its order (for messages)."""
    from fwman.platform.distro import read_distribution

    conf = _framework_key(host)
    out = [f"{conf.key} (framework.conf)"] if conf is not None else []
    if read_distribution(host).ubuntu:
        out.append(paths.SHIM_MOK_KEY)
    return [*out, paths.DKMS_MOK_KEY]


def existing_keys(host: Host) -> list[SigningKey]:
    """Return the Machine Owner Keys DKMS signs with on ``host`` whose key and certificate both exist, in DKMS's
    order of choice: framework.conf's, then (Ubuntu) shim-signed's MOK, then ``/var/lib/dkms/mok.key``."""
    from fwman.platform.distro import read_distribution

    candidates = [k for k in (_framework_key(host),) if k is not None]
    if read_distribution(host).ubuntu:
        candidates.append(SigningKey(paths.SHIM_MOK_KEY, paths.SHIM_MOK_CERT, "shim-signed"))
    candidates.append(SigningKey(paths.DKMS_MOK_KEY, paths.DKMS_MOK_CERT, "dkms"))
    out: list[SigningKey] = []
    for key in candidates:
        try:
            if key not in out and host.exists(key.key) and host.exists(key.cert):
                out.append(key)
        except NotRecordedError:
            continue
    return out


def reusable_key(host: Host) -> SigningKey | None:
    """Return the existing key to reuse: the first of :func:`existing_keys` that mokutil says is enrolled, else
    the first one (enrollment unknown or pending: the owner enrolls it once); None when there is none."""
    from fwman.driver.kmod.mok import cert_fingerprint, key_enrollment

    found = existing_keys(host)
    for key in found:
        try:
            state = key_enrollment(host, key.cert, cert_fingerprint(host.read_bytes(key.cert)))
        except MissingError:
            continue
        if state == "enrolled":
            return key
    return found[0] if found else None


def keygen_plan(host: Host, *, reuse_dkms: bool = False, force: bool = False) -> list[str]:
    """Return what :func:`keygen` would write (``keygen --dry-run``); change nothing.

    Raises UsageError when a key is already configured and ``force`` is not set, MissingError when
    ``reuse_dkms`` is asked but no key DKMS signs with exists (:func:`existing_keys`).
    """
    if host.exists(paths.SIGNING_CONFIG) and not force:
        raise UsageError(
            f"a signing key is already configured ({paths.SIGNING_CONFIG})",
            hint="pass --force to replace it (the new certificate must be enrolled with mokutil again)",
        )
    record = f"write {paths.SIGNING_CONFIG} (the key fwman signs modules with)"
    if reuse_dkms:
        found = _reused(host)
        return [f"use DKMS's key {found.key} and certificate {found.cert} ({found.origin})", record]
    return [f"create {paths.SIGNING_KEY_DIR}/mok.key and mok.der (a new signing key and certificate)", record]


def _reused(host: Host) -> SigningKey:
    """Return the key ``--reuse-dkms`` adopts (:func:`reusable_key`). Raises MissingError when there is none."""
    found = reusable_key(host)
    if found is None:
        raise MissingError(
            f"DKMS has no signing key ({', '.join(searched_locations(host))})",
            hint="run `fwman modules keygen` without --reuse-dkms to create one",
        )
    return found


def keygen(host: Host, *, reuse_dkms: bool = False, force: bool = False) -> SigningKey:
    """Create (or adopt DKMS's) signing key, record it, and return it.

    Raises UsageError when a key is already configured and ``force`` is not set, MissingError when
    ``reuse_dkms`` is asked but no key DKMS signs with exists (:func:`existing_keys`).
    """
    keygen_plan(host, reuse_dkms=reuse_dkms, force=force)  # raises what refuses it
    if reuse_dkms:
        chosen = _reused(host)
    else:
        key_pem, cert_der = generate_key()
        host.mkdir(paths.SIGNING_KEY_DIR, mode=0o700)
        host.write_bytes(f"{paths.SIGNING_KEY_DIR}/mok.key", key_pem, mode=0o600)
        host.write_bytes(f"{paths.SIGNING_KEY_DIR}/mok.der", cert_der, mode=0o644)
        chosen = SigningKey(f"{paths.SIGNING_KEY_DIR}/mok.key", f"{paths.SIGNING_KEY_DIR}/mok.der", "fwman")
    doc = {"key": chosen.key, "cert": chosen.cert, "origin": chosen.origin}
    host.write_bytes(paths.SIGNING_CONFIG, (json.dumps(doc, indent=2) + "\n").encode(), mode=0o600)
    return chosen


def sign_for_kernel(host: Host, kver: str, modules: dict[str, bytes], key: SigningKey) -> tuple[dict[str, bytes], str]:
    """Return (``modules`` signed with ``key`` for kernel ``kver``, the hash used)."""
    hash_name = kernel_sig_hash(host, kver)
    key_pem = host.read_bytes(key.key)
    cert = host.read_bytes(key.cert)
    return {name: sign_module(data, key_pem, cert, hash_name) for name, data in modules.items()}, hash_name
