"""`fwman modules keygen --reuse-dkms` finds the key DKMS signs with: framework.conf's, Ubuntu's shim-signed MOK
(made here the way shim-signed's update-secureboot-policy makes it: the real openssl, its options and the
extensions of its /usr/lib/shim/mok/openssl.cnf, docs/ubuntu.md), or /var/lib/dkms/mok.key."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from fixtures.tinymod.elfgen import build_module, nvidia_tags
from fwman.core import paths
from fwman.driver.kmod import sign
from fwman.driver.kmod.kofile import read_module
from fwman.host.live import LiveHost
from tests.support import ubuntu
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

#: the extensions shim-signed's openssl.cnf gives the MOK (codeSigning plus the kernel's module-signing OID)
MOK_CNF = """[ req ]
distinguished_name      = req_distinguished_name
x509_extensions         = v3_ca
string_mask             = utf8only

[ req_distinguished_name ]

[ v3_ca ]
subjectKeyIdentifier    = hash
authorityKeyIdentifier  = keyid:always,issuer
basicConstraints        = critical,CA:FALSE
extendedKeyUsage        = codeSigning,1.3.6.1.4.1.2312.16.1.2
"""


def _shim_mok(root: Path) -> None:
    """Write MOK.priv and MOK.der as update-secureboot-policy's create_mok does (openssl req ... -outform DER)."""
    require_tools("openssl")
    mok = root / paths.SHIM_MOK_KEY.lstrip("/")
    mok.parent.mkdir(parents=True)
    cnf = root / "mok.cnf"
    cnf.write_text(MOK_CNF)
    subprocess.run(
        [
            "openssl",
            "req",
            "-config",
            str(cnf),
            "-subj",
            "/CN=testhost Secure Boot Module Signature key",
            "-new",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "36500",
            "-outform",
            "DER",
            "-keyout",
            str(mok),
            "-out",
            str(root / paths.SHIM_MOK_CERT.lstrip("/")),
        ],
        check=True,
        capture_output=True,
    )


def test_ubuntu_reuses_shim_signed_mok_and_signs_with_it(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path / "root")
    _shim_mok(root)
    r = FwmanEnv(variables={"PATH": "/nonexistent"})("modules", "keygen", "--reuse-dkms", "--root", str(root))
    assert r.code == 0, r.stderr
    assert f"signing key:  {paths.SHIM_MOK_KEY}" in r.stdout and f"certificate:  {paths.SHIM_MOK_CERT}" in r.stdout
    record = json.loads((root / "var/lib/fwman/signing.json").read_text())
    assert record == {"key": paths.SHIM_MOK_KEY, "cert": paths.SHIM_MOK_CERT, "origin": "shim-signed"}
    host = LiveHost(str(root))
    key = sign.configured_key(host)
    assert key is not None
    kver = "6.8.0-149-generic"
    signed, _ = sign.sign_for_kernel(host, kver, {"nvidia": build_module(nvidia_tags("580.105.08", kver))}, key)
    info = read_module(signed["nvidia"])
    assert info.signature is not None and info.signature.signer == "testhost Secure Boot Module Signature key"


def test_framework_conf_key_comes_first_and_debian_never_looks_at_shim_signed(tmp_path: Path) -> None:
    root = ubuntu.ubuntu_root(tmp_path / "root")
    _shim_mok(root)
    k, c = sign.generate_key("own dkms key")
    (root / "srv/keys").mkdir(parents=True)
    (root / "srv/keys/k.pem").write_bytes(k)
    (root / "srv/keys/c.der").write_bytes(c)
    (root / "etc/dkms/framework.conf.d").mkdir(parents=True)
    (root / "etc/dkms/framework.conf").write_text("# mok_signing_key=/var/lib/dkms/mok.key\n")
    (root / "etc/dkms/framework.conf.d/keys.conf").write_text(
        'mok_signing_key="/srv/keys/k.pem"\nmok_certificate=/srv/keys/c.der\n'
    )
    host = LiveHost(str(root), env={"PATH": "/nonexistent"})
    assert [key.origin for key in sign.existing_keys(host)] == ["dkms-conf", "shim-signed"]
    assert sign.reusable_key(host) == sign.SigningKey("/srv/keys/k.pem", "/srv/keys/c.der", "dkms-conf")
    # a per-kernel key ($kernelver) is no file fwman can sign with: skipped
    (root / "etc/dkms/framework.conf.d/keys.conf").write_text(
        "mok_signing_key=/srv/$kernelver.pem\nmok_certificate=/c\n"
    )
    assert [key.origin for key in sign.existing_keys(host)] == ["shim-signed"]
    # on Debian, shim-signed's directory is no DKMS key (Debian's DKMS never uses it)
    (root / "usr/lib/os-release").write_text("ID=debian\nVERSION_CODENAME=trixie\n")
    assert sign.existing_keys(host) == []
    r = FwmanEnv(variables={"PATH": "/nonexistent"})("modules", "keygen", "--reuse-dkms", "--root", str(root))
    assert r.code == 5 and f"DKMS has no signing key ({paths.DKMS_MOK_KEY})" in r.stderr
