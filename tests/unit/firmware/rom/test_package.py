"""VBIOS images inside vendor update packages: found by structure, unpacked by 7zz, one picked per card."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.packages import build_7z_sfx, build_pe, build_zip
from fixtures.romgen import RomSpec, build_rom
from fwman.core.errors import BlockedError, VerificationError
from fwman.firmware.rom.package import scan_blob, scan_package, select_image
from fwman.host.base import CommandResult
from fwman.host.live import LiveHost

HAVE_7ZZ = shutil.which("7zz") is not None
needs_7zz = pytest.mark.skipif(not HAVE_7ZZ, reason="7zz (Debian package 7zip) not installed")

MIB = 1 << 20


def tuf(version: str, seed: int, sub: int = 0x87B0, kind: str = "option_rom") -> bytes:
    spec = RomSpec(kind=kind, version=version, device_id=0x2206, subsystem_vendor=0x1043,  # type: ignore[arg-type]
                   subsystem_device=sub, filler_seed=seed)  # fmt: skip
    rom = build_rom(spec)
    return rom.ljust(MIB, b"\xff") if kind == "option_rom" else rom


AS02 = tuf("94.02.42.40.66", 1)
AS03 = tuf("94.02.42.40.65", 2)
TURBO = tuf("94.02.42.40.70", 3, sub=0x87EB)
TURBO_DUMP = tuf("94.02.42.40.71", 4, sub=0x87EB, kind="nvgi_dump")


class CountingHost(LiveHost):
    """A live host that records every command it runs (to show nothing in a package is executed)."""

    def __init__(self, root: str = "/", env: Mapping[str, str] | None = None) -> None:
        super().__init__(root, env)
        self.argvs: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], **kw: object) -> CommandResult:  # type: ignore[override]
        self.argvs.append(tuple(argv))
        return super().run(argv, **kw)  # type: ignore[arg-type]


def write(tmp_path: Path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_pe_program_lists_every_embedded_image_with_subsystem_and_version(tmp_path: Path) -> None:
    path = write(tmp_path, "RTX3080_V6.exe", build_pe([AS02, AS03, TURBO, TURBO_DUMP]))
    scan = scan_package(CountingHost(), path)
    found = [(i.rom.subsystem, i.rom.version, i.extent) for i in scan.images]
    assert found == [
        ("1043:87b0", "94.02.42.40.66", "structure"),
        ("1043:87b0", "94.02.42.40.65", "structure"),
        ("1043:87eb", "94.02.42.40.70", "structure"),
        ("1043:87eb", "94.02.42.40.71", "unknown"),
    ]
    # the structure extent is the vendor image exactly: the chain plus its padding, not the filler after it
    assert scan.images[0].data == AS02 and scan.images[1].data == AS03


def test_select_takes_the_one_image_for_the_card_and_refuses_none_or_several(tmp_path: Path) -> None:
    scan = scan_package(CountingHost(), write(tmp_path, "pkg.exe", build_pe([AS02, AS03, TURBO, TURBO_DUMP])))
    assert select_image(scan, "1043:87b0", "2206", "94.02.42.40.65").data == AS03
    with pytest.raises(BlockedError, match="2 different images for 1043:87b0 device 2206: fwman does not pick"):
        select_image(scan, "1043:87b0", "2206")
    with pytest.raises(VerificationError, match="no image for 3842:3987") as e:
        select_image(scan, "3842:3987")
    assert "1043:87eb 94.02.42.40.70" in (e.value.hint or "")
    with pytest.raises(VerificationError, match="no image for 1043:87b0 device 2204"):
        select_image(scan, "1043:87b0", "2204", "94.02.42.40.65")
    # a full dump found raw inside a program: its end is not stated anywhere, so it is never taken
    with pytest.raises(BlockedError, match=r"cannot be taken: .*end unknown"):
        select_image(scan, "1043:87eb", "2206", "94.02.42.40.71")


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
    # only the unpacker ran (list, extract), then the scratch directory was removed: nothing from the package
    tools = [a[:2] for a in host.argvs]
    assert tools == [("7zz", "l"), ("7zz", "x"), ("rm", "-rf")]
    scratch = host.argvs[-1][-1]
    assert scratch.startswith("/tmp/fwman-unpack-") and not Path(scratch).exists()


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


def test_a_package_without_images_says_so(tmp_path: Path) -> None:
    scan = scan_package(CountingHost(), write(tmp_path, "notes.exe", build_pe([])))
    with pytest.raises(VerificationError, match="no VBIOS image found"):
        select_image(scan, "1043:87b0")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=4096))
def test_scan_blob_never_crashes(blob: bytes, cut: int) -> None:
    # arbitrary bytes, and arbitrary bytes spliced into a real image: images or nothing, never an exception
    for data in (blob, AS02[: cut * 64] + blob, b"NVGI" + blob + AS02[:cut]):
        images, _ = scan_blob(data, "x")
        assert all(i.rom.vendor_id == "10de" for i in images)


def test_a_chain_cut_from_a_dump_is_never_taken(tmp_path: Path) -> None:
    # a stripped dump (chain then per-card data): as a file it stays stripped; inside a program the chain is
    # followed by card data, not padding, so its end is unknown. Neither may become a "clean" option ROM.
    stripped = tuf("94.02.42.40.66", 1, kind="stripped")
    scan = scan_package(CountingHost(), write(tmp_path, "x.rom", stripped))
    assert [(i.extent, i.rom.kind.value, i.takeable) for i in scan.images] == [("file", "stripped", False)]
    with pytest.raises(BlockedError, match="cannot be taken"):
        select_image(scan, "1043:87b0")
    scan = scan_package(CountingHost(), write(tmp_path, "p.exe", build_pe([stripped])))
    assert [(i.extent, i.takeable) for i in scan.images] == [("unknown", False)]
    with pytest.raises(BlockedError, match="cannot be taken"):
        select_image(scan, "1043:87b0")
