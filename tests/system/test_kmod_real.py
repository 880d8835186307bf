"""Real kernel modules: tinymod built against the Debian headers, signed with the kernel's own sign-file.

Needs the headers of KERNEL_OK (tests/support/kernels.py) and its linux-kbuild-6.1 for sign-file, make, gcc,
openssl, kmod, xz, zstd: `make test` installs them as root; elsewhere these tests skip (under CI they fail).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from fwman.core.errors import ParseError
from fwman.driver.kmod.depmod import resolve_module
from fwman.driver.kmod.kofile import read_module, read_module_file
from fwman.host.live import LiveHost
from tests.support.env import FIXTURES, FwmanEnv
from tests.support.modules import KERNEL_OK
from tests.support.tools import missing, require_tools

pytestmark = pytest.mark.system

KVER = KERNEL_OK  # the installed kernel whose headers the stand-in tree builds against
SIGN_FILE = Path("/usr/lib/linux-kbuild-6.1/scripts/sign-file")


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass
class Built:
    """The real modules this file works on."""

    plain: Path
    signed: Path | None = None
    serial: str | None = None  # the signing certificate's serial, as openssl prints it (hex)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Build tinymod (version 570.86.16) for KVER, and a copy signed with a fresh key by sign-file."""
    require_tools("make", "gcc", "openssl")
    if not Path(f"/lib/modules/{KVER}/build/Makefile").exists():
        missing(f"needs linux-headers-{KVER}")
    work = tmp_path_factory.mktemp("tinymod")
    src = work / "src"
    shutil.copytree(FIXTURES / "tinymod", src, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    # Debian splits headers: /lib/modules/KVER/build is the arch tree and finds the common one itself
    subprocess.run(
        ["make", "-s", "-C", f"/lib/modules/{KVER}/build", f"M={src}", "TINYMOD_VERSION=570.86.16", "modules"],
        check=True,
        capture_output=True,
    )
    ko = src / "tinymod.ko"
    assert ko.exists()
    out = Built(plain=ko)
    if SIGN_FILE.exists():
        key, cert = work / "key.pem", work / "cert.pem"
        subprocess.run(
            [
                "openssl",
                "req",
                "-new",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "30",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-subj",
                "/CN=fwman test module key/O=fwman tests",
            ],
            check=True,
            capture_output=True,
        )
        signed = work / "signed.ko"
        shutil.copy(ko, signed)
        subprocess.run([str(SIGN_FILE), "sha256", str(key), str(cert), str(signed)], check=True, capture_output=True)
        serial = (
            subprocess.run(
                ["openssl", "x509", "-in", str(cert), "-noout", "-serial"], check=True, capture_output=True, text=True
            )
            .stdout.strip()
            .split("=", 1)[1]
        )
        out.signed, out.serial = signed, serial
    return out


def test_real_module_modinfo(built: Built) -> None:
    info = read_module(built.plain.read_bytes())
    assert info.name == "tinymod"
    assert info.version == "570.86.16"
    assert info.kernel_release == KVER
    assert info.vermagic is not None and info.vermagic.startswith(f"{KVER} SMP")
    assert info.license == "Dual MIT/GPL"
    assert sorted(info.firmware) == ["nvidia/570.86.16/gsp_ga10x.bin", "nvidia/570.86.16/gsp_tu10x.bin"]
    assert info.signature is None
    # the same fields as kmod's modinfo reads them
    modinfo = subprocess.run(
        [_tool("modinfo"), "-F", "srcversion", str(built.plain)], check=True, capture_output=True, text=True
    )
    assert info.srcversion == modinfo.stdout.strip()


def test_real_sign_file_signer(built: Built) -> None:
    if built.signed is None:
        missing(f"needs {SIGN_FILE} (Debian package linux-kbuild-6.1)")
    info = read_module(built.signed.read_bytes())
    assert built.serial is not None
    sig = info.signature
    assert sig is not None
    assert sig.id_type == "PKCS#7"
    assert sig.signer == "fwman test module key"
    assert sig.issuer == "CN=fwman test module key, O=fwman tests"
    assert sig.hash_algorithm == "sha256"
    expected = built.serial.lstrip("0") or "0"
    got = sig.serial.replace(":", "").lstrip("0") if sig.serial else None
    assert got == expected
    assert sig.offset == built.plain.stat().st_size  # the ELF is untouched, the signature appended
    assert info.version == "570.86.16"


def test_corrupt_truncated_and_non_elf_real_module(built: Built) -> None:
    data = built.plain.read_bytes()
    with pytest.raises(ParseError, match="truncated"):
        read_module(data[: len(data) // 2])
    with pytest.raises(ParseError, match="not an ELF file"):
        read_module(b"MZ" + data[2:])
    if built.signed is not None:
        signed = bytearray(built.signed.read_bytes())
        signed[-40] ^= 0xFF  # inside struct module_signature's sig_len
        with pytest.raises(ParseError, match="module_signature"):
            read_module(bytes(signed))


def test_compressed_real_modules_and_real_depmod(built: Built, tmp_path: Path) -> None:
    require_tools("depmod", "xz", "zstd")
    mods = tmp_path / "lib/modules" / KVER
    (mods / "kernel/drivers/video").mkdir(parents=True)
    (mods / "updates/dkms").mkdir(parents=True)
    (mods / "updates/fwman").mkdir(parents=True)
    source = built.signed or built.plain
    shutil.copy(built.plain, mods / "kernel/drivers/video/nvidia.ko")
    shutil.copy(built.plain, mods / "updates/dkms/nvidia.ko")
    subprocess.run(["xz", "-k", "--check=crc32", str(mods / "updates/dkms/nvidia.ko")], check=True)
    (mods / "updates/dkms/nvidia.ko").unlink()
    shutil.copy(source, mods / "updates/fwman/nvidia.ko")
    subprocess.run(["zstd", "-q", "--rm", str(mods / "updates/fwman/nvidia.ko")], check=True)
    conf = tmp_path / "etc/depmod.d"
    conf.mkdir(parents=True)
    host = LiveHost(str(tmp_path))
    # default order: updates/ beats kernel/; the two updates/ files tie, so pin one with an override
    (conf / "fwman.conf").write_text("override nvidia * updates/fwman\n")
    subprocess.run([_tool("depmod"), "-b", str(tmp_path), "-C", str(conf), KVER], check=True, capture_output=True)
    real = subprocess.run(
        [_tool("modinfo"), "-b", str(tmp_path), "-k", KVER, "-F", "filename", "nvidia"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = resolve_module(host, KVER, "nvidia")
    assert ours == f"/lib/modules/{KVER}/updates/fwman/nvidia.ko.zst"
    assert real == str(tmp_path) + ours
    info = read_module_file(host, ours)
    assert info.version == "570.86.16"
    assert (info.signature is not None) == (built.signed is not None)
    assert read_module_file(host, f"/lib/modules/{KVER}/updates/dkms/nvidia.ko.xz").srcversion == info.srcversion


def test_audit_reads_real_modules(built: Built, tmp_path: Path) -> None:
    root = tmp_path / "root"
    mods = root / "lib/modules" / KVER / "updates/fwman"
    mods.mkdir(parents=True)
    shutil.copy(built.signed or built.plain, mods / "nvidia.ko")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text(KVER + "\n")
    r = FwmanEnv()("audit", "--root", str(root), "--offline", "--json")
    doc = r.json()
    (nv,) = doc["modules"]
    assert nv["version"] == "570.86.16" and nv["kernel_release"] == KVER and nv["origin"] == "unknown"
    if built.signed is not None:
        assert nv["signer"] == "fwman test module key"
    assert doc["reference"] == "570.86.16"
    assert os.path.basename(nv["path"]) == "nvidia.ko"
