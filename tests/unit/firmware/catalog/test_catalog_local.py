"""Local catalog entries (/etc/fwman/catalog.d): loading, never shadowing, lint, citation, export; and
`fetch --image PACKAGE` for a curated entry whose hash the owner supplies."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.packages import build_pe, build_zip
from fixtures.romgen import RomSpec, build_rom
from fwman.core.errors import VerificationError
from fwman.core.findings import Severity
from fwman.firmware.catalog.lint import lint_board_bytes
from fwman.firmware.catalog.load import find_entry_for_rom, load_catalog
from fwman.firmware.catalog.local import (
    LocalEntry,
    LocalInfo,
    build_local_board,
    export_curated,
    parse_local,
    render_board,
)
from fwman.firmware.catalog.schema import Board
from fwman.firmware.ops.local_entry import lint_local_entries
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import check_compatible
from fwman.host.live import LiveHost
from tests.support.catalog import REBAR, md5, seed_catalog
from tests.support.env import FwmanEnv
from tests.support.tools import needs_tool

OLD, NEW = "94.02.26.48.F0", "94.02.42.80.F1"


def board_rom(version: str, sub: int = 0x3090, **kw: object) -> bytes:
    data: bytes = build_rom(RomSpec(version=version, subsystem_vendor=0xF00D, subsystem_device=sub, **kw))  # type: ignore[arg-type]
    return data


def local_board(sub: int = 0x3090, vendor: int = 0xF00D) -> tuple[Board, bytes]:
    new = board_rom(NEW, sub, card_data=9)
    board = build_local_board(
        vendor="10de",
        device="2204",
        subsystem_vendor=f"{vendor:04x}",
        subsystem_device=f"{sub:04x}",
        name="Synthetic board",
        maker="unknown",
        board_id=None,
        running=parse_rom(board_rom(OLD, sub)),
        rebar_sizes=[64 << 20, 128 << 20, 256 << 20],
        new=parse_rom(new),
        new_is_the_file=True,
        new_file_md5=md5(new),
        md5_source="https://vendor.example/f00d",
        package_name="F00D.rom",
    )
    return board, new


def info(data: bytes) -> LocalInfo:
    return LocalInfo(created_at="2026-12-01T00:00:00Z", card="0000:41:00.0", backup="/var/lib/fwman/backups/x.rom",
                     backup_sha256="0" * 64, image_file="/tmp/F00D.rom", image_file_md5=md5(data),
                     md5_source="https://vendor.example/f00d")  # fmt: skip


def install(root: Path, board: Board, text: str | None = None) -> Path:
    d = root / "etc/fwman/catalog.d"
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{board.pci.file_stem}.toml"
    p.write_text(text if text is not None else render_board(board, info(b"x")))
    return p


def test_a_local_entry_joins_the_catalog_marked_local_and_is_cited_as_such(tmp_path: Path) -> None:
    seed_catalog(tmp_path)
    board, new = local_board()
    install(tmp_path, board)
    cat = load_catalog(LiveHost(str(tmp_path)))
    got = cat.find_board("f00d:3090")
    assert cat.is_local(got) and got.recommended() is not None and got.recommended().version == NEW  # type: ignore[union-attr]
    # the running firmware is superseded by the vendor image; its ReBAR offer (256 MB max) says no ReBAR
    old = got.image(OLD)
    assert old is not None and (old.status.value, old.superseded_by, old.rebar) == ("superseded", NEW, False)
    entry = find_entry_for_rom(cat, parse_rom(new))
    assert entry is not None and entry.local and entry.label == f"f00d:3090/{NEW} (local entry)"
    findings = {f.id: f for f in check_compatible(parse_rom(new), None, entry)}
    assert findings["catalog.hash"].severity is Severity.OK and "the local entry's" in findings["catalog.hash"].message
    assert findings["catalog.local"].severity is Severity.INFO and "not signed" in findings["catalog.local"].message
    # a curated entry is never cited as local
    curated = cat.entry(f"3842:3987/{REBAR}")
    assert not curated.local and curated.label == f"3842:3987/{REBAR}"


def test_a_local_entry_never_shadows_a_curated_board(tmp_path: Path) -> None:
    seed_catalog(tmp_path)
    board, _ = local_board(sub=0x3987, vendor=0x3842)
    install(tmp_path, board)
    host = LiveHost(str(tmp_path))
    cat = load_catalog(host)
    assert not cat.is_local(cat.find_board("3842:3987"))
    assert cat.find_board("3842:3987").image(NEW) is None
    assert any("not used: the catalog knows 10de:2204:3842:3987" in n for n in cat.notes)
    issues = lint_local_entries(host)
    assert [(i.level, "not used" in i.message) for i in issues] == [("warning", True)]


def test_a_damaged_local_file_is_left_out_with_a_note_and_lint_fails_it(tmp_path: Path) -> None:
    seed_catalog(tmp_path)
    board, _ = local_board()
    text = render_board(board, info(b"x")).replace('status = "current"', 'status = "recommended"')
    install(tmp_path, board, text)
    host = LiveHost(str(tmp_path))
    cat = load_catalog(host)
    assert cat.board_for("10de", "2204", "f00d", "3090") is None  # the card stays unknown: left alone
    assert any(n.startswith("local entry not used:") for n in cat.notes)
    assert [i.level for i in lint_local_entries(host)] == ["error"]


def test_lint_checks_local_entries_by_the_board_rules(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path)
    board, _ = local_board()
    bad = board.model_copy(
        update={"images": [i.model_copy(update={"superseded_by": "99.99.99.99.99"}) for i in board.images]}
    )
    install(tmp_path, bad)
    r = fwman("catalog", "lint", "--local", "--root", str(tmp_path))
    assert r.code == 4 and "99.99.99.99.99 is not an image of this board" in r.stdout
    install(tmp_path, board)
    r = fwman("catalog", "lint", "--local", "--root", str(tmp_path))
    assert r.code == 0 and "/etc/fwman/catalog.d: clean" in r.stdout


def test_without_a_table_of_provenance_a_board_file_is_not_a_local_entry(tmp_path: Path) -> None:
    board, _ = local_board()
    p = install(tmp_path, board, render_board(board))
    with pytest.raises(VerificationError, match=r"no \[local\] table"):
        parse_local(p.read_bytes(), f"/etc/fwman/catalog.d/{p.name}")


def test_export_prints_the_curated_format_without_local_provenance() -> None:
    board, new = local_board()
    entry = LocalEntry(board, info(new), "/etc/fwman/catalog.d/10de-2204-f00d-3090.toml")
    text = export_curated(entry)
    doc = tomllib.loads(text)
    assert "local" not in doc and Board.model_validate(doc) == board.model_copy(update={"format": 2})
    assert "add the public pages that state each fact" in text
    # curated format 2: lint refuses it until the board and every image cite public sources
    issues = lint_board_bytes(text.encode(), "boards/10de-2204-f00d-3090.toml")
    assert {(i.level, i.where) for i in issues} == {("error", "board.sources"), ("error", "images[0].sources"),
                                                    ("error", "images[1].sources")}  # fmt: skip


def test_show_and_list_say_local_entry(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path)
    board, _ = local_board()
    install(tmp_path, board)
    r = fwman("catalog", "show", "f00d:3090", "--root", str(tmp_path))
    assert r.code == 0 and "local entry /etc/fwman/catalog.d/10de-2204-f00d-3090.toml" in r.stdout
    r = fwman("catalog", "list", "--root", str(tmp_path))
    assert "Synthetic board (local entry)" in r.stdout
    doc = fwman("catalog", "show", "f00d:3090", "--json", "--root", str(tmp_path)).json()
    assert doc["local_entry"] == "/etc/fwman/catalog.d/10de-2204-f00d-3090.toml"


def test_fetch_from_a_package_checks_the_owners_md5_against_the_package(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)  # the curated REBAR image has no published hash: unverified
    option = build_rom(RomSpec(version=REBAR, kind="option_rom")).ljust(1 << 20, b"\xff")
    other = build_rom(RomSpec(version=REBAR, subsystem_device=0x3982, kind="option_rom", filler_seed=5)).ljust(
        1 << 20, b"\xff"
    )
    pkg = tmp_path.parent / f"{tmp_path.name}-dl" / "EVGA_ReBAR.exe"
    pkg.parent.mkdir()
    pkg.write_bytes(build_pe([other, option]))
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", str(pkg), "--expect-md5", md5(option), "--root", str(tmp_path))
    assert r.code == 4 and "MD5 mismatch" in r.stderr  # the vendor's MD5 is of the download, not of the image
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", str(pkg), "--expect-md5", md5(pkg.read_bytes()),
              "--md5-source", "EVGA download page", "--root", str(tmp_path))  # fmt: skip
    assert r.code == 0, r.stderr
    cached = tmp_path / f"var/cache/fwman/images/10de-2204-3842-3987/{REBAR}.rom"
    assert cached.read_bytes() == option
    overrides = tomllib.loads((tmp_path / "var/lib/fwman/overrides.toml").read_text())["override"]
    assert overrides[0]["md5"] == md5(pkg.read_bytes()) and "MD5 of the update package" in overrides[0]["source"]


@needs_tool("7zz", "7zip")
def test_fetch_from_a_package_the_unpacker_cannot_open_is_exit_4(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)
    option = build_rom(RomSpec(version=REBAR, kind="option_rom")).ljust(1 << 20, b"\xff")
    broken = bytearray(build_zip({"EVGA.rom": option}))
    broken[60:64] = b"\xde\xad\xbe\xef"  # inside the deflated member: 7zz lists it, then fails to unpack it
    pkg = tmp_path.parent / f"{tmp_path.name}-dl" / "EVGA_ReBAR.zip"
    pkg.parent.mkdir()
    pkg.write_bytes(bytes(broken))
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", str(pkg), "--expect-md5", md5(bytes(broken)), "--root",
              str(tmp_path))  # fmt: skip
    assert r.code == 4, r.stderr
    assert f"fwman: error: 7zz could not unpack {pkg}: " in r.stderr and "unexpected" not in r.stderr
    assert not list(tmp_path.rglob("*.rom"))  # nothing cached


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_parse_local_takes_any_bytes_and_returns_an_entry_or_a_verification_error(data: bytes) -> None:
    board, _ = local_board()
    good = render_board(board, info(b"x")).encode()
    for blob in (data, good[: len(data)], good + data):
        try:
            entry = parse_local(blob, "/etc/fwman/catalog.d/10de-2204-f00d-3090.toml")
        except VerificationError:
            continue
        assert entry.board.key == "10de:2204:f00d:3090"


@pytest.mark.parametrize(("option", "value"), [("--name", "EVGA\nFTW3"), ("--name", "EVGA\n#"), ("--maker", "E\tV")])
def test_add_local_refuses_text_that_is_not_one_line(tmp_path: Path, option: str, value: str) -> None:
    # a newline in --name went unescaped into the header comment: "not valid TOML" (exit 4), or a two-line name
    import hashlib

    from fixtures.nvflash.rig import build_rig
    from fixtures.nvflash.unknown_card import UPDATE, make_unknown_card, vendor_images

    rig = build_rig(tmp_path)
    make_unknown_card(rig, "0000:41:00.0")
    assert rig("backup", "--card", "41:00.0").code == 0  # type: ignore[attr-defined]
    rom = tmp_path / "F00D.rom"
    rom.write_bytes(vendor_images()[f"F00D_3090_{UPDATE}.rom"])
    md5 = hashlib.md5(rom.read_bytes(), usedforsecurity=False).hexdigest()
    argv = ["catalog", "add-local", "--card", "41:00.0", "--image", str(rom), "--expect-md5", md5]
    argv += ["--md5-source", "https://vendor.example/f00d"]
    r = rig(*argv, option, value)
    assert r.code == 2, r.stderr  # type: ignore[attr-defined]
    assert f"fwman: error: {option} " in r.stderr and "not one line of text" in r.stderr  # type: ignore[attr-defined]
    assert not (rig.root / "etc/fwman/catalog.d").exists()
    r = rig(*argv, option, "EVGA FTW3")  # one line: written, and it reads back
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    text = (rig.root / "etc/fwman/catalog.d/10de-2204-f00d-3090.toml").read_text()
    assert tomllib.loads(text) and "EVGA FTW3" in text
    # the next step it prints names the file it was given, and runs as printed
    [step] = [line for line in r.stdout.splitlines() if line.startswith("  next ")]  # type: ignore[attr-defined]
    fetch = step.split("; ")[1]
    assert fetch == f"fwman fetch f00d:3090/{UPDATE} --image {rom}"
    ran = rig(*shlex.split(fetch)[1:])
    assert ran.code == 0, ran.stderr  # type: ignore[attr-defined]
