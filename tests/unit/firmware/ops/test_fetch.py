"""`fwman fetch --image FILE`: importing a hand-downloaded image through the same checks as a download.

(Downloads over real HTTP are in tests/system/test_catalog_http.py.)
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.support.catalog import (
    LAUNCH,
    REBAR,
    WITHDRAWN,
    md5,
    rom,
    seed_catalog,
    sha256,
)
from tests.support.env import FwmanEnv

CACHE = "var/cache/fwman/images/10de-2204-3842-3987"


def cache_files(root: Path) -> list[str]:
    d = root / CACHE
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def put(root: Path, name: str, data: bytes) -> str:
    """Place a "downloaded" file on this machine (outside the host root) and return its path."""
    path = root.parent / f"{root.name}-downloads" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def test_import_of_the_published_image_lands_in_the_cache(tmp_path: Path, fwman: FwmanEnv) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    src = put(tmp_path, "EVGA_3987.rom", image)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    assert (tmp_path / CACHE / f"{REBAR}.rom").read_bytes() == image
    assert cache_files(tmp_path) == [f"{REBAR}.rom", f"{REBAR}.rom.json"]
    assert f"{md5(image)}  ok" in r.stdout and f"{sha256(image)}  ok" in r.stdout
    assert "checked by catalog" in r.stdout
    doc = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.fetch/2" and doc["cached_before"] is True and doc["sha256"] == sha256(image)


def test_wrong_file_leaves_nothing_behind_and_exits_4(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, rom())
    src = put(tmp_path, "other.rom", rom(filler_seed=3))  # same version string, different bytes
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path))
    assert r.code == 4
    assert "MD5 mismatch" in r.stderr and "nothing was kept" in r.stderr
    assert cache_files(tmp_path) == []


def test_unverified_entry_needs_expect_md5_and_records_it_locally(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)  # the ReBAR image has no hash: unverified
    image = rom()
    src = put(tmp_path, "EVGA_3987.rom", image)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path))
    assert r.code == 3
    assert "unverified" in r.stderr and "--expect-md5" in r.stderr
    assert cache_files(tmp_path) == []

    r = fwman(
        "fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", md5(image).upper(),
        "--md5-source", "EVGA download page", "--root", str(tmp_path),
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "recorded" in r.stdout
    overrides = tomllib.loads((tmp_path / "var/lib/fwman/overrides.toml").read_text())["override"]
    assert overrides == [
        {
            "board": "10de:2204:3842:3987",
            "version": REBAR,
            "md5": md5(image),
            "sha256": sha256(image),
            "size": len(image),
            "source": "EVGA download page",
            "recorded_at": overrides[0]["recorded_at"],
        }
    ]
    # never written into the catalog
    local = tmp_path / "var/lib/fwman/catalog/boards/10de-2204-3842-3987.toml"
    assert md5(image) not in local.read_text()
    # the recorded MD5 now verifies the image without --expect-md5; a contradicting one is refused
    (tmp_path / CACHE / f"{REBAR}.rom").unlink()
    assert fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path)).code == 0
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", "0" * 32, "--root", str(tmp_path))
    assert r.code == 4 and "contradicts the MD5" in r.stderr


def test_expect_md5_that_does_not_match_the_file_records_nothing(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)
    src = put(tmp_path, "EVGA_3987.rom", rom())
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", "1" * 32, "--root", str(tmp_path))
    assert r.code == 4 and "MD5 mismatch" in r.stderr
    assert not (tmp_path / "var/lib/fwman/overrides.toml").exists()
    assert cache_files(tmp_path) == []


def test_withdrawn_image_is_refused_before_reading_anything(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, rom())
    r = fwman("fetch", f"3842:3987/{WITHDRAWN}", "--image", "/nonexistent.rom", "--expect-md5", "2" * 32,
              "--root", str(tmp_path))  # fmt: skip
    assert r.code == 3
    assert "withdrawn: owners reported a lowered power limit; use 94.02.42.80.27" in r.stderr


def test_image_for_another_subsystem_is_refused_by_the_header_check(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)
    wrong = rom(subsystem_device=0x3982)
    src = put(tmp_path, "x.rom", wrong)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", md5(wrong), "--root", str(tmp_path))
    assert r.code == 4
    assert "subsystem 3842:3982" in r.stderr
    assert cache_files(tmp_path) == [] and not (tmp_path / "var/lib/fwman/overrides.toml").exists()


def test_stripped_image_is_never_a_flash_source(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)
    stripped = rom(kind="stripped")
    src = put(tmp_path, "x.rom", stripped)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", md5(stripped), "--root", str(tmp_path))
    assert r.code == 4 and "is not a flash source" in r.stderr
    assert cache_files(tmp_path) == []


def test_a_truncated_image_is_called_truncated_and_the_hinted_inspect_says_so_too(
    tmp_path: Path, fwman: FwmanEnv
) -> None:
    """Issue 36 row 3: fetch said "no VBIOS image found ... no unpacker installed" where rom inspect said
    truncated."""
    import shlex

    seed_catalog(tmp_path, rom())
    src = put(tmp_path, "cut.rom", rom(truncate_to=0x30000))
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path))
    assert r.code == 4
    assert f"{src}: truncated: the header says" in r.stderr and "the file has 196,608" in r.stderr
    assert "unpacker" not in r.stderr and "no VBIOS image" not in r.stderr
    assert cache_files(tmp_path) == []
    hint = r.stderr.split("hint:", 1)[1]
    argv = shlex.split(hint.split("; ", 1)[1].removesuffix(" shows where it ends\n"))
    assert argv[:3] == ["fwman", "rom", "inspect"]
    inspected = fwman(*argv[1:], "--root", str(tmp_path))
    assert inspected.code == 0 and "Truncated             : the header says" in inspected.stdout


def test_not_a_vbios_at_all(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, None)
    junk = b"<html>please enable javascript</html>"
    src = put(tmp_path, "x.rom", junk)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", md5(junk), "--root", str(tmp_path))
    assert r.code == 4
    assert cache_files(tmp_path) == []


def test_file_larger_than_the_catalog_size_is_refused(tmp_path: Path, fwman: FwmanEnv) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    src = put(tmp_path, "x.rom", image + b"\0")
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--root", str(tmp_path))
    assert r.code == 4 and "larger than" in r.stderr


def test_expect_md5_contradicting_the_catalog_is_refused(tmp_path: Path, fwman: FwmanEnv) -> None:
    image = rom()
    seed_catalog(tmp_path, image)
    src = put(tmp_path, "x.rom", image)
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", src, "--expect-md5", "3" * 32, "--root", str(tmp_path))
    assert r.code == 4 and "contradicts the catalog's MD5" in r.stderr


def test_no_url_known_says_how_to_import_by_hand(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, rom())
    r = fwman("fetch", f"3842:3987/{REBAR}", "--root", str(tmp_path))
    assert r.code == 5
    assert "no download URL is known" in r.stderr and "--image FILE" in r.stderr


def test_usage_errors(tmp_path: Path, fwman: FwmanEnv) -> None:
    seed_catalog(tmp_path, rom())
    assert fwman("fetch", "3842:3987", "--root", str(tmp_path)).code == 2
    r = fwman("fetch", "3842:3987/94.02.00.00.00", "--root", str(tmp_path))
    assert r.code == 2 and LAUNCH in r.stderr
    r = fwman("fetch", f"3842:3987/{REBAR}", "--expect-md5", "xyz", "--root", str(tmp_path))
    assert r.code == 2
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", "/a", "--url", "https://x/y", "--root", str(tmp_path))
    assert r.code == 2
