"""fwman's module signatures against the real tools: `openssl cms -verify` and the kernel's `sign-file`.

The module is a real nvidia-uvm.ko of the stand-in tree built for 6.1.0-50; the key comes from
`fwman modules keygen`. RSA PKCS#1 v1.5 is deterministic, so fwman's and sign-file's signatures over the same
module with the same key carry the same 256 signature bytes; the trailers have the same layout.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from fwman.driver.kmod.kofile import SIGNATURE_MAGIC, read_module, split_signature
from fwman.driver.kmod.sign import sign_module
from tests.support.modules import (
    KERNEL_OK,
    SOURCE,
    build_root,
    object_cache,  # noqa: F401  (fixture)
    require_build_env,
    run_fwman,
)
from tests.support.tools import missing, require_tools

pytestmark = pytest.mark.system

SIGN_FILE = Path("/usr/lib/linux-kbuild-6.1/scripts/sign-file")


def _blob(signed: bytes) -> bytes:
    _body, sig = split_signature(signed)
    assert sig is not None
    return signed[sig.offset : sig.offset + sig.sig_len]


def _verify(blob: bytes, content: bytes, cert_pem: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    (tmp / "sig.der").write_bytes(blob)
    (tmp / "content").write_bytes(content)
    return subprocess.run(
        [
            "openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", str(tmp / "sig.der"),
            "-content", str(tmp / "content"), "-certfile", str(cert_pem), "-CAfile", str(cert_pem),
            "-purpose", "any", "-out", "/dev/null",
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip


def test_openssl_verifies_and_sign_file_agrees(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK)
    require_tools("openssl")
    if not SIGN_FILE.exists():
        missing(f"needs {SIGN_FILE} (Debian package linux-kbuild-6.1)")
    module = object_cache.parents[3] / "lib/modules" / KERNEL_OK / "updates/fwman/nvidia-uvm.ko"
    body = module.read_bytes()
    assert split_signature(body)[1] is None

    root = tmp_path / "root"
    root.mkdir()
    code, out, err = run_fwman(root, "modules", "keygen")
    assert code == 0, out + err
    assert "mokutil --import /var/lib/fwman/signing/mok.der" in out
    key = root / "var/lib/fwman/signing/mok.key"
    cert_der = root / "var/lib/fwman/signing/mok.der"
    assert key.stat().st_mode & 0o777 == 0o600
    cert = x509.load_der_x509_certificate(cert_der.read_bytes())
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CODE_SIGNING in eku
    assert run_fwman(root, "modules", "keygen")[0] == 2  # refuses to replace without --force
    cert_pem = tmp_path / "cert.pem"
    subprocess.run(["openssl", "x509", "-inform", "DER", "-in", str(cert_der), "-out", str(cert_pem)], check=True)

    ours = sign_module(body, key.read_bytes(), cert_der.read_bytes(), "sha256")
    assert ours.startswith(body) and ours.endswith(SIGNATURE_MAGIC)
    ok = _verify(_blob(ours), body, cert_pem, tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "Verification successful" in ok.stderr
    tampered = _verify(_blob(ours), body[:-1] + bytes([body[-1] ^ 1]), cert_pem, tmp_path)
    assert tampered.returncode != 0

    theirs_path = tmp_path / "sign-file.ko"
    shutil.copy(module, theirs_path)
    subprocess.run([str(SIGN_FILE), "sha256", str(key), str(cert_der), str(theirs_path)], check=True)
    theirs = theirs_path.read_bytes()
    assert theirs.startswith(body)
    # struct module_signature: algo, hash, id_type, signer_len, key_id_len, pad[3], be32 sig_len
    fields = struct.Struct(">BBBBB3xI")
    tail = len(SIGNATURE_MAGIC) + fields.size
    ours_struct, theirs_struct = fields.unpack(ours[-tail:-28]), fields.unpack(theirs[-tail:-28])
    assert ours_struct[:5] == theirs_struct[:5] == (0, 0, 2, 0, 0)
    assert ours_struct[5] == len(_blob(ours)) and theirs_struct[5] == len(_blob(theirs))
    assert _blob(ours)[-256:] == _blob(theirs)[-256:]  # the same RSA signature value
    assert _verify(_blob(theirs), body, cert_pem, tmp_path).returncode == 0
    a, b = split_signature(ours)[1], split_signature(theirs)[1]
    assert a is not None and b is not None
    assert (a.id_type, a.serial, a.issuer, a.hash_algorithm) == (b.id_type, b.serial, b.issuer, b.hash_algorithm)
    # re-signing replaces the signature instead of stacking a second one
    assert split_signature(sign_module(ours, key.read_bytes(), cert_der.read_bytes(), "sha256"))[0] == body


def test_a_configured_key_signs_what_fwman_installs(tmp_path: Path, object_cache: Path) -> None:  # noqa: F811
    require_build_env(KERNEL_OK)
    require_tools("openssl")
    root = build_root(tmp_path, (KERNEL_OK,), object_cache)
    assert run_fwman(root, "modules", "keygen")[0] == 0
    code, out, err = run_fwman(root, "modules", "build", "--kernel", KERNEL_OK, "--source", SOURCE)
    assert code == 0, out + err
    manifest = json.loads((root / f"var/lib/fwman/modules/{KERNEL_OK}.json").read_text())
    assert manifest["signed"] == "sha256"  # CONFIG_MODULE_SIG_HASH of Debian's 6.1 headers
    cert_pem = tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "x509",
            "-inform",
            "DER",
            "-in",
            str(root / "var/lib/fwman/signing/mok.der"),
            "-out",
            str(cert_pem),
        ],
        check=True,
    )
    installed = (root / "lib/modules" / KERNEL_OK / "updates/fwman/nvidia.ko").read_bytes()
    info = read_module(installed)
    assert info.signature is not None and info.signature.hash_algorithm == "sha256"
    assert info.signature.signer == "fwman module signing key"
    body, _sig = split_signature(installed)
    assert _verify(_blob(installed), body, cert_pem, tmp_path).returncode == 0
    assert run_fwman(root, "modules", "check-boot")[0] == 0
