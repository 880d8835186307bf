"""The reader of ``osslsigncode verify``'s output and the signer check (the real tool runs in
tests/system/test_signed_package.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fwman.core.errors import ParseError, VerificationError
from fwman.firmware.catalog.schema import BoardInfo, parse_subject
from fwman.firmware.ops.authenticode import SignerCert, parse_verify_output, signer_certificate

# what osslsigncode 2.9 printed for a good signature (tests/system/test_signed_package.py's chain), trimmed of
# the lines fwman does not read
GOOD = """PE checksum   : 00003112

Signature Index: 0  (Primary Signature)

Message digest algorithm  : SHA256
Current message digest    : 1752111807F79A85FB78740F6E38C713919B760D7B8EB27E14655650BEDA6E6C
Calculated message digest : 1752111807F79A85FB78740F6E38C713919B760D7B8EB27E14655650BEDA6E6C

Signer's certificate:
\t------------------
\tSigner #0:
\t\tSubject: /C=US/O=Example Board Maker Inc./CN=Example Board Maker Inc.
\t\tIssuer : /CN=fwman test root
\t\tSerial : 1077C687208E0C747C83F5E4FD304530098ED9B3
\t\tCertificate expiration date:
\t\t\tnotBefore : Dec  6 05:21:21 2026 GMT
\t\t\tnotAfter : Dec 16 05:21:21 2026 GMT

Timestamp is not available

Signing certificate chain verified using:
\t------------------
\tSigner #1:
\t\tSubject: /CN=fwman test root
\t\tIssuer : /CN=fwman test root
\t\tSerial : 7581CD840E290C836F19B362CE93C8E492B987

Signature verification: ok

Number of verified signatures: 1
Succeeded
"""


def test_a_good_signature_names_its_signer_only_from_the_signers_block() -> None:
    report = parse_verify_output(GOOD)
    assert report.failure() is None
    assert report.signers == (
        SignerCert(
            "/C=US/O=Example Board Maker Inc./CN=Example Board Maker Inc.",
            "/CN=fwman test root",
            "1077C687208E0C747C83F5E4FD304530098ED9B3",
        ),
    )  # the chain's root (Signer #1 of "verified using") is not a signer


def test_each_failure_is_told_in_words() -> None:
    mismatch = GOOD.replace("BEDA6E6C\n\nSigner", "BEDA6E6C     MISMATCH!!!\n\nSigner")
    assert "changed after it was signed" in (parse_verify_output(mismatch).failure() or "")
    expired = GOOD.replace(
        "Signature verification: ok", "\tError: certificate has expired\nSignature verification: failed"
    )
    assert parse_verify_output(expired.replace("Succeeded", "Failed")).failure() == (
        "the signing certificate chain does not verify: certificate has expired"
    )
    assert "no Authenticode signature" in (parse_verify_output("No signature found\nFailed\n").failure() or "")
    # "Succeeded" alone is not enough: every signature's verification must say ok
    assert parse_verify_output(GOOD.replace("verification: ok", "verification: failed")).failure() is not None
    assert parse_verify_output(GOOD.replace("Succeeded", "Failed")).failure() is not None


def test_a_cut_signer_block_is_a_parse_error() -> None:
    cut = GOOD.replace("\t\tSerial : 1077C687208E0C747C83F5E4FD304530098ED9B3\n", "")
    with pytest.raises(ParseError, match="without Serial"):
        parse_verify_output(cut)


@given(st.text(alphabet=st.sampled_from(list("\t :#/\nSignerSubjectIssuerSerialErrorOKokSucceeded's-=")), max_size=400))
def test_any_output_gives_a_report_or_a_parse_error(text: str) -> None:
    try:
        report = parse_verify_output(text)
    except ParseError:
        return
    assert report.failure() is None or isinstance(report.failure(), str)


@given(st.text(max_size=300))
def test_any_text_gives_a_report_or_a_parse_error(text: str) -> None:
    try:
        parse_verify_output(text)
    except ParseError:
        pass


def test_subjects_are_compared_as_names_not_text() -> None:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    # RFC 4514 lists the attributes last-first; the certificate holds them C, O, CN: equal as names
    in_certificate = x509.Name(
        [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "EVGA"),
         x509.NameAttribute(NameOID.COMMON_NAME, "EVGA")]
    )  # fmt: skip
    assert parse_subject("CN=EVGA,O=EVGA,C=US") == in_certificate
    assert parse_subject("CN=EVGA,C=US") != parse_subject("CN=EVGA,C=TW")
    with pytest.raises(ValueError):
        BoardInfo(name="b", maker="m", package_signers=["not a name"])


def test_a_signature_that_is_not_pkcs7_is_a_verification_error() -> None:
    with pytest.raises(VerificationError, match="PKCS#7"):
        signer_certificate(b"\x30\x03\x02\x01\x01", SignerCert("s", "i", "01"))


def _signed_shape(der: bytes, *, cert_type: int = 2, entries: int = 1) -> bytes:
    """Return a PE (fixtures.packages.pe_stub, PE32+) with ``der`` in its attribute certificate table."""
    import struct

    from fixtures.packages import pe_stub

    pe = bytearray(pe_stub(b"body"))
    table = len(pe)
    entry = struct.pack("<IHH", 8 + len(der), 0x0200, cert_type) + der
    entry += b"\0" * (-len(entry) % 8)
    blob = entry * entries
    directory = 0x80 + 24 + 112 + 8 * 4  # e_lfanew 0x80, COFF header, PE32+ data directories, entry 4
    struct.pack_into("<II", pe, directory, table, len(blob))
    return bytes(pe) + blob


def test_the_signature_is_read_from_the_one_certificate_table_entry() -> None:
    from fwman.firmware.ops.authenticode import pe_signature

    der = b"\x30\x03\x02\x01\x07"
    assert pe_signature(_signed_shape(der)) == der
    with pytest.raises(ParseError, match="more than one certificate entry"):
        pe_signature(_signed_shape(der, entries=2))
    with pytest.raises(ParseError, match="not PKCS#7 SignedData"):
        pe_signature(_signed_shape(der, cert_type=1))
    from fixtures.packages import pe_stub

    with pytest.raises(ParseError, match="not signed"):
        pe_signature(pe_stub(b"body"))


@given(st.binary(max_size=2048))
def test_any_bytes_give_a_signature_or_a_parse_error(data: bytes) -> None:
    from fwman.firmware.ops.authenticode import pe_signature

    try:
        pe_signature(b"MZ" + data)
    except ParseError:
        pass


@given(st.data())
def test_a_signed_shape_with_any_byte_changed_in_its_headers_gives_a_signature_or_a_parse_error(
    data: st.DataObject,
) -> None:
    from fwman.firmware.ops.authenticode import pe_signature

    shape = bytearray(_signed_shape(b"\x30\x03\x02\x01\x07"))
    at = data.draw(st.integers(0, 0x1C0))
    shape[at] = data.draw(st.integers(0, 255))
    try:
        pe_signature(bytes(shape))
    except ParseError:
        pass


#: osslsigncode 2.5 (Debian 12) on a package whose chain ends at no trusted root, its closing lines as printed
#: (this machine, 2026-12-06; the signer block as in the 2.x outputs above)
OSSLSIGNCODE_25_UNTRUSTED = """\
Signer's certificate:
\tSigner #0:
\t\tSubject: /CN=EVGA Corporation test signer
\t\tIssuer : /CN=fwman test root
\t\tSerial : 3A09E8C20583BEB390FE03868E26BBE907F0484A
\t\tCertificate expiration date:
\t\t\tnotBefore : Dec  5 06:23:43 2026 GMT
\t\t\tnotAfter : Dec 16 06:23:43 2026 GMT

CAfile: /etc/ssl/certs/ca-certificates.crt
TSA's certificates file: /etc/ssl/certs/ca-certificates.crt

Timestamp is not available


PKCS7_verify error
40F99AF5197F0000:error:10800075:PKCS7 routines:PKCS7_verify:certificate verify error:\
../crypto/pkcs7/pk7_smime.c:291:Verify error: unable to get local issuer certificate
Signature verification: failed

Number of verified signatures: 1
Failed
"""


def test_osslsigncode_2_5_s_openssl_error_line_names_the_chain_failure() -> None:
    report = parse_verify_output(OSSLSIGNCODE_25_UNTRUSTED)
    assert not report.succeeded
    assert report.chain_errors == ("unable to get local issuer certificate",)
    assert report.signers[0].serial == "3A09E8C20583BEB390FE03868E26BBE907F0484A"
