"""Row 9: state files are evidence. A damaged one is reported (file, what is wrong, what to do) and blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.hostgen.materialize import materialize
from fwman.core import paths
from tests.support.counting import CountingEnv
from tests.support.env import EXAMPLE_HOST
from tests.support.errors import one_error_line

#: a few hundred KB past the interpreter's recursion limit (it was `unexpected RecursionError`, exit 1)
DEEP = "[" * 200_000 + "]" * 200_000
GARBAGE = ["{{{", "", "[]", '{"format": "fwman-journal", "version": 1}', "\xff\xfe", "null", DEEP]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Return a live root tree made from the 4x3090 snapshot."""
    return materialize(EXAMPLE_HOST, tmp_path / "root")


def put(root: Path, host_path: str, text: str) -> Path:
    path = root / host_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    return path


@pytest.mark.parametrize("garbage", GARBAGE)
def test_an_unreadable_journal_blocks_resume_and_is_named_by_status(
    attack: CountingEnv, root: Path, garbage: str
) -> None:
    journal = put(root, f"{paths.FLASH_JOURNAL_DIR}/20261201T000000Z-flash.json", garbage)
    before = journal.read_bytes()
    r = attack("--root", str(root), "flash", "resume")
    assert r.code == 3, r.stderr  # never "nothing to resume"
    line = one_error_line(r)
    assert "unreadable flash journal" in line and str(paths.FLASH_JOURNAL_DIR) in line
    assert "nothing to resume" not in r.stdout
    r = attack("--root", str(root), "flash", "status")
    assert r.code == 3 and "unreadable flash journal" in one_error_line(r)
    assert journal.read_bytes() == before  # evidence is left as it was


def test_an_unreadable_journal_blocks_a_new_flash_before_any_write(root: Path) -> None:
    from fwman.core.errors import BlockedError
    from fwman.firmware.ops.journal import Journal
    from fwman.host.live import LiveHost

    put(root, f"{paths.FLASH_JOURNAL_DIR}/x.json", "{{{")
    journal = Journal(LiveHost(str(root)))
    with pytest.raises(BlockedError, match=r"unreadable flash journal: .*x\.json"):
        journal.require_readable()
    assert sorted(p.name for p in (root / paths.FLASH_JOURNAL_DIR.lstrip("/")).iterdir()) == ["x.json"]


@pytest.mark.parametrize("garbage", ["{{{", "not json", '{"time": 1}', "[1]", DEEP])
def test_a_damaged_history_line_is_reported(attack: CountingEnv, root: Path, garbage: str) -> None:
    good = '{"time": "t", "kind": "flash", "card": "0000:41:00.0", "result": "success"}'
    put(root, paths.FLASH_HISTORY_FILE, f"{good}\n{garbage}\n")
    r = attack("--root", str(root), "flash", "history")
    assert r.code == 4
    assert "0000:41:00.0" in r.stdout  # what could be read is shown
    assert f"damaged flash history: {paths.FLASH_HISTORY_FILE} line 2" in one_error_line(r)
    r = attack("--root", str(root), "upgrade", "--check")
    assert r.code == 4 and "damaged flash history" in one_error_line(r)


@pytest.mark.parametrize("garbage", ["{bad", "[]", '{"removed": 5}', '{"removed": [1]}', "\xff", DEEP])
def test_an_unreadable_dkms_block_record(attack: CountingEnv, root: Path, garbage: str) -> None:
    record = put(root, paths.DKMS_BLOCK_STATE, garbage)
    for argv in (("dkms", "status"), ("dkms", "unblock"), ("dkms", "block")):
        r = attack("--root", str(root), *argv)
        assert r.code == 4, (argv, r.stderr)  # never "not blocked"
        assert f"unreadable DKMS block record {paths.DKMS_BLOCK_STATE}" in one_error_line(r)
    assert record.read_bytes() == garbage.encode("utf-8", errors="surrogateescape")


@pytest.mark.parametrize("garbage", ["xx", "[]", "{}", '{"fork": 3}', DEEP])
def test_an_unreadable_module_source_record(attack: CountingEnv, root: Path, garbage: str) -> None:
    put(root, paths.MODULES_SOURCE_RECORD, garbage)
    r = attack("--root", str(root), "modules", "status")
    assert r.code == 4, r.stderr  # never "no module source configured"
    assert f"unreadable module source record {paths.MODULES_SOURCE_RECORD}" in one_error_line(r)
    assert "no module source configured" not in r.stdout


@pytest.mark.parametrize("garbage", ["{{{", DEEP])
def test_an_unreadable_marker_is_shown_never_taken_as_none(attack: CountingEnv, root: Path, garbage: str) -> None:
    from fwman.driver.build.manifest import failed_path

    kver = sorted(p.name for p in (root / "lib/modules").iterdir())[0]
    put(root, failed_path(kver), garbage)
    r = attack("--root", str(root), "modules", "status", "--json")
    row = next(k for k in r.json()["kernels"] if k["kernel"] == kver)
    assert row["safe_to_boot"] is False
    assert f"marker {failed_path(kver)} unreadable" in row["why"]


@pytest.mark.parametrize("garbage", ["{{{", DEEP])
def test_an_unreadable_backup_manifest(attack: CountingEnv, root: Path, garbage: str) -> None:
    put(root, paths.BACKUPS_MANIFEST, garbage)
    r = attack("--root", str(root), "backup", "list")
    assert r.code == 4
    assert paths.BACKUPS_MANIFEST in one_error_line(r)
