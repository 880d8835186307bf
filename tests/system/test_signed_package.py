"""A board maker's signed update program as provenance: the real ``osslsigncode`` signs a PE built by the package
fixtures with a throwaway chain made here, and fwman verifies it against that test root.

The catalog's 3842:3987 ReBAR image has no published hash (``unverified``), so before this only
``--expect-md5`` could vouch for it. Here the package's Authenticode signature does, and every way it can fail
(a changed byte, a signer the catalog does not record, an expired or untrusted chain) is refused with exit 4
before anything reaches the cache or the overrides file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from fixtures.packages import build_pe
from fixtures.packages.authenticode import (
    MAKER_SUBJECT,
    OTHER_SUBJECT,
    Issued,
    make_root,
    make_signer,
    sign_pe,
)
from fixtures.romgen import RomSpec, build_rom
from tests.support.catalog import REBAR, board_toml, install_local, md5, seed_images, sha256, write_catalog
from tests.support.env import FwmanEnv
from tests.support.tools import require_tools

CACHE = "var/cache/fwman/images/10de-2204-3842-3987"
MIB = 1 << 20
#: the ReBAR image as an update program carries it: an option ROM padded to 1 MiB
IMAGE = build_rom(RomSpec(version=REBAR, kind="option_rom", filler_seed=7)).ljust(MIB, b"\xff")


@pytest.fixture(autouse=True)
def _osslsigncode() -> None:
    require_tools("osslsigncode", package="osslsigncode")


def host_root(tmp_path: Path, trusted: Issued) -> Path:
    """Return a host root whose catalog records MAKER_SUBJECT for 3842:3987 and which trusts ``trusted``."""
    root = tmp_path / "root"
    board = board_toml(seed_images(None), extra_board={"package_signers": [MAKER_SUBJECT]})
    install_local(root, write_catalog(tmp_path / "catalog-src", {"10de-2204-3842-3987": board}))
    roots = root / "etc/fwman/authenticode-roots.pem"
    roots.parent.mkdir(parents=True, exist_ok=True)
    roots.write_bytes(trusted.cert.read_bytes())
    return root


def nothing_kept(root: Path) -> bool:
    cache = root / CACHE
    return not (cache.is_dir() and any(cache.iterdir())) and not (root / "var/lib/fwman/overrides.toml").exists()


def fetch(fwman: FwmanEnv, root: Path, package: Path, *extra: str) -> tuple[int, str, str]:
    r = fwman("fetch", f"3842:3987/{REBAR}", "--image", str(package), "--root", str(root), *extra)
    return r.code, r.stdout, r.stderr


def test_a_package_signed_by_the_recorded_maker_vouches_for_its_image(tmp_path: Path, fwman: FwmanEnv) -> None:
    keys = tmp_path / "keys"
    test_root = make_root(keys)
    signed = sign_pe(build_pe([IMAGE]), make_signer(keys, test_root), keys)
    package = tmp_path / "downloads/EVGA_3987_ReBAR.exe"
    package.parent.mkdir()
    package.write_bytes(signed)
    root = host_root(tmp_path, test_root)

    code, out, err = fetch(fwman, root, package)
    assert code == 0, err
    assert (root / CACHE / f"{REBAR}.rom").read_bytes() == IMAGE  # the image inside, not the program
    assert "checked by package signed by EVGA\n" in out
    assert f"signed by  {MAKER_SUBJECT} (issuer /CN=fwman test root" in out
    assert f"check      ok: extracted from a package signed by EVGA ({MAKER_SUBJECT})" in out
    record = json.loads((root / CACHE / f"{REBAR}.rom.json").read_text())
    assert record["verified_by"] == "package signed by EVGA"
    assert record["signed_package"]["subject"] == MAKER_SUBJECT
    assert record["signed_package"]["package_sha256"] == sha256(signed)
    # the image's own hashes are recorded (this host only), with the signer: a later flash checks against them
    (override,) = tomllib.loads((root / "var/lib/fwman/overrides.toml").read_text())["override"]
    assert override["md5"] == md5(IMAGE) and override["sha256"] == sha256(IMAGE)
    assert override["signer"] == MAKER_SUBJECT and override["package_sha256"] == sha256(signed)
    assert override["source"] == f"extracted from a package signed by EVGA ({MAKER_SUBJECT})"
    # fetched again from the same package: already in the cache, verified by the recorded hashes
    code, out, err = fetch(fwman, root, package)
    assert code == 0 and out.startswith("already in the cache"), err


@pytest.mark.parametrize("case", ["changed byte", "wrong signer", "expired", "untrusted root", "unsigned"])
def test_each_broken_signature_is_refused_before_anything_is_cached(tmp_path: Path, fwman: FwmanEnv, case: str) -> None:
    keys = tmp_path / "keys"
    test_root = make_root(keys)
    trusted = test_root
    if case == "wrong signer":
        signed = sign_pe(build_pe([IMAGE]), make_signer(keys, test_root, OTHER_SUBJECT, "other"), keys)
    elif case == "expired":
        signed = sign_pe(build_pe([IMAGE]), make_signer(keys, test_root, expired=True, name="old"), keys)
    elif case == "unsigned":
        signed = build_pe([IMAGE])
    else:
        signed = sign_pe(build_pe([IMAGE]), make_signer(keys, test_root), keys)
    if case == "changed byte":
        changed = bytearray(signed)
        changed[0x400 + 0x300] ^= 0x01  # inside the embedded image: the program is not what was signed
        signed = bytes(changed)
    if case == "untrusted root":
        trusted = make_root(keys, "unrelated", "some other root")
    package = tmp_path / "update.exe"
    package.write_bytes(signed)
    root = host_root(tmp_path, trusted)
    # a file already in the cache under that name (planted, or left by hand) does not stand in for the check
    planted = root / CACHE / f"{REBAR}.rom"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(IMAGE)

    code, out, err = fetch(fwman, root, package)
    assert code == 4, err
    assert "already in the cache" not in out
    planted.unlink()
    expected = {
        "changed byte": "changed after it was signed",
        "wrong signer": f"signed by {OTHER_SUBJECT}, not by a signer the catalog records for EVGA",
        "expired": "certificate has expired",
        "untrusted root": "unable to get local issuer certificate",
        "unsigned": "carries no Authenticode signature",
    }[case]
    assert expected in err
    assert nothing_kept(root)


def test_the_flash_gate_takes_an_image_extracted_from_a_signed_package_and_the_history_says_so(
    tmp_path: Path,
) -> None:
    """On the stand-in nvflash rig, with the ReBAR image unverified in the catalog: refused until the image's
    hashes come from a signed package (as fetch records them), then flashed, named so in output and history."""
    from fixtures.nvflash.rig import REBAR_3987, build_rig

    rig = build_rig(tmp_path)
    catalog = rig.root / "var/lib/fwman/catalog"
    board = catalog / "boards/10de-2204-3842-3987.toml"
    text = board.read_text()
    rebar = text[text.index(f'version = "{REBAR_3987}"') :]
    board.write_text(text.replace(rebar, f'version = "{REBAR_3987}"\nstatus = "unverified"\nrebar = true\n'))
    index = json.loads((catalog / "index.json").read_text())
    for entry in index["files"]:
        if entry["path"] == "boards/10de-2204-3842-3987.toml":
            entry.update(sha256=sha256(board.read_bytes()), size=len(board.read_bytes()))
    (catalog / "index.json").write_text(json.dumps(index))
    flash = ("flash", "--card", "0000:41:00.0", "--image", f"3842:3987/{REBAR_3987}")

    r = rig(*flash)
    assert r.code == 3  # type: ignore[attr-defined]
    assert "is unverified" in r.stderr and "signed update program" in r.stderr  # type: ignore[attr-defined]

    subject = MAKER_SUBJECT.replace('"', '\\"')
    (rig.root / "var/lib/fwman/overrides.toml").write_text(
        f'[[override]]\nboard = "10de:2204:3842:3987"\nversion = "{REBAR_3987}"\n'
        f'md5 = "{md5(rig.new_image)}"\nsha256 = "{sha256(rig.new_image)}"\nsize = {len(rig.new_image)}\n'
        f'source = "extracted from a package signed by EVGA ({subject})"\nsigner = "{subject}"\n'
        f'package_sha256 = "{"ab" * 32}"\n'
    )
    r = rig(*flash)
    assert r.code == 0, r.stderr  # type: ignore[attr-defined]
    assert f"(image extracted from a package signed by EVGA ({MAKER_SUBJECT}))" in r.stdout  # type: ignore[attr-defined]
    records = rig("flash", "history", "--json").json()["records"]  # type: ignore[attr-defined]
    (flashed,) = [rec for rec in records if rec["kind"] == "flash"]
    assert flashed["verified_by"] == f"extracted from a package signed by EVGA ({MAKER_SUBJECT})"
    assert flashed["image_sha256"] == sha256(rig.new_image)
    # the owner report carries it, with the image's hash, for the catalog to learn
    rig.reboot()
    assert rig("upgrade", "--check").code == 0  # type: ignore[attr-defined]
    report = rig("flash", "report", "--card", "41:00.0", "--json").json()  # type: ignore[attr-defined]
    assert report["flash"]["verified_by"] == f"extracted from a package signed by EVGA ({MAKER_SUBJECT})"
    assert report["flash"]["image_sha256"] == sha256(rig.new_image)
