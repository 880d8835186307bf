"""The driver version move's pure parts (versions, apt's listings, the record) and its file actions on a temp root:
the kept set restores exactly, the record's stages, the boot-time note."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fwman.core.errors import MissingError, ParseError
from fwman.driver.move.keep import KeepFiles, kept_paths, read_kept
from fwman.driver.move.packages import deb_file_prefix, parse_madison, upstream_version, version_for
from fwman.driver.move.record import (
    COMMITTED,
    KEPT_INDEX,
    ROLLBACK_COMMAND,
    ROLLED_BACK,
    SCHEMA,
    STAGED_STAGE,
    MoveRecord,
    PackageMove,
    WriteRecord,
    boot_note,
    read_record,
)
from fwman.driver.move.rollback import RestoreKept
from fwman.driver.move.runfile import CONTAINER_LIBS, InstallRunInContainer, StageRun, container_owned
from fwman.host.actions import apply_all, pending
from fwman.host.live import LiveHost

KVER = "6.1.0-47-amd64"


@pytest.mark.parametrize(
    ("debian", "upstream"),
    [
        ("570.86.16-1", "570.86.16"),
        ("535.216.01-1~deb12u1", "535.216.01"),
        ("1:575.51.02-0ubuntu1", "575.51.02"),
        ("575.51.02", "575.51.02"),
        ("2:1.2-3-4", "1.2-3"),  # the Debian revision is after the last hyphen (deb-version(7))
    ],
)
def test_upstream_version_drops_epoch_and_revision(debian: str, upstream: str) -> None:
    assert upstream_version(debian) == upstream


def test_madison_lists_each_package_s_versions_in_apt_s_order() -> None:
    text = (
        "libnvidia-ml1 | 575.51.02-1 | file:/srv/repo ./ Packages\n"
        "libnvidia-ml1 | 570.86.16-1 | file:/srv/repo ./ Packages\n"
        "libnvidia-ml1 | 570.86.16-1 | /var/lib/dpkg/status\n"
        "W: something apt warns about\n"
        "nvidia-smi | 575.51.02-1 | file:/srv/repo ./ Packages\n"
    )
    offered = parse_madison(text)
    assert offered == {"libnvidia-ml1": ["575.51.02-1", "570.86.16-1"], "nvidia-smi": ["575.51.02-1"]}
    assert version_for(offered["libnvidia-ml1"], "570.86.16") == "570.86.16-1"
    assert version_for(offered["nvidia-smi"], "570.86.16") is None


@given(st.text())
def test_madison_parser_never_raises_and_keeps_what_it_reads(text: str) -> None:
    offered = parse_madison(text)
    for name, versions in offered.items():
        assert name and " " not in name and versions and len(set(versions)) == len(versions)
        rows = [[p.strip() for p in line.split("|")][:2] for line in text.splitlines()]
        assert all([name, v] in rows for v in versions)


def test_deb_file_prefix_spells_the_epoch_as_apt_does() -> None:
    assert deb_file_prefix("libcuda1", "1:575.51.02-1") == "libcuda1_1%3a575.51.02-1_"


def _record(stage: str = COMMITTED) -> MoveRecord:
    return MoveRecord(
        "570.86.16", "575.51.02", stage, [KVER], "570.86.16-p2p", "575.51.02-p2p", "story",
        [PackageMove("libnvidia-ml1", "570.86.16-1", "575.51.02-1")], True, "2026-12-06T09:00:00+00:00",
    )  # fmt: skip


def test_record_round_trips() -> None:
    record = _record()
    assert MoveRecord.from_json(record.to_json()) == record
    assert json.loads(record.to_json())["schema"] == SCHEMA


@given(st.binary(max_size=400))
def test_record_reader_gives_a_record_or_a_parse_error(data: bytes) -> None:
    try:
        record = MoveRecord.from_json(data)
    except ParseError:
        return
    assert isinstance(record.to_version, str) and isinstance(record.stage, str)


@pytest.mark.parametrize(
    "doc",
    [{"to_version": 5, "stage": "committed"}, {"to_version": "575.51.02"}, {"to_version": "5", "stage": "s",
     "kernels": "6.1"}, {"to_version": "5", "stage": "s", "packages": [{"name": "x"}]}],
)  # fmt: skip
def test_a_damaged_record_names_the_field(doc: dict[str, object]) -> None:
    with pytest.raises(ParseError):
        MoveRecord.from_json(json.dumps(doc).encode())


def _root(tmp_path: Path) -> tuple[Path, LiveHost]:
    root = tmp_path / "root"
    updates = root / f"lib/modules/{KVER}/updates/fwman"
    updates.mkdir(parents=True)
    for name in ("nvidia", "nvidia-uvm"):
        (updates / f"{name}.ko").write_bytes(f"old {name}".encode())
    (root / "var/lib/fwman/modules").mkdir(parents=True)
    (root / f"var/lib/fwman/modules/{KVER}.json").write_text('{"kernel": "old"}\n')
    (root / "etc/apt/preferences.d").mkdir(parents=True)
    (root / "etc/apt/preferences.d/fwman-nvidia-userspace").write_text("Package: libnvidia-ml1\n")
    os.chmod(root / "etc/apt/preferences.d/fwman-nvidia-userspace", 0o600)
    return root, LiveHost(str(root))


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    skip = root / "var/lib/fwman/move"
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o7777)
        for p in sorted(root.rglob("*"))
        if p.is_file() and skip not in p.parents
    }


def test_kept_files_restore_exactly_and_absent_ones_go(tmp_path: Path) -> None:
    root, host = _root(tmp_path)
    before = _tree(root)
    files = kept_paths(host, [KVER])
    assert f"/lib/modules/{KVER}/updates/fwman/nvidia-drm.ko" in files  # absent now: recorded as absent
    apply_all(host, [KeepFiles(files)])
    index = read_kept(host)
    assert index.files[f"/lib/modules/{KVER}/updates/fwman/nvidia-drm.ko"] is None
    assert index.files["/etc/apt/preferences.d/fwman-nvidia-userspace"]["mode"] == 0o600  # type: ignore[index]
    # the commit changes files, adds some, removes one
    (root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko").write_bytes(b"new nvidia")
    (root / f"lib/modules/{KVER}/updates/fwman/nvidia-drm.ko").write_bytes(b"new drm")
    (root / "etc/apt/preferences.d/fwman-nvidia-userspace").unlink()
    (root / "etc/depmod.d").mkdir(parents=True)
    (root / "etc/depmod.d/fwman.conf").write_text("override nvidia * updates/fwman\n")
    restore = RestoreKept(index)
    assert pending(host, [restore]) == [restore]
    apply_all(host, [restore])
    assert _tree(root) == before
    assert pending(host, [restore]) == []  # a second restore changes nothing


def test_a_kept_copy_that_changed_is_not_restored(tmp_path: Path) -> None:
    from fwman.core.errors import VerificationError

    root, host = _root(tmp_path)
    apply_all(host, [KeepFiles(kept_paths(host, [KVER]))])
    index = read_kept(host)
    entry = index.files[f"/lib/modules/{KVER}/updates/fwman/nvidia.ko"]
    assert entry is not None
    (root / str(entry["copy"]).lstrip("/")).write_bytes(b"tampered")
    (root / f"lib/modules/{KVER}/updates/fwman/nvidia.ko").write_bytes(b"new")
    with pytest.raises(VerificationError, match="changed since it was kept"):
        RestoreKept(index).apply(host)


def test_no_kept_set_is_said(tmp_path: Path) -> None:
    _, host = _root(tmp_path)
    with pytest.raises(MissingError, match="nothing to roll back to"):
        read_kept(host)


def test_the_record_step_is_needed_until_the_record_is_at_its_stage(tmp_path: Path) -> None:
    _, host = _root(tmp_path)
    staged, committed = WriteRecord(_record(STAGED_STAGE)), WriteRecord(_record())
    assert "570.86.16 -> 575.51.02: staged" in staged.describe()
    apply_all(host, [staged])
    assert not staged.is_needed(host) and committed.is_needed(host)
    apply_all(host, [committed])
    assert read_record(host) == _record()


def test_boot_note_names_the_rollback_when_the_new_module_is_not_loaded(tmp_path: Path) -> None:
    root, host = _root(tmp_path)
    assert boot_note(host) is None  # no move
    apply_all(host, [WriteRecord(_record())])
    note = boot_note(host)
    assert note is not None and "no nvidia module is loaded" in note and ROLLBACK_COMMAND in note
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("570.86.16\n")
    note = boot_note(host)
    assert note is not None and "the nvidia module loaded is 570.86.16" in note
    (root / "sys/module/nvidia/version").write_text("575.51.02\n")
    assert boot_note(host) is None
    (root / "sys/module/nvidia/version").write_text("570.86.16\n")
    apply_all(host, [WriteRecord(_record(ROLLED_BACK))])
    assert boot_note(host) is None  # rolled back: the old module is the right one


def test_links_and_owned_directories_restore_exactly(tmp_path: Path) -> None:
    """A container's libraries: the versioned file and its .so.1 link kept; the next version's removed."""
    root, host = _root(tmp_path)
    lib = root / "srv/ct/usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.565.77").write_bytes(b"565")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.565.77")
    (lib / "libc.so.6").write_bytes(b"not NVIDIA's")
    before = _tree(root)
    links = {str(p.relative_to(root)): os.readlink(p) for p in root.rglob("*") if p.is_symlink()}
    owned = [("/srv/ct/usr/lib/x86_64-linux-gnu", r"libcuda\.so.*")]
    apply_all(host, [KeepFiles([], owned)])
    kept = read_kept(host)
    assert kept.files["/srv/ct/usr/lib/x86_64-linux-gnu/libcuda.so.1"] == {"link": "libcuda.so.565.77"}
    assert "/srv/ct/usr/lib/x86_64-linux-gnu/libc.so.6" not in kept.files
    # what the installer of the next version does: its file, the link moved, the old file gone
    (lib / "libcuda.so.565.77").unlink()
    (lib / "libcuda.so.570.86.16").write_bytes(b"570")
    (lib / "libcuda.so.1").unlink()
    (lib / "libcuda.so.1").symlink_to("libcuda.so.570.86.16")
    restore = RestoreKept(kept)
    apply_all(host, [restore])
    assert _tree(root) == before
    assert {str(p.relative_to(root)): os.readlink(p) for p in root.rglob("*") if p.is_symlink()} == links
    assert pending(host, [restore]) == []


@settings(deadline=None, max_examples=60)  # a temp root per example: file system time, not the parser's
@given(st.binary(max_size=300))
def test_the_kept_index_reader_gives_a_set_or_a_parse_error(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        host = LiveHost(tmp)
        host.write_bytes(KEPT_INDEX, data)
        try:
            kept = read_kept(host)
        except ParseError:
            return
        assert isinstance(kept.files, dict) and isinstance(kept.owned, list)


def test_the_installer_is_staged_only_when_it_hashes_as_given(tmp_path: Path) -> None:
    import hashlib

    from fwman.driver.move.record import MoveRefused

    _, host = _root(tmp_path)
    data = b"#!/bin/sh\n# NVIDIA-Linux-x86_64-570.86.16.run\n"
    wrong = StageRun(lambda: data, "0" * 64, "570.86.16")
    with pytest.raises(MoveRefused, match="is not the 0000"):
        wrong.apply(host)
    assert not host.exists(wrong.path)
    right = StageRun(lambda: data, hashlib.sha256(data).hexdigest(), "570.86.16")
    assert right.path.endswith("/staged/NVIDIA-Linux-x86_64-570.86.16.run") and right.is_needed(host)
    apply_all(host, [right])
    assert host.read_bytes(right.path) == data and host.file_mode(right.path) == 0o755
    assert pending(host, [right]) == []


def test_the_container_install_runs_the_installer_chrooted_until_the_libraries_are_the_target(tmp_path: Path) -> None:
    root, host = _root(tmp_path)
    found: dict[str, set[str]] = {"/srv/ct": {"565.77"}}
    step = InstallRunInContainer("/srv/ct", "570.86.16", lambda h, r: found[r])
    (root / "srv/ct").mkdir(parents=True)
    assert step.is_needed(host)
    assert step.command(host) == [
        "chroot", str(root / "srv/ct"), "sh", "/tmp/NVIDIA-Linux-x86_64-570.86.16.run", "--no-kernel-modules",
        "--silent",
    ]  # fmt: skip
    found["/srv/ct"] = {"570.86.16"}
    assert not step.is_needed(host)
    assert container_owned("/srv/ct/")[0] == ("/srv/ct/usr/lib/x86_64-linux-gnu", CONTAINER_LIBS)
