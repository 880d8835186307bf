"""Unpacking vendor update packages through the Host: 7zz or bsdtar, nothing in the package executed, the
listing checked and the size limit enforced before and while unpacking, the scratch directory removed."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fixtures.packages import build_7z_sfx, build_pe, build_zip
from fwman.core.errors import VerificationError
from fwman.firmware.ops.unpack import scan_package
from fwman.firmware.rom.package import select_image
from fwman.host.base import CommandResult
from fwman.host.live import LiveHost
from tests.support.packages import AS02, AS03, MIB, TURBO, TURBO_DUMP, tuf
from tests.support.tools import needs_tool

needs_7zz = needs_tool("7zz", "7zip")


class CountingHost(LiveHost):
    """A live host that records every command it runs (to show nothing in a package is executed)."""

    def __init__(self, root: str = "/", env: Mapping[str, str] | None = None) -> None:
        super().__init__(root, env)
        self.argvs: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], **kw: object) -> CommandResult:  # type: ignore[override]
        self.argvs.append(tuple(argv))
        return super().run(argv, **kw)  # type: ignore[arg-type]


def step(argv: tuple[str, ...]) -> tuple[str, str, bool] | tuple[str]:
    """Return (tool, subcommand, run under the file size limit) for an unpacker run, (tool,) for any other."""
    limited = argv[0] == "/bin/sh" and "ulimit -f" in argv[2]
    tool = argv[6:] if limited else argv
    name = os.path.basename(tool[0])
    return (name, tool[1], limited) if name in ("7zz", "bsdtar") else (name,)


def removed_scratch(host: LiveHost) -> str:
    """Return the scratch directory ``host`` removed (through ``remove_tree``, the last change of the scan)."""
    removed = [j.path for j in host.journal if j.action == "remove_tree"]
    assert len(removed) == 1 and removed[0].startswith("/tmp/fwman-unpack-"), host.journal
    assert host.journal[-1].action == "remove_tree"  # after the unpacker: nothing of the package outlives it
    return removed[0]


def write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_a_program_the_unpacker_does_not_open_is_searched_as_raw_bytes(tmp_path: Path) -> None:
    # the pure scan's findings (tests/unit/firmware/rom/test_package.py), reached through the Host: a PE with
    # four images; whether or not the unpacker opens it, the images in its bytes are the ones listed
    scan = scan_package(CountingHost(), write(tmp_path, "RTX3080_V6.exe", build_pe([AS02, AS03, TURBO, TURBO_DUMP])))
    found = [(i.rom.subsystem, i.rom.version, i.extent) for i in scan.images]
    assert found == [
        ("1043:87b0", "94.02.42.40.66", "structure"),
        ("1043:87b0", "94.02.42.40.65", "structure"),
        ("1043:87eb", "94.02.42.40.70", "structure"),
        ("1043:87eb", "94.02.42.40.71", "unknown"),
    ]
    assert select_image(scan, "1043:87b0", "2206", "94.02.42.40.65").data == AS03


def test_a_plain_rom_is_one_image_and_needs_no_unpacker(tmp_path: Path) -> None:
    host = CountingHost()
    scan = scan_package(host, write(tmp_path, "AS02.rom", AS02))
    assert [(i.extent, i.data == AS02) for i in scan.images] == [("file", True)]
    assert host.argvs == [] and scan.unpacker is None


@needs_7zz
def test_zip_members_are_unpacked_by_7zz_and_nothing_is_executed(tmp_path: Path) -> None:
    host = CountingHost()
    path = write(tmp_path, "update.zip", build_zip({"AS02.rom": AS02, "bios/AS08.rom": TURBO_DUMP, "a.txt": b"x"}))
    scan = scan_package(host, path)
    assert scan.unpacker == "7zz" and scan.members == 3
    assert {(i.origin, i.extent) for i in scan.images} == {("AS02.rom", "file"), ("bios/AS08.rom", "file")}
    # a dump that is a whole archive member has a known end: it can be taken
    assert select_image(scan, "1043:87eb").data == TURBO_DUMP
    # only the unpacker ran (list; unpack into one size-limited file to measure; unpack under the same limit),
    # then the scratch directory was removed: nothing from the package ran, nothing of it outlives the scan
    assert [step(a) for a in host.argvs] == [("7zz", "l", False), ("7zz", "x", True), ("7zz", "x", True)]
    # the unpacker is only ever given fwman's private copy of the bytes, never the user's file again
    assert not any(path in a for argv in host.argvs for a in argv)
    assert not Path(removed_scratch(host)).exists()


@needs_7zz
def test_7z_self_extractor_shape_is_opened_without_running_it(tmp_path: Path) -> None:
    path = write(tmp_path, "ReBAR_Update.exe", build_7z_sfx({"AS02.rom": AS02, "AS03.rom": AS03}))
    scan = scan_package(CountingHost(), path)
    assert sorted(i.origin for i in scan.images) == ["AS02.rom", "AS03.rom"]
    assert select_image(scan, "1043:87b0", version="94.02.42.40.66").data == AS02


def test_without_an_unpacker_the_raw_bytes_are_still_searched(tmp_path: Path) -> None:
    host = CountingHost(env={"PATH": str(tmp_path / "no-tools")})
    scan = scan_package(host, write(tmp_path, "pkg.exe", build_pe([AS03])))
    assert [i.data == AS03 for i in scan.images] == [True]
    assert "no unpacker installed" in scan.notes[0] and host.argvs == []


# -- hostile packages -----------------------------------------------------------------------------------------
needs_bsdtar = needs_tool("bsdtar", "libarchive-tools")


def only_tools(tmp_path: Path, *tools: str) -> CountingHost:
    """Return a host whose PATH holds only ``tools`` (the scratch directory is removed by the Host, not rm)."""
    bin_dir = tmp_path / "only-bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    return CountingHost(env={"PATH": str(bin_dir)})


@needs_7zz
def test_the_unpacker_gets_the_bytes_whose_hash_was_checked_not_the_file_again(tmp_path: Path) -> None:
    # a concurrent writer swaps the package for another between fwman's read and the unpacker's: played by a
    # stand-in 7zz that copies B over the user's file, then runs the real 7zz
    good, evil = tuf("94.02.42.40.66", 1), tuf("94.02.42.40.66", 9)
    pkg = write(tmp_path, "pkg.zip", build_zip({"board.rom": good}))
    swap = write(tmp_path, "evil.zip", build_zip({"board.rom": evil}))
    bin_dir = tmp_path / "racer"
    bin_dir.mkdir()
    racer = bin_dir / "7zz"
    racer.write_text(f'#!/bin/sh\ncp "{swap}" "{pkg}"\nexec {shutil.which("7zz")} "$@"\n')
    racer.chmod(0o755)
    host = CountingHost(env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"})
    read = Path(pkg).read_bytes()  # what fwman read (and checked the vendor's MD5 of)
    scan = scan_package(host, pkg, read)
    assert Path(pkg).read_bytes() != read  # the swap happened
    assert select_image(scan, "1043:87b0").data == good


def bomb(real: int, claimed: int) -> bytes:
    """Return a gzip of ``real`` zero bytes whose trailer claims ``claimed`` (what a listing reports)."""
    data = bytearray(gzip.compress(b"\0" * real, compresslevel=1))
    data[-4:] = claimed.to_bytes(4, "little")
    return bytes(data)


@needs_7zz
def test_the_unpack_limit_is_enforced_while_unpacking_not_taken_from_the_listing(tmp_path: Path) -> None:
    # a gzip states its size modulo 2**32: 4 GiB + 1000 bytes lists as 1000; here 3 MiB lists as 1000
    path = write(tmp_path, "bomb.gz", bomb(3 * MIB, 1000))
    host = CountingHost()
    with pytest.raises(VerificationError, match=r"unpacks to more than the 1 MiB limit \(the archive claims less\)"):
        scan_package(host, path, max_unpacked=MIB)
    # the listing said 1000 bytes; the measuring unpack ran under the kernel's file size limit and was stopped
    assert [step(a) for a in host.argvs] == [("7zz", "l", False), ("7zz", "x", True)]
    assert not Path(removed_scratch(host)).exists()


@needs_7zz
def test_a_package_the_unpacker_cannot_open_is_a_verification_error(tmp_path: Path) -> None:
    data = bytearray(build_zip({"AS02.rom": AS02}))
    data[60:64] = b"\xde\xad\xbe\xef"  # inside the deflated member: the listing works, unpacking fails
    with pytest.raises(VerificationError, match=r"7zz could not unpack .*pkg\.zip") as e:
        scan_package(CountingHost(), write(tmp_path, "pkg.zip", bytes(data)))
    assert e.value.exit_code == 4


def special_tar(kind: bytes, link: str = "") -> bytes:
    """Return a tar holding one harmless file and one member of tar type ``kind``."""
    out = io.BytesIO()
    with tarfile.TarFile(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("AS02.rom")
        info.size = len(AS02)
        tar.addfile(info, io.BytesIO(AS02))
        info = tarfile.TarInfo("odd")
        info.type, info.linkname, info.devmajor, info.devminor = kind, link, 1, 5
        tar.addfile(info)
    return out.getvalue()


SPECIAL = [
    (tarfile.FIFOTYPE, "", "is a FIFO, not a file"),
    (tarfile.CHRTYPE, "", "is a character device, not a file"),
    (tarfile.BLKTYPE, "", "is a block device, not a file"),
    (tarfile.SYMTYPE, "/etc/shadow", "links outside the archive"),
    (tarfile.SYMTYPE, "../../etc/shadow", "links outside the archive"),
]


@needs_bsdtar
@pytest.mark.parametrize(("kind", "link", "message"), SPECIAL)
def test_bsdtar_is_never_asked_to_make_a_fifo_a_device_or_an_outside_link(
    tmp_path: Path, kind: bytes, link: str, message: str
) -> None:
    # bsdtar running as root would make the FIFO (reading it hangs fwman) or /dev/zero or /dev/sda (read raw)
    host = only_tools(tmp_path, "bsdtar")
    with pytest.raises(VerificationError, match=f"member 'odd[^']*' {message}"):
        scan_package(host, write(tmp_path, "pkg.tar", special_tar(kind, link)))
    assert [step(a) for a in host.argvs] == [("bsdtar", "-tvf", False)]
    assert not Path(removed_scratch(host)).exists()


@needs_bsdtar
def test_bsdtar_unpacks_files_and_in_tree_links(tmp_path: Path) -> None:
    host = only_tools(tmp_path, "bsdtar")
    scan = scan_package(host, write(tmp_path, "pkg.tar", special_tar(tarfile.SYMTYPE, "AS02.rom")))
    assert scan.unpacker == "bsdtar" and scan.members == 1  # the link is not followed, nor searched
    assert select_image(scan, "1043:87b0").data == AS02


@needs_7zz
@pytest.mark.parametrize(("kind", "link", "message"), SPECIAL[:2])
def test_7zz_listing_refuses_the_same_members(tmp_path: Path, kind: bytes, link: str, message: str) -> None:
    host = CountingHost()
    with pytest.raises(VerificationError, match=message):
        scan_package(host, write(tmp_path, "pkg.tar", special_tar(kind, link)))
    assert [step(a) for a in host.argvs] == [("7zz", "l", False)]
    assert not Path(removed_scratch(host)).exists()
