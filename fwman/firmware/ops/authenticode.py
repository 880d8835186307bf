"""A board maker's signed Windows update program as the provenance of the image inside it.

Most board makers publish no hash of their firmware, but their update programs are PE files with an Authenticode
signature. fwman has Debian's ``osslsigncode`` check that signature (``osslsigncode verify``: the PE digest, the PKCS#7
signature, the certificate chain up to the roots this host trusts, the timestamp when there is one), then compares the
signing certificate's subject with the subjects the catalog records for the board (``[board] package_signers``). Only a
package that passes both vouches for the image found inside it.

Why ``osslsigncode`` and not a Python library: it is a Debian package (security updates come with the distribution), it
implements the whole of Authenticode (page hashes, nested signatures, timestamps, the chain through OpenSSL), and the
one Python library that does (``signify``) is not among fwman's dependencies. Its text output is read by
:func:`parse_verify_output` (pure); the signer's certificate is then read, by the serial number osslsigncode names, from
the PKCS#7 in the PE's certificate table (:func:`pe_signature`, pure: the one entry osslsigncode verified), and compared
as an X.509 name (``cryptography``), never as text.

The package bytes fwman read (and hashed) are what is verified: a private copy in a scratch directory, as the unpacker
gets (:mod:`fwman.firmware.ops.unpack`). The trusted roots are ``/etc/fwman/authenticode-roots.pem`` when an
administrator keeps one, else Debian's ``/etc/ssl/certs/ca-certificates.crt`` (read through the Host: under ``--root``
the test root's). CRLs are not fetched where osslsigncode can be told so (``-ignore-cdp``, osslsigncode 2.8 and later,
NEWS.md): fwman makes no network request the owner did not ask for; revocation is therefore not checked (docs/fetch.md
says so). Debian 12 ships osslsigncode 2.5, which has no such option (its ``verify`` help lists none): fwman asks the
tool's help and passes the option only where it is offered."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from fwman.core import paths
from fwman.core.errors import MissingError, ParseError, VerificationError
from fwman.core.jsonout import meta
from fwman.firmware.catalog.schema import Board, parse_subject
from fwman.firmware.ops.unpack import scratch_dir
from fwman.host.base import Host

#: osslsigncode gets this long to verify a package (a 256 MiB package hashes in seconds)
VERIFY_TIMEOUT = 120.0
#: the Debian package that provides the verifier
PACKAGE = "osslsigncode"
#: the most of osslsigncode's output that is read
_MAX_OUTPUT = 1 << 20

_SIGNER = re.compile(r"^\s*Signer #(\d+):\s*$")
# no lazy group before trailing blanks (a backtracking shape, tests/adversarial/test_long_lines.py): strip instead
_FIELD = re.compile(r"^\s*(Subject|Issuer|Serial)\s*:(.*)$")
_ERROR = re.compile(r"^\s*Error:(.*)$")
#: osslsigncode 2.5 (Debian 12) reports a chain failure as OpenSSL's error line, e.g. ``...:PKCS7_verify:certificate
#: verify error:../crypto/pkcs7/pk7_smime.c:291:Verify error: unable to get local issuer certificate``
_OPENSSL_VERIFY = re.compile(r":Verify error: ?(.+)$")
#: the option that keeps osslsigncode from fetching CRLs (2.8 and later); where ``verify``'s help lists it
IGNORE_CDP = "-ignore-cdp"


@dataclass(frozen=True)
class SignerCert:
    """A certificate osslsigncode names: its subject and issuer as it prints them (OpenSSL's one-line form) and
    its serial number (upper-case hex)."""

    subject: str
    issuer: str
    serial: str


@dataclass(frozen=True)
class VerifyReport:
    """What ``osslsigncode verify`` said about a file."""

    #: the last line is ``Succeeded`` and every signature's verification says ``ok``
    succeeded: bool
    #: the signing certificate of each signature, primary first (the ``Signer's certificate:`` blocks)
    signers: tuple[SignerCert, ...] = ()
    #: a message digest line ended in ``MISMATCH``: the file changed after it was signed
    digest_mismatch: bool = False
    #: the file holds no signature at all
    unsigned: bool = False
    #: OpenSSL's chain errors (``Error: certificate has expired``), in order, without repeats
    chain_errors: tuple[str, ...] = ()
    #: ``Signature verification: ok|failed`` lines, in order
    verifications: tuple[str, ...] = field(default_factory=tuple)

    def failure(self) -> str | None:
        """Return why the signature does not hold, in words for the owner, or None when it holds."""
        if self.unsigned:
            return "the file carries no Authenticode signature"
        if self.digest_mismatch:
            return "the file was changed after it was signed (its digest does not match the signed one)"
        if self.chain_errors:
            return f"the signing certificate chain does not verify: {'; '.join(self.chain_errors)}"
        if not self.succeeded:
            return "the signature does not verify"
        if not self.signers:
            return "osslsigncode named no signing certificate"
        return None


def parse_verify_output(text: str) -> VerifyReport:
    """Return what ``osslsigncode verify`` (2.x) printed in ``text`` (its stdout and stderr together).

    Reads only lines osslsigncode prints in every 2.x release seen (``Signer's certificate:`` blocks, ``Error:``
    lines, ``MISMATCH``, ``Signature verification:``, the final ``Succeeded``/``Failed``); anything else is
    ignored. Raises ParseError when a ``Signer #N`` block lacks its subject, issuer or serial (a cut or unknown
    output), never another exception.
    """
    lines = text.splitlines()
    signers: list[SignerCert] = []
    errors: list[str] = []
    verifications: list[str] = []
    mismatch = unsigned = in_signer_section = False
    block: dict[str, str] | None = None

    def close() -> None:
        nonlocal block
        if block is not None and in_signer_section:
            missing = [k for k in ("Subject", "Issuer", "Serial") if k not in block]
            if missing:
                raise ParseError("osslsigncode verify", "signer", f"a signer block without {', '.join(missing)}")
            signers.append(SignerCert(block["Subject"], block["Issuer"], block["Serial"].upper()))
        block = None

    for line in lines:
        stripped = line.strip()
        if stripped == "Signer's certificate:":
            close()
            in_signer_section = True
            continue
        if _SIGNER.match(line):
            close()
            block = {}
            continue
        if (m := _FIELD.match(line)) and block is not None:
            block.setdefault(m.group(1), m.group(2).strip())
            continue
        if stripped.startswith(("Certificate expiration date", "notBefore", "notAfter", "---")):
            continue
        # any other line ends a block, and a blank line or a new heading ends the signer section
        close()
        if in_signer_section and (not stripped or not line.startswith(("\t", " "))):
            in_signer_section = False
        if "MISMATCH" in stripped:
            mismatch = True
        if stripped in ("No signature found", "Unable to extract existing signature"):
            unsigned = True
        m = _ERROR.match(line) or _OPENSSL_VERIFY.search(line)
        if m and (error := m.group(1).strip()) and error not in errors:
            errors.append(error)
        if stripped.startswith("Signature verification:"):
            verifications.append(stripped.split(":", 1)[1].strip())
    close()
    last = next((s.strip() for s in reversed(lines) if s.strip()), "")
    succeeded = last == "Succeeded" and bool(verifications) and all(v == "ok" for v in verifications)
    return VerifyReport(succeeded, tuple(signers), mismatch, unsigned, tuple(errors), tuple(verifications))


@dataclass(frozen=True)
class SignedPackage:
    """A package whose signature verified and whose signer the catalog records for its board."""

    maker: str
    #: the signing certificate's subject, RFC 4514 (``CN=...,O=...,C=US``)
    subject: str
    issuer: str
    serial: str = field(metadata=meta(key="certificate_serial"))  # JSON (``signed_package`` of fwman.fetch/2)
    #: the SHA-256 of the package bytes that were verified
    package_sha256: str

    @property
    def provenance(self) -> str:
        """Return the words every output and the history use: ``extracted from a package signed by <maker>``."""
        return f"extracted from a package signed by {self.maker} ({self.subject})"


def trusted_roots(host: Host) -> tuple[str, bytes]:
    """Return (path, PEM bytes) of the roots a signed package must chain to on ``host``.

    ``/etc/fwman/authenticode-roots.pem`` when it exists (an administrator's choice), else Debian's
    ``/etc/ssl/certs/ca-certificates.crt``. Raises MissingError (exit 5) when neither exists.
    """
    for path in (paths.AUTHENTICODE_ROOTS, paths.SYSTEM_CA_BUNDLE):
        try:
            if host.exists(path):
                return path, host.read_bytes(path, limit=16 << 20)
        except MissingError:
            continue
    raise MissingError(
        f"no trusted roots for signed update programs: neither {paths.AUTHENTICODE_ROOTS} nor "
        f"{paths.SYSTEM_CA_BUNDLE} exists",
        hint="install Debian's ca-certificates (apt-get install ca-certificates), or put the roots you trust "
        f"into {paths.AUTHENTICODE_ROOTS}",
    )


#: PE/COFF (Microsoft's "PE Format", "The Attribute Certificate Table (Image Only)"): the optional header's data
#: directory 4 (IMAGE_DIRECTORY_ENTRY_SECURITY) holds a *file offset* (not an RVA) and the table's size; each
#: entry is WIN_CERTIFICATE {u32 dwLength, u16 wRevision, u16 wCertificateType, bCertificate}, 8-byte aligned;
#: wCertificateType 0x0002 (WIN_CERT_TYPE_PKCS_SIGNED_DATA) holds the Authenticode PKCS#7 SignedData
_PE_MAGIC_DIRECTORIES = {0x10B: 96, 0x20B: 112}  # PE32 / PE32+: where the data directories start
_SECURITY_DIRECTORY = 4
_WIN_CERT_TYPE_PKCS_SIGNED_DATA = 0x0002
_WIN_CERTIFICATE_HEADER = 8


def pe_signature(data: bytes) -> bytes:
    """Return the PKCS#7 SignedData (DER) of the PE file ``data``: the one WIN_CERTIFICATE of its attribute
    certificate table, which is what ``osslsigncode verify`` verifies.

    Raises ParseError (naming the field) when ``data`` is not a PE with exactly one PKCS#7 certificate entry: none,
    a pointer or length outside the file, another certificate type, or several entries (fwman would not know which
    one osslsigncode checked). Never another exception.
    """
    what = "PE signature"

    def uint(off: int, field: str, size: int = 4) -> int:
        if off < 0 or off + size > len(data):
            raise ParseError(what, field, "outside the file", off)
        return int.from_bytes(data[off : off + size], "little")

    if data[:2] != b"MZ":
        raise ParseError(what, "dos_header", "not a PE file (no MZ)", 0)
    pe = uint(0x3C, "e_lfanew")
    if data[pe : pe + 4] != b"PE\0\0":
        raise ParseError(what, "pe_signature", "no PE\\0\\0 where e_lfanew points", pe)
    optional = pe + 24
    magic = uint(optional, "optional_header.magic", 2)
    if magic not in _PE_MAGIC_DIRECTORIES:
        raise ParseError(what, "optional_header.magic", f"0x{magic:X} is neither PE32 nor PE32+", optional)
    count = uint(optional + _PE_MAGIC_DIRECTORIES[magic] - 4, "optional_header.number_of_rva_and_sizes")
    if count <= _SECURITY_DIRECTORY:
        raise ParseError(what, "data_directory[4]", "the file has no certificate table entry", optional)
    entry = optional + _PE_MAGIC_DIRECTORIES[magic] + 8 * _SECURITY_DIRECTORY
    table, size = uint(entry, "certificate_table.offset"), uint(entry + 4, "certificate_table.size")
    if table == 0 or size == 0:
        raise ParseError(what, "certificate_table", "the file is not signed (no certificate table)", entry)
    if table + size > len(data) or size < _WIN_CERTIFICATE_HEADER:
        raise ParseError(what, "certificate_table", f"{size} bytes at 0x{table:X} run past the file", entry)
    length = uint(table, "win_certificate.dwLength")
    kind = uint(table + 6, "win_certificate.wCertificateType", 2)
    if kind != _WIN_CERT_TYPE_PKCS_SIGNED_DATA:
        raise ParseError(what, "win_certificate.wCertificateType", f"0x{kind:04X}, not PKCS#7 SignedData", table)
    if length < _WIN_CERTIFICATE_HEADER or length > size:
        raise ParseError(what, "win_certificate.dwLength", f"{length} does not fit the {size}-byte table", table)
    if (length + 7) & ~7 < size:
        raise ParseError(what, "certificate_table", "more than one certificate entry", table + length)
    body = data[table + _WIN_CERTIFICATE_HEADER : table + length]
    return body[: _der_length(body, table + _WIN_CERTIFICATE_HEADER)]  # signers pad the entry to 8 bytes


def _der_length(body: bytes, offset: int) -> int:
    """Return the length of the DER SEQUENCE that opens ``body`` (tag, length and contents). Raises ParseError
    when it is not a SEQUENCE or its length runs past ``body``."""
    if len(body) < 2 or body[0] != 0x30:
        raise ParseError("PE signature", "win_certificate.bCertificate", "not a DER SEQUENCE", offset)
    first = body[1]
    if first < 0x80:
        head, size = 2, first
    else:
        count = first & 0x7F
        if not 1 <= count <= 4 or len(body) < 2 + count:
            raise ParseError("PE signature", "win_certificate.bCertificate", "a DER length fwman does not read", offset)
        head, size = 2 + count, int.from_bytes(body[2 : 2 + count], "big")
    if head + size > len(body):
        raise ParseError("PE signature", "win_certificate.bCertificate", "the DER runs past the entry", offset)
    return head + size


def signer_certificate(pkcs7_der: bytes, signer: SignerCert) -> Any:
    """Return the ``cryptography`` certificate in ``pkcs7_der`` (the extracted signature) that ``signer`` names.

    The certificate is found by its serial number; exactly one certificate of the signature may carry it (a
    second one with the same serial could be a planted look-alike: refused). Raises VerificationError when the
    signature cannot be read or the certificate is not there exactly once.
    """
    # cryptography is heavy: `upgrade --dry-run` loads this module (through fetch) and never checks a signature
    from cryptography.hazmat.primitives.serialization import pkcs7

    try:
        certs = pkcs7.load_der_pkcs7_certificates(pkcs7_der)
    except ValueError as e:
        raise VerificationError(f"the package's signature cannot be read as PKCS#7: {e}") from e
    try:
        serial = int(signer.serial, 16)
    except ValueError as e:
        raise VerificationError(f"osslsigncode named a signer serial that is not hex: {signer.serial!r}") from e
    found = [c for c in certs if c.serial_number == serial]
    if len(found) != 1:
        raise VerificationError(
            f"the signature holds {len(found)} certificates with the signer's serial {signer.serial}, not one"
        )
    return found[0]


def check_signer(subject_name: Any, board: Board) -> str | None:
    """Return the catalog's recorded subject (RFC 4514) that ``subject_name`` (an ``x509.Name``) is, or None."""
    for recorded in board.board.package_signers:
        if parse_subject(recorded) == subject_name:
            return recorded
    return None


def offers_ignore_cdp(runner: Host, exe: str) -> bool:
    """Return True when this osslsigncode's ``verify`` help lists ``-ignore-cdp`` (2.8 and later; Debian 12's 2.5
    has none, and refuses an option it does not know)."""
    result = runner.run([exe, "verify", "--help"], timeout=30)
    return IGNORE_CDP in result.stdout + result.stderr


def verify_package(host: Host, runner: Host, raw: bytes, board: Board, label: str) -> SignedPackage:
    """Return the signer of update package ``raw`` when its Authenticode signature holds and names a signer the
    catalog records for ``board``.

    ``host`` is the Host the trusted roots are read from (under ``--root``, the test root's); ``runner`` runs
    ``osslsigncode`` on this machine (the package is a file the user has here). ``label`` names the file in
    messages. Raises MissingError (exit 5) when osslsigncode or the roots are missing, VerificationError (exit
    4) when the signature does not hold (a changed byte, an untrusted or expired chain, no signature) or the
    signer is not one the catalog records; nothing is written outside the scratch directory.
    """
    exe = runner.which("osslsigncode")
    if exe is None:
        raise MissingError(
            "osslsigncode is not installed: the update program's signature cannot be checked",
            hint=f"apt-get install {PACKAGE}",
        )
    roots_path, roots = trusted_roots(host)
    with scratch_dir(runner) as scratch:
        package = f"{scratch}/package.exe"
        runner.write_bytes(package, raw, mode=0o600)
        # the roots file itself where it is a real file on this machine (also under --root); else a copy
        bundle = host.local_path(roots_path) or f"{scratch}/roots.pem"
        if bundle.startswith(f"{scratch}/"):
            runner.write_bytes(bundle, roots, mode=0o600)
        offline = [IGNORE_CDP] if offers_ignore_cdp(runner, exe) else []
        result = runner.run(
            [exe, "verify", "-CAfile", bundle, "-TSA-CAfile", bundle, *offline, "-in", package], timeout=VERIFY_TIMEOUT
        )
        report = parse_verify_output((result.stdout + "\n" + result.stderr)[-_MAX_OUTPUT:])
        why = report.failure() or (None if result.ok else f"osslsigncode verify exited {result.rc}")
        if why is not None:
            raise VerificationError(
                f"{label}: signature refused: {why} (roots: {roots_path})",
                hint="download the update program again from the card maker; nothing was kept",
            )
    # the signature osslsigncode verified, read from the same bytes (the one entry of the certificate table)
    der = pe_signature(raw)
    primary = report.signers[0]
    cert = signer_certificate(der, primary)
    recorded = check_signer(cert.subject, board)
    actual = cert.subject.rfc4514_string()
    if recorded is None:
        known = "; ".join(board.board.package_signers) or "none"
        raise VerificationError(
            f"{label}: signed by {actual}, not by a signer the catalog records for {board.board.maker} "
            f"({board.subsystem}: {known})",
            hint="this is not the board maker's update program for this card; nothing was kept",
        )
    return SignedPackage(board.board.maker, recorded, primary.issuer, primary.serial, hashlib.sha256(raw).hexdigest())
