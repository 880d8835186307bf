"""The catalog: the bundled seed facts, the schema, lint, list/show, sign, and the checks `rom verify` uses."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwman.core.errors import VerificationError
from fwman.core.findings import Finding, Severity, blocking
from fwman.firmware.catalog.lint import lint_board_bytes, lint_directory
from fwman.firmware.catalog.load import (
    BUNDLED_CATALOG,
    Catalog,
    CatalogEntry,
    find_entry_for_rom,
    load_catalog,
    load_directory,
)
from fwman.firmware.catalog.schema import ImageStatus, parse_board, parse_index, parse_timestamp
from fwman.firmware.catalog.signing import (
    admin_keys,
    root_keys,
    verify_catalog_index,
    verify_catalog_signature,
    verify_keys_document,
)
from fwman.firmware.rom.model import RomImage
from fwman.firmware.rom.parse import parse_rom
from fwman.firmware.verify.compatible import check_compatible
from fwman.host.live import LiveHost
from tests.support.catalog import (
    LAUNCH,
    REBAR,
    WITHDRAWN,
    board_toml,
    install_local,
    md5,
    rom,
    seed_images,
    sha256,
    trust,
    write_catalog,
)
from tests.support.env import FwmanEnv

# -- the bundled catalog: the seed case, and nothing invented -------------------------------------------------


def catalog_findings(image: RomImage, entry: CatalogEntry | None, override_md5: str | None = None) -> list[Finding]:
    """Return the catalog's findings (``catalog.*``) of :func:`check_compatible` for ``image``, no card."""
    return [f for f in check_compatible(image, None, entry, override_md5=override_md5) if f.id.startswith("catalog.")]


def bundled() -> Catalog:
    return load_directory(BUNDLED_CATALOG, "bundled")


def test_bundled_3987_recommends_80_27_not_the_withdrawn_80_ad() -> None:
    board = bundled().find_board("3842:3987")
    assert board.recommended() is not None and board.recommended().version == REBAR  # type: ignore[union-attr]
    ad = board.image(WITHDRAWN)
    assert ad is not None and ad.status is ImageStatus.WITHDRAWN
    assert "power limit" in ad.status_reason and ad.superseded_by == REBAR
    launch = board.image(LAUNCH)
    assert launch is not None and launch.status is ImageStatus.SUPERSEDED
    assert launch.max_bar1_bytes == 256 * 1024**2 and launch.release_date == "2020-10"
    assert board.board.dual_firmware_switch is True


def test_bundled_3982_runs_c0_05_with_a_32_gib_bar() -> None:
    board = bundled().find_board("3842:3982")
    assert [i.version for i in board.images] == ["94.02.42.C0.05"]
    assert board.images[0].max_bar1_bytes == 32 * 1024**3


def test_bundled_catalog_invents_no_hash_url_or_part_number() -> None:
    cat = bundled()
    for board in cat.boards:
        # a part number only where the board cites the page that states it (format 2: 1043:87b0's owner write-up)
        assert board.board.part_numbers == [] or board.board.sources
        assert board.board.board_ids == []
        for image in board.images:
            assert (image.md5, image.sha256, image.chain_sha256, image.urls) == ("", "", "", [])
            # no hash: never `current`
            assert image.status is not ImageStatus.CURRENT


def test_bundled_catalog_lints_clean_and_its_signature_verifies_with_the_bundled_key(tmp_path: Path) -> None:
    assert [i for i in lint_directory(BUNDLED_CATALOG) if i.level == "error"] == []
    host = LiveHost(str(tmp_path))
    roots = root_keys(host)
    assert [k.key_id for k in roots] == ["23cb724582f7654c"]
    # the keys document is the root's; the index is signed by the catalog key it names (the root itself today)
    doc, root = verify_keys_document(
        (BUNDLED_CATALOG / "keys.json").read_bytes(), (BUNDLED_CATALOG / "keys.json.sig").read_bytes(), roots, None
    )
    assert root.key_id == "23cb724582f7654c" and root.origin.endswith("fwman/keys/fwman-catalog-2026.pub")
    assert [k.key_id for k in doc.keys] == ["23cb724582f7654c"]
    assert [r.key_id for r in doc.retired] == ["33d1cd9eab9b080a"]  # the lost key, retired in the open
    signed_on = parse_timestamp("2026-12-01T12:00:00Z")
    key = verify_catalog_index(
        (BUNDLED_CATALOG / "index.json").read_bytes(),
        (BUNDLED_CATALOG / "index.json.sig").read_bytes(),
        doc,
        [],
        signed_on,
    )
    assert key.key_id == "23cb724582f7654c"
    index = parse_index((BUNDLED_CATALOG / "index.json").read_bytes())
    assert index.version == 2 and index.expires is not None and len(index.files) == 7


def test_the_private_key_is_not_in_the_repository() -> None:
    repo = BUNDLED_CATALOG.parent
    for path in [*repo.glob("fwman/keys/*"), *repo.glob("catalog/**/*")]:
        if path.is_file():
            assert b"PRIVATE KEY" not in path.read_bytes(), path


# -- lint ---------------------------------------------------------------------------------------------------


def lint_cli(fwman: FwmanEnv, directory: Path, *extra: str) -> tuple[int, list[dict[str, str]]]:
    r = fwman("catalog", "lint", "--dir", str(directory), "--json", "--root", str(directory.parent), *extra)
    return r.code, r.json()["issues"]


def errors_of(issues: list[dict[str, str]]) -> list[str]:
    return [f"{i['file']}:{i['where']}: {i['message']}" for i in issues if i["level"] == "error"]


def test_lint_accepts_a_good_catalog(tmp_path: Path, fwman: FwmanEnv) -> None:
    key = Ed25519PrivateKey.generate()
    trust(tmp_path, key)
    cat = write_catalog(tmp_path / "cat", {"10de-2204-3842-3987": board_toml(seed_images(rom()))}, key)
    code, issues = lint_cli(fwman, cat)
    assert code == 0 and errors_of(issues) == []


@pytest.mark.parametrize(
    ("image_change", "expected"),
    [
        ({"md5": "ABC"}, "images[0].md5: malformed MD5"),
        ({"sha256": "0" * 63}, "images[0].sha256: malformed SHA-256"),
        ({"urls": ["http://example.org/x.rom"]}, "images[0].urls: 'http://example.org/x.rom' is not https"),
        ({"file": "../x.rom"}, "images[0].file: file name contains a path separator"),
        ({"file": "a\\b.rom"}, "images[0].file: file name contains a path separator"),
        ({"colour": "red"}, "images[0].colour: unknown key"),
        ({"status": "withdrawn"}, "images[0].status_reason: a withdrawn image needs the reason"),
        ({"status": "current", "md5": ""}, "images[0].status: a current image needs md5 or sha256"),
        ({"version": "94.02.42.80.ad"}, "images[0].version: must be five upper-case"),
    ],
)
def test_lint_rejects(tmp_path: Path, fwman: FwmanEnv, image_change: dict[str, object], expected: str) -> None:
    image = {"version": REBAR, "status": "current", "md5": "0" * 32, "size": 1}
    image.update(image_change)
    cat = tmp_path / "cat"
    (cat / "boards").mkdir(parents=True)
    (cat / "boards/10de-2204-3842-3987.toml").write_text(board_toml([image]))
    code, issues = lint_cli(fwman, cat)
    assert code == 4
    assert any(expected in e for e in errors_of(issues)), errors_of(issues)


def test_lint_rejects_duplicates(tmp_path: Path, fwman: FwmanEnv) -> None:
    cat = tmp_path / "cat"
    (cat / "boards").mkdir(parents=True)
    twice = [{"version": REBAR, "status": "unverified"}, {"version": REBAR, "status": "unverified"}]
    (cat / "boards/10de-2204-3842-3987.toml").write_text(board_toml(twice))
    same_hash = [
        {"version": REBAR, "status": "current", "md5": "1" * 32},
        {"version": LAUNCH, "status": "current", "md5": "1" * 32},
    ]
    (cat / "boards/10de-2204-3842-3982.toml").write_text(board_toml(same_hash, "3982"))
    # a second file for the same PCI IDs under another name
    (cat / "boards/copy.toml").write_text(board_toml([], "3982"))
    code, issues = lint_cli(fwman, cat)
    errs = "\n".join(errors_of(issues))
    assert code == 4
    assert "duplicate image version 94.02.42.80.27" in errs
    assert "duplicate hash" in errs
    assert "duplicate board 10de:2204:3842:3982" in errs
    assert "file must be named 10de-2204-3842-3982.toml" in errs


def test_lint_catches_a_file_changed_after_signing_and_a_bad_signature(tmp_path: Path, fwman: FwmanEnv) -> None:
    key = Ed25519PrivateKey.generate()
    trust(tmp_path, key)
    cat = write_catalog(tmp_path / "cat", {"10de-2204-3842-3987": board_toml(seed_images())}, key)
    board = cat / "boards/10de-2204-3842-3987.toml"
    board.write_text(board.read_text().replace('status = "withdrawn"', 'status = "superseded"'))
    (cat / "index.json").write_text((cat / "index.json").read_text().replace('"serial": 2', '"serial": 9'))
    code, issues = lint_cli(fwman, cat)
    errs = "\n".join(errors_of(issues))
    assert code == 4
    assert "changed since the index was signed" in errs
    assert "signature does not verify" in errs


def test_lint_json_carries_the_signature_the_text_shows(tmp_path: Path, fwman: FwmanEnv) -> None:
    key = Ed25519PrivateKey.generate()
    pub = trust(tmp_path, key)
    cat = write_catalog(tmp_path / "cat", {"10de-2204-3842-3987": board_toml(seed_images(rom()))}, key)
    text = fwman("catalog", "lint", "--dir", str(cat), "--root", str(tmp_path))
    doc = fwman("catalog", "lint", "--dir", str(cat), "--root", str(tmp_path), "--json").json()
    signature = doc["signature"]
    assert signature["checked"] is True and signature["good"] is True
    assert signature["origin"] == "/etc/fwman/keys.d/" + pub.name
    assert f"signature: good, key {signature['key_id']} ({signature['origin']})" in text.stdout
    (cat / "index.json.sig").unlink()
    bad = fwman("catalog", "lint", "--dir", str(cat), "--root", str(tmp_path), "--json")
    assert bad.code == 4 and bad.json()["signature"] == {
        "checked": True,
        "good": False,
        "key_id": None,
        "origin": None,
        "keys_document": None,
    }
    local = fwman("catalog", "lint", "--local", "--root", str(tmp_path), "--json")
    assert local.json()["signature"] is None  # local entries are not signed: nothing was checked


def test_lint_text_output_names_file_and_key(tmp_path: Path, fwman: FwmanEnv) -> None:
    cat = tmp_path / "cat"
    (cat / "boards").mkdir(parents=True)
    (cat / "boards/10de-2204-3842-3987.toml").write_text(board_toml([{"version": REBAR, "status": "nope"}]))
    r = fwman("catalog", "lint", "--dir", str(cat))
    assert r.code == 4
    assert "boards/10de-2204-3842-3987.toml: images[0].status: error:" in r.stdout
    assert "index.json: error: no index: run `fwman catalog sign --key FILE`" in r.stdout  # an error (issue 14)
    assert "catalog lint: 2 error(s)" in r.stderr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_parse_board_gives_a_board_or_a_verification_error(data: bytes) -> None:
    try:
        parse_board(data, "fuzz.toml")
        parsed = True
    except VerificationError:
        parsed = False
    issues = lint_board_bytes(data, "boards/fuzz.toml")
    # lint and the loader agree: a file the loader refuses has a lint error, naming the file
    if not parsed:
        assert any(i.level == "error" and i.file == "boards/fuzz.toml" for i in issues), issues


_keys = st.sampled_from(["version", "status", "md5", "sha256", "urls", "file", "size", "rebar", "bogus"])
_values = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.lists(st.text(max_size=10), max_size=2))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(_keys, _values, max_size=6), max_size=3))
def test_structured_fuzz_of_images_never_crashes(images: list[dict[str, object]]) -> None:
    try:
        text = board_toml(images)  # type: ignore[arg-type]
    except TypeError:
        return
    try:
        parse_board(text.encode(), "fuzz.toml")
    except VerificationError:
        pass
    assert all(i.level in ("error", "warning") for i in lint_board_bytes(text.encode(), "boards/fuzz.toml"))


# -- list and show --------------------------------------------------------------------------------------------


def test_list_shows_the_bundled_catalog(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "list", "--root", str(tmp_path))
    assert r.code == 0
    assert "bundled catalog (serial 2, 2026-12-01, expires 2027-12-01) at" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("3842:") and "no image listed" not in line]
    lines = {next(w for w in row.split() if w.count(".") == 4): row for row in rows}
    assert "withdrawn" in lines[WITHDRAWN] and "unverified" in lines[REBAR] and "superseded" in lines[LAUNCH]
    # issue 36 row 1: the boards with no image listed were hidden; each has a row, and what is not known is said
    for subsystem in ("10de:147d", "1462:3881", "3842:3973", "1043:87eb"):
        (row,) = [line for line in r.stdout.splitlines() if line.startswith(subsystem)]
        assert "no image listed" in row
    founders = r.stdout.split("NVIDIA GeForce RTX 3090 Founders Edition (10de:147d)\n", 1)[1].splitlines()
    assert founders[0].startswith("  known:   PCI IDs 10de:2204:10de:147d; maker NVIDIA")
    assert founders[1].startswith("  unknown: part numbers; board IDs; update-program signer")
    doc = fwman("catalog", "list", "--json", "--root", str(tmp_path)).json()
    assert doc["schema"] == "fwman.catalog-list/2" and doc["catalog"]["source"] == "bundled"
    seed = next(b for b in doc["boards"] if b["subsystem"] == "3842:3987")
    assert "published hash of 3 image(s)" in seed["facts_unknown"]
    assert "dual firmware switch: yes" in seed["facts_known"]
    assert {b["subsystem"] for b in doc["boards"]} == {
        "3842:3982",
        "3842:3987",
        "10de:147d",
        "1462:3881",
        "3842:3973",
        "1043:87b0",
        "1043:87eb",
    }
    assert doc["catalog"]["expires"] == "2027-12-01T00:00:00Z"


def test_show_board_text_and_json(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "show", "3842:3987", "--root", str(tmp_path))
    assert r.code == 0
    assert "94.02.42.80.27  unverified  <- recommended" in r.stdout
    assert "owners reported a lowered power limit" in r.stdout
    doc = fwman("catalog", "show", "10de:2204:3842:3987", "--json", "--root", str(tmp_path)).json()
    assert doc["recommended"] == REBAR
    # newest first in the catalog's order: .27 replaced the withdrawn .AD (build codes are never compared)
    assert [i["version"] for i in doc["images"]] == [REBAR, WITHDRAWN, LAUNCH]


def test_show_unknown_board_is_a_usage_error(tmp_path: Path, fwman: FwmanEnv) -> None:
    r = fwman("catalog", "show", "1043:0001", "--root", str(tmp_path))
    assert r.code == 2
    assert "no catalog board 1043:0001" in r.stderr and "3842:3987" in r.stderr


def test_a_newer_local_copy_wins_and_an_older_one_is_ignored(tmp_path: Path) -> None:
    image = rom()
    src = write_catalog(tmp_path / "src", {"10de-2204-3842-3987": board_toml(seed_images(image))}, serial=5)
    install_local(tmp_path / "root", src)
    cat = load_catalog(LiveHost(str(tmp_path / "root")))
    assert (cat.source, cat.serial) == ("local", 5)
    assert cat.entry(f"3842:3987/{REBAR}").image.sha256 == sha256(image)

    old = write_catalog(tmp_path / "old", {"10de-2204-3842-3987": board_toml(seed_images(image))}, serial=1)
    (old / "index.json").write_text((old / "index.json").read_text().replace('"serial": 1', '"serial": 1'))
    install_local(tmp_path / "root2", old)
    bundled_dir = tmp_path / "bundled"
    write_catalog(bundled_dir, {"10de-2204-3842-3987": board_toml(seed_images())}, serial=3)
    cat2 = load_catalog(LiveHost(str(tmp_path / "root2")), bundled=bundled_dir)
    assert (cat2.source, cat2.serial) == ("bundled", 3)
    assert "older: not used" in cat2.notes[0]


def test_a_tampered_local_copy_is_refused(tmp_path: Path) -> None:
    src = write_catalog(tmp_path / "src", {"10de-2204-3842-3987": board_toml(seed_images())})
    local = install_local(tmp_path / "root", src)
    board = local / "boards/10de-2204-3842-3987.toml"
    board.write_text(board.read_text().replace("withdrawn", "current"))
    with pytest.raises(VerificationError, match=r"SHA-256 does not match index\.json"):
        load_catalog(LiveHost(str(tmp_path / "root")))


# -- sign -----------------------------------------------------------------------------------------------------


def test_sign_writes_an_index_and_a_signature_that_verifies(tmp_path: Path, fwman: FwmanEnv) -> None:
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    key_file = tmp_path / "maint.pem"
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cat = tmp_path / "cat"
    (cat / "boards").mkdir(parents=True)
    (cat / "boards/10de-2204-3842-3987.toml").write_text(board_toml(seed_images()))
    r = fwman("catalog", "sign", "--key", str(key_file), "--dir", str(cat), "--date", "2026-02-03")
    assert r.code == 0, r.stderr
    assert "serial 1, 2026-02-03, 1 file(s)" in r.stdout
    r = fwman("catalog", "sign", "--key", str(key_file), "--dir", str(cat), "--date", "2026-02-04")
    assert "serial 2, 2026-02-04" in r.stdout
    trust(tmp_path, key)
    keys = admin_keys(LiveHost(str(tmp_path)))
    assert verify_catalog_signature((cat / "index.json").read_bytes(), (cat / "index.json.sig").read_bytes(), keys)
    # a serial that does not grow is refused; a catalog that does not lint is never signed
    assert fwman("catalog", "sign", "--key", str(key_file), "--dir", str(cat), "--serial", "2").code == 2
    (cat / "boards/10de-2204-3842-3987.toml").write_text(board_toml([{"version": REBAR, "status": "x"}]))
    r = fwman("catalog", "sign", "--key", str(key_file), "--dir", str(cat))
    assert r.code == 4 and "before signing" in r.stderr


def test_sign_refuses_a_key_that_is_not_ed25519(tmp_path: Path, fwman: FwmanEnv) -> None:
    key_file = tmp_path / "not-a-key.pem"
    key_file.write_text("hello\n")
    (tmp_path / "cat/boards").mkdir(parents=True)
    r = fwman("catalog", "sign", "--key", str(key_file), "--dir", str(tmp_path / "cat"))
    assert r.code == 2 and "openssl genpkey -algorithm ed25519" in r.stderr
    assert not (tmp_path / "cat/index.json").exists()


# -- what `fwman rom verify` asks: catalog_findings ------------------------------------------------------------


def entry_for(image: bytes | None, version: str = REBAR) -> CatalogEntry:
    board = parse_board(board_toml(seed_images(image)).encode(), "t.toml")
    found = board.image(version)
    assert found is not None
    return CatalogEntry(board, found)


def test_matching_hash_and_current_status_pass() -> None:
    data = rom()
    findings = catalog_findings(parse_rom(data), entry_for(data))
    assert {f.id: f.severity for f in findings} == {"catalog.hash": Severity.OK, "catalog.status": Severity.OK}
    assert findings[0].evidence["SHA-256"] == sha256(data)


def test_a_different_file_under_the_same_version_is_blocked() -> None:
    published = rom()
    other = rom(filler_seed=7)  # same version string, different bytes
    f = {x.id: x for x in catalog_findings(parse_rom(other), entry_for(published))}
    assert f["catalog.hash"].severity is Severity.BLOCK
    assert f["catalog.hash"].evidence["expected"] == sha256(published)


def test_withdrawn_image_is_blocked_even_without_a_hash_problem() -> None:
    data = rom(version=WITHDRAWN)
    f = {x.id: x for x in catalog_findings(parse_rom(data), entry_for(None, WITHDRAWN), override_md5=md5(data))}
    assert f["catalog.hash"].severity is Severity.OK
    assert f["catalog.status"].severity is Severity.BLOCK
    assert "lowered power limit" in f["catalog.status"].message and REBAR in (f["catalog.status"].fix or "")


def test_unverified_image_blocks_until_an_md5_is_supplied() -> None:
    data = rom()
    before = catalog_findings(parse_rom(data), entry_for(None))
    assert [f.id for f in blocking(before)] == ["catalog.hash"]
    assert "--expect-md5" in (blocking(before)[0].fix or "")
    after = catalog_findings(parse_rom(data), entry_for(None), override_md5=md5(data))
    assert blocking(after) == []
    wrong = catalog_findings(parse_rom(data), entry_for(None), override_md5="0" * 32)
    assert [f.id for f in blocking(wrong)] == ["catalog.hash"]


def test_image_for_another_subsystem_is_blocked() -> None:
    data = rom(subsystem_device=0x3982)
    f = {x.id: x for x in catalog_findings(parse_rom(data), entry_for(rom()))}
    assert f["catalog.board"].severity is Severity.BLOCK


def test_find_entry_for_rom_prefers_hash_then_subsystem_and_version(tmp_path: Path) -> None:
    data = rom()
    cat = load_directory(write_catalog(tmp_path, {"10de-2204-3842-3987": board_toml(seed_images(data))}))
    assert find_entry_for_rom(cat, parse_rom(data)) is not None
    by_version = find_entry_for_rom(cat, parse_rom(rom(version=LAUNCH)))
    assert by_version is not None and by_version.image.version == LAUNCH
    assert find_entry_for_rom(cat, parse_rom(rom(subsystem_device=0x1234))) is None
    none = catalog_findings(parse_rom(rom(subsystem_device=0x1234)), None)
    assert [(f.id, f.severity) for f in none] == [("catalog.entry", Severity.WARN)]


def test_load_catalog_attaches_the_hosts_recorded_md5_so_rom_verify_accepts_the_image(tmp_path: Path) -> None:
    data = rom()
    src = write_catalog(tmp_path / "src", {"10de-2204-3842-3987": board_toml(seed_images())})  # unverified
    root = tmp_path / "root"
    install_local(root, src)
    state = root / "var/lib/fwman"
    state.mkdir(parents=True, exist_ok=True)
    (state / "overrides.toml").write_text(
        f'[[override]]\nboard = "10de:2204:3842:3987"\nversion = "{REBAR}"\nmd5 = "{md5(data)}"\nsource = "vendor"\n'
    )
    cat = load_catalog(LiveHost(str(root)))
    entry = cat.entry(f"3842:3987/{REBAR}")
    assert entry.override is not None and entry.override.source == "vendor"
    assert blocking(catalog_findings(parse_rom(data), entry)) == []
    # the same entry found from the image (what `fwman rom verify` does)
    found = find_entry_for_rom(cat, parse_rom(data))
    assert found is not None and found.override == entry.override
    other = rom(filler_seed=5)
    assert [f.id for f in blocking(catalog_findings(parse_rom(other), entry))] == ["catalog.hash"]


def test_conflicting_overrides_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for path, digest in (("etc/fwman/catalog-overrides.toml", "1" * 32), ("var/lib/fwman/overrides.toml", "2" * 32)):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(
            f'[[override]]\nboard = "10de:2204:3842:3987"\nversion = "{REBAR}"\nmd5 = "{digest}"\nsource = "x"\n'
        )
    cat = load_catalog(LiveHost(str(root)))
    with pytest.raises(VerificationError, match="conflicting vendor MD5s"):
        cat.entry(f"3842:3987/{REBAR}")


@settings(max_examples=100, deadline=None)
@given(index=st.binary(max_size=300), sig=st.binary(max_size=300))
def test_index_and_signature_parsers_give_a_model_or_a_verification_error(index: bytes, sig: bytes) -> None:
    from fwman.firmware.catalog.schema import parse_index

    keys = root_keys(LiveHost("/nonexistent-root"))
    for call in (lambda: parse_index(index), lambda: verify_catalog_signature(index, sig, keys)):
        try:
            call()
        except VerificationError:
            pass


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["format", "version", "algorithm", "key_id", "signature"]),
                       st.one_of(st.text(max_size=30), st.integers(), st.none()), max_size=5))  # fmt: skip
def test_malformed_signature_documents_are_refused(doc: dict[str, object]) -> None:
    import json as _json

    keys = root_keys(LiveHost("/nonexistent-root"))
    with pytest.raises(VerificationError):
        verify_catalog_signature(b"{}", _json.dumps(doc).encode(), keys)


# -- catalog update without configuration, and from a directory (a git checkout) -----------------------------


def test_update_without_a_url_checks_the_bundled_catalog_and_says_how_to_follow_the_maintainers(
    tmp_path: Path, fwman: FwmanEnv
) -> None:
    """Issue 36 row 1: `catalog update` said "no catalog URL configured" and stopped."""
    r = fwman("catalog", "update", "--root", str(tmp_path))
    assert r.code == 0, r.stderr
    assert "no catalog URL configured: checking the catalog bundled with fwman" in r.stderr
    assert r.stdout.startswith("catalog already up to date (serial 2, 2026-12-01; checked against ")
    assert "signature: key 23cb724582f7654c" in r.stdout
    assert not (tmp_path / "var/lib/fwman/catalog").exists()  # nothing to install: the bundled one is in use


def test_update_from_a_catalog_directory_verifies_it_as_a_download_would(tmp_path: Path, fwman: FwmanEnv) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from tests.support.catalog import board_toml, seed_images, trust, write_catalog

    key = Ed25519PrivateKey.generate()
    root = tmp_path / "root"
    trust(root, key)
    checkout = write_catalog(
        tmp_path / "checkout/catalog", {"10de-2204-3842-3987": board_toml(seed_images(None))}, key, serial=7
    )
    r = fwman("catalog", "update", "--url", str(checkout), "--root", str(root))
    assert r.code == 0, r.stderr
    assert f"installed catalog serial 7 (2026-01-02, 1 file(s)) from {checkout}" in r.stdout
    assert (root / "var/lib/fwman/catalogs/7/boards/10de-2204-3842-3987.toml").is_file()
    # a board file changed after signing: refused, the installed copy untouched
    board = checkout / "boards/10de-2204-3842-3987.toml"
    board.write_text(board.read_text().replace("EVGA GeForce", "EVGA  GeForce"))
    write_catalog(checkout, {}, None, serial=8)  # a new index, but no signature over it: the old .sig stays
    r = fwman("catalog", "update", "--url", f"file://{checkout}", "--root", str(root))
    assert r.code == 4 and "signature" in r.stderr.lower(), r.stderr
    assert (root / "var/lib/fwman/catalog").resolve().name == "7"
    assert fwman("catalog", "update", "--url", str(tmp_path / "nowhere"), "--root", str(root)).code == 2
