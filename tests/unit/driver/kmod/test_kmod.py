"""Reading .ko files: .modinfo tags, signature trailer and signer, compressed files, clear errors."""

from __future__ import annotations

import contextlib
import gzip
import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.tinymod.elfgen import build_module, make_signing_key, nvidia_tags, sign_module
from fwman.core.errors import ParseError, ToolMissingError
from fwman.driver.kmod.kofile import SIGNATURE_MAGIC, module_bytes, module_stem, read_module, read_module_file
from fwman.host.live import LiveHost
from tests.support.tools import missing

KERNEL = "6.1.0-50-amd64"


@pytest.fixture(scope="module")
def signing() -> tuple[object, object]:
    return make_signing_key()


@pytest.fixture(scope="module")
def plain() -> bytes:
    return build_module(nvidia_tags("570.86.16", KERNEL))


def test_reads_modinfo_fields(plain: bytes) -> None:
    info = read_module(plain)
    assert info.name == "nvidia"
    assert info.version == "570.86.16"
    assert info.vermagic == f"{KERNEL} SMP preempt mod_unload modversions"
    assert info.kernel_release == KERNEL
    assert info.srcversion == "0123456789ABCDEF0123456"
    assert info.license == "Dual MIT/GPL"
    assert info.firmware == ["nvidia/570.86.16/gsp_ga10x.bin", "nvidia/570.86.16/gsp_tu10x.bin"]
    assert info.tags["depends"] == [""]
    assert info.signature is None
    assert info.elf_class == 64


def test_reads_32_bit_and_big_endian_elf() -> None:
    from fixtures.tinymod.elfgen import build_elf, modinfo_blob

    thirty_two = read_module(build_module([("version", "1.2.3")], elf_class=32))
    assert (thirty_two.version, thirty_two.elf_class) == ("1.2.3", 32)
    big_endian = read_module(build_elf(modinfo_blob([("version", "4.5")]), big_endian=True))
    assert big_endian.version == "4.5"


def test_signature_signer_serial_and_hash(plain: bytes, signing: tuple[object, object]) -> None:
    key, cert = signing
    signed = sign_module(plain, key, cert)
    info = read_module(signed)
    sig = info.signature
    assert sig is not None
    assert sig.id_type == "PKCS#7"
    assert sig.signer == "fwman test signing key"
    assert sig.issuer == "CN=fwman test signing key, O=fwman tests"
    assert sig.serial == ":".join(f"{b:02X}" for b in cert.serial_number.to_bytes(20, "big").lstrip(b"\0"))  # type: ignore[attr-defined]
    assert sig.hash_algorithm == "sha256"
    assert sig.offset == len(plain)
    # the ELF part is read as before: the trailer does not disturb .modinfo
    assert info.version == "570.86.16"


def test_signed_module_agrees_with_real_modinfo(tmp_path: Path, plain: bytes, signing: tuple[object, object]) -> None:
    modinfo = shutil.which("modinfo") or "/usr/sbin/modinfo"
    if not Path(modinfo).exists():
        missing("needs modinfo (Debian package kmod)")
    key, cert = signing
    path = tmp_path / "nvidia.ko"
    path.write_bytes(sign_module(plain, key, cert))
    out = subprocess.run([modinfo, str(path)], capture_output=True, text=True, check=True).stdout
    fields = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in out.splitlines() if ":" in line}
    sig = read_module(path.read_bytes()).signature
    assert sig is not None
    assert fields["signer"] == sig.signer
    assert fields["sig_key"] == sig.serial
    assert fields["sig_hashalgo"] == sig.hash_algorithm
    assert fields["vermagic"].strip() == read_module(path.read_bytes()).vermagic


def test_not_elf_is_a_clear_error() -> None:
    with pytest.raises(ParseError, match=r"ELF magic at offset 0x0: not an ELF file"):
        read_module(b"#!/bin/sh\necho not a module\n")


def test_truncated_module_names_the_section_table(plain: bytes) -> None:
    with pytest.raises(ParseError, match=r"section header table.*truncated") as e:
        read_module(plain[: len(plain) - 10])
    assert e.value.offset is not None


def test_truncated_header() -> None:
    with pytest.raises(ParseError, match=r"ELF header.*truncated"):
        read_module(b"\x7fELF\x02\x01\x01" + bytes(20))


def test_executable_is_not_a_module(plain: bytes) -> None:
    data = bytearray(plain)
    data[16:18] = struct.pack("<H", 2)  # ET_EXEC
    with pytest.raises(ParseError, match="e_type at offset 0x10"):
        read_module(bytes(data))


def test_no_modinfo_section() -> None:
    from fixtures.tinymod.elfgen import build_elf

    data = build_elf(b"").replace(b".modinfo", b".notinfo")
    with pytest.raises(ParseError, match=r"no \.modinfo section"):
        read_module(data)


def test_corrupt_modinfo_entry_names_offset() -> None:
    from fixtures.tinymod.elfgen import build_elf

    data = build_elf(b"version=1.0\0garbage-without-equals\0")
    with pytest.raises(ParseError, match=r"\.modinfo at offset 0x4C: entry 'garbage-without-equals'"):
        read_module(data)


def test_modinfo_section_past_end_of_file(plain: bytes) -> None:
    data = bytearray(plain)
    # section 1 (.modinfo) header: sh_size at +32 of the 64-byte entry
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<Q", data, shoff + 64 + 32, 10**6)
    with pytest.raises(ParseError, match=r"\.modinfo.*past the end of the file"):
        read_module(bytes(data))


def test_bad_signature_length(plain: bytes) -> None:
    trailer = struct.pack(">BBBBB3xI", 0, 0, 2, 0, 0, 10**6) + SIGNATURE_MAGIC
    with pytest.raises(ParseError, match=r"module_signature\.sig_len"):
        read_module(plain + trailer)


def test_garbage_signature_blob(plain: bytes) -> None:
    blob = b"\x30\x82\xff\xff" + bytes(60)
    trailer = struct.pack(">BBBBB3xI", 0, 0, 2, 0, 0, len(blob)) + SIGNATURE_MAGIC
    with pytest.raises(ParseError, match="PKCS#7 signature ContentInfo") as e:
        read_module(plain + blob + trailer)
    assert e.value.offset == len(plain) + 4


@pytest.mark.parametrize("suffix", [".ko", ".ko.xz", ".ko.gz", ".ko.zst"])
def test_compressed_files_through_host(tmp_path: Path, plain: bytes, suffix: str) -> None:
    if suffix == ".ko.zst" and shutil.which("zstd") is None:
        missing("needs zstd (Debian package zstd)")
    moddir = tmp_path / "lib/modules" / KERNEL / "updates"
    moddir.mkdir(parents=True)
    raw = moddir / "nvidia.ko"
    raw.write_bytes(plain)
    if suffix == ".ko.xz":
        (moddir / "nvidia.ko.xz").write_bytes(lzma.compress(plain, format=lzma.FORMAT_XZ))
    elif suffix == ".ko.gz":
        (moddir / "nvidia.ko.gz").write_bytes(gzip.compress(plain))
    elif suffix == ".ko.zst":
        subprocess.run(["zstd", "-q", str(raw), "-o", str(moddir / "nvidia.ko.zst")], check=True)
    host = LiveHost(str(tmp_path))
    path = f"/lib/modules/{KERNEL}/updates/nvidia{suffix}"
    assert module_bytes(host, path) == plain
    assert read_module_file(host, path).version == "570.86.16"


def test_corrupt_xz_and_zst(tmp_path: Path) -> None:
    (tmp_path / "bad.ko.xz").write_bytes(b"\xfd7zXZ\x00garbage")
    (tmp_path / "bad.ko.zst").write_bytes(b"\x28\xb5\x2f\xfdgarbage")
    host = LiveHost(str(tmp_path))
    with pytest.raises(ParseError, match="xz stream"):
        module_bytes(host, "/bad.ko.xz")
    if shutil.which("zstd"):
        with pytest.raises(ParseError, match="zstd stream"):
            module_bytes(host, "/bad.ko.zst")


def test_zst_without_zstd_tool(tmp_path: Path) -> None:
    (tmp_path / "m.ko.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    empty = tmp_path / "emptybin"
    empty.mkdir()
    host = LiveHost(str(tmp_path), env={"PATH": str(empty)})
    if host.which("zstd") is not None:  # /usr/sbin is always searched; zstd lives in /usr/bin on Debian
        pytest.skip("zstd found outside PATH")
    with pytest.raises(ToolMissingError, match="zstd"):
        module_bytes(host, "/m.ko.zst")


def test_module_stem() -> None:
    assert module_stem("nvidia-uvm.ko.zst") == "nvidia-uvm"
    assert module_stem("nvidia.ko") == "nvidia"
    assert module_stem("nvidia.o") is None
    assert module_stem(".ko") is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_property_random_bytes(data: bytes) -> None:
    with contextlib.suppress(ParseError):
        read_module(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_mutated_module(data: st.DataObject) -> None:
    base = bytearray(build_module(nvidia_tags("570.86.16", KERNEL)))
    if data.draw(st.booleans()):
        base = bytearray(sign_module(bytes(base), *_KEY))
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(base) - 1))
        base[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(base)))
    for candidate in (bytes(base), bytes(base[:cut])):
        with contextlib.suppress(ParseError):
            read_module(candidate)


_KEY = make_signing_key()
