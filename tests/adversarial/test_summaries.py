"""Rows 11-13, 15, 17: honest summaries, a clean broken pipe, a lint that does not pass what the docs forbid;
and --root / container roots that stay inside themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.hostgen.materialize import materialize
from fixtures.romgen import RomSpec, build_rom
from fwman.core import paths
from tests.support.counting import CountingEnv, tried
from tests.support.env import EXAMPLE_HOST, REPO
from tests.support.errors import one_error_line


@pytest.fixture
def unreadable_fw(tmp_path: Path) -> tuple[Path, CountingEnv]:
    """Return a live root whose firmware versions cannot be read (driver unloaded: no nvidia-smi, no /proc)."""
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    for info in (root / "proc/driver/nvidia/gpus").glob("*/information"):
        info.unlink()
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return root, CountingEnv(variables={"PATH": str(empty)})


def test_row_11_no_nothing_to_flash_when_firmware_is_unreadable(unreadable_fw: tuple[Path, CountingEnv]) -> None:
    root, run = unreadable_fw
    r = run("--root", str(root), "upgrade", "--dry-run")
    assert r.code == 5, r.stderr
    assert "Nothing to flash" not in r.stdout
    assert "cannot plan: the firmware version of 4 card(s) could not be read" in one_error_line(r)
    r = run("--root", str(root), "upgrade", "--dry-run", "--json")
    assert r.code == 5 and json.loads(r.stdout)["ready"] is False


def test_row_12_no_none_and_no_exit_0_when_the_check_cannot_run(unreadable_fw: tuple[Path, CountingEnv]) -> None:
    root, run = unreadable_fw
    r = run("--root", str(root), "upgrade", "--check")
    assert r.code == 5, r.stderr
    assert "None" not in r.stdout and "firmware version unknown" in r.stdout
    assert "cannot check 4 card(s): firmware version unreadable" in one_error_line(r)


def _backup_manifest(board_id: str | None) -> str:
    entry = {
        "path": "/var/lib/fwman/backups/x.rom",
        "run": "20261201T000000Z",
        "time": "t",
        "card": "0000:41:00.0",
        "subsystem": "3842:3987",
        "device_id": "2204",
        "version": "94.02.26.48.15",
        "board_id": board_id,
        "size": 1,
        "sha256": "0" * 64,
        "md5": "0" * 32,
        "chain_sha256": "0" * 64,
    }
    return json.dumps({"format": "fwman-backups", "version": 1, "backups": [entry]})


@pytest.mark.parametrize(
    ("recorded", "given", "code", "text"),
    [
        ("0x0240", "0x0240", 0, "board ID 0x0240 matches (given)"),
        ("0x0240", "240", 0, "board ID 0x0240 matches (given)"),
        ("0x0240", "0x0241", 3, "image board ID 0x0241 (given) differs from the card's 0x0240"),
        (None, "0x0240", 0, "the card's board ID is unknown"),
    ],
)
def test_row_13_board_id_is_compared_with_what_nvflash_reported(
    tmp_path: Path, recorded: str | None, given: str, code: int, text: str
) -> None:
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    (root / paths.BACKUPS_MANIFEST.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (root / paths.BACKUPS_MANIFEST.lstrip("/")).write_text(_backup_manifest(recorded))
    image = tmp_path / "img.rom"
    image.write_bytes(build_rom(RomSpec(version="94.02.71.00.01")))
    r = CountingEnv(variables={"PATH": str(tmp_path)})(
        "--root", str(root), "rom", "verify", str(image), "--card", "41:00.0", "--board-id", given
    )
    assert r.code == code, r.stdout + r.stderr
    assert text in r.stdout
    assert "None" not in r.stdout


def test_row_15_a_broken_pipe_is_quiet_and_exit_0() -> None:
    tried()
    script = f"{sys.executable} -m fwman --snapshot {EXAMPLE_HOST} upgrade --dry-run | head -1; exit ${{PIPESTATUS[0]}}"
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=REPO, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert p.stdout.startswith("fwman upgrade --dry-run")


def test_row_17_lint_without_index_is_an_error_and_every_bad_url_is_named(attack: CountingEnv, tmp_path: Path) -> None:
    from tests.support.catalog import board_toml

    cat = tmp_path / "cat"
    (cat / "boards").mkdir(parents=True)
    (cat / "boards/10de-2204-3842-3987.toml").write_text(
        board_toml([{"version": "94.02.42.80.27", "urls": ["http://a.example/x.rom", "https://"]}])
    )
    r = attack("catalog", "lint", "--dir", str(cat), "--json", "--root", str(tmp_path))
    assert r.code == 4
    errors = [f"{i['file']}: {i['message']}" for i in r.json()["issues"] if i["level"] == "error"]
    assert "index.json: no index: run `fwman catalog sign --key FILE`" in errors
    urls = next(e for e in errors if "is not https" in e)
    assert "'http://a.example/x.rom' is not https" in urls and "'https://' has no host name" in urls


def test_a_link_under_root_never_writes_outside_it(attack: CountingEnv, tmp_path: Path) -> None:
    # --root confinement: ROOT/etc is a link to an absolute path; writes follow it inside ROOT, never out
    outside = tmp_path / "real-etc"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "etc").symlink_to(outside)  # an absolute target: inside the root that is ROOT/<outside>
    r = attack("--root", str(root), "hooks", "install")
    assert r.code == 0, r.stderr
    assert list(outside.iterdir()) == []
    assert (root / str(outside).lstrip("/") / "kernel/postinst.d/fwman").is_file()
    (root / "etc").unlink()
    (root / "etc").symlink_to("../../../../../../../../" + str(outside).lstrip("/"))  # climbing out: clamped
    r = attack("--root", str(root), "hooks", "install")
    assert r.code == 0, r.stderr
    assert list(outside.iterdir()) == []


def test_a_container_root_link_never_reads_the_host(attack: CountingEnv, tmp_path: Path) -> None:
    # a container's library link pointing at an absolute path resolves inside the container root, never to the
    # host's file of that name
    root = materialize(EXAMPLE_HOST, tmp_path / "root")
    lib = root / "ct/usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    host_lib = root / "usr/lib/x86_64-linux-gnu"
    host_lib.mkdir(parents=True, exist_ok=True)
    (host_lib / "libcuda.so.999.99.99").write_text("")
    (lib / "libcuda.so.1").symlink_to("/usr/lib/x86_64-linux-gnu/libcuda.so.999.99.99")
    (lib / "libnvidia-ml.so.1").symlink_to("../../../../../../usr/lib/x86_64-linux-gnu/libcuda.so.999.99.99")
    r = CountingEnv(variables={"PATH": str(tmp_path)})(
        "--root", str(root), "audit", "--offline", "--container-root", "/ct", "--json"
    )
    assert r.code in (0, 4), r.stderr
    text = json.dumps(r.json()["containers"])
    # every path the container's report names is inside it: both links resolve under /ct, never to the host's
    # /usr/lib/x86_64-linux-gnu (file names only are read, so the version is the dangling target's name)
    assert "/ct/usr/lib/x86_64-linux-gnu/libcuda.so.999.99.99" in text
    assert "-> /usr/lib" not in text and '"/usr/lib' not in text
